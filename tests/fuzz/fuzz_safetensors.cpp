// libFuzzer target: the safetensors header parser. Accepted headers must
// describe byte ranges inside the image that do not overlap.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> buf(data, data + size);
  auto h = skipkv::ParseSafetensorsHeader(buf.data(), buf.size(), "fuzz.safetensors");
  if (!h.ok()) return 0;
  uint64_t prev_end = 0;
  for (const auto& e : h->tensors) {
    if (e.begin > e.end || h->data_start + e.end > size || e.begin < prev_end) std::abort();
    prev_end = e.end;
  }
  return 0;
}
