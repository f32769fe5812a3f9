// libFuzzer target: GgufFile::FromMemory on arbitrary bytes. Accepted images
// must expose only in-bounds tensors and printable metadata.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Own copy so ASan catches reads past the end of the image.
  std::vector<uint8_t> buf(data, data + size);
  auto f = skipkv::GgufFile::FromMemory(buf.data(), buf.size(), "fuzz.gguf");
  if (!f.ok()) return 0;
  for (const auto& t : (*f)->tensors()) {
    if (t.data < buf.data() || t.data + t.NumBytes() > buf.data() + buf.size()) std::abort();
  }
  for (const auto& [key, value] : (*f)->metadata().entries()) (void)value.ToString();
  return 0;
}
