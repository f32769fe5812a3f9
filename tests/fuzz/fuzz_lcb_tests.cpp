// libFuzzer target: LiveCodeBench's stored test cases (lcb_decode.h). The
// input is tried three ways: as the field text (JSON, or base64 of zlib of a
// pickle), as a raw pickle, and as a zlib stream. Any input must give a value
// or a Status, never a crash, a hang or an allocation past the caps.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "eval/lcb_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)skipkv::eval::DecodeTestCases(in);
  (void)skipkv::eval::UnpickleString(in);
  (void)skipkv::eval::ZlibInflate(in, size_t{1} << 24);
  return 0;
}
