// safetensors (https://github.com/huggingface/safetensors) header parsing:
// an 8-byte little-endian header length N, N bytes of JSON mapping tensor
// names to {dtype, shape, data_offsets: [begin, end]} (offsets relative to
// the data section that follows the header), optionally "__metadata__".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "util/status.h"

namespace skipkv {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;           // "F32", "F16", "BF16", "I64", ...
  std::vector<int64_t> shape;  // outermost first, as in PyTorch
  uint64_t begin = 0;          // byte range inside the data section
  uint64_t end = 0;
};

struct SafetensorsHeader {
  uint64_t data_start = 0;  // file offset of the data section (8 + header length)
  std::vector<SafetensorsEntry> tensors;  // in file order of data_offsets
  std::map<std::string, std::string> metadata;
};

// Bytes per element of a safetensors dtype, 0 if unknown.
size_t SafetensorsDTypeSize(const std::string& dtype);

// Parses and validates the header of a safetensors image of `size` bytes
// (`data` must hold at least the header; the data section is not read):
// header length bounded by the image size, valid JSON object, known dtypes,
// non-negative shapes, offsets inside the data section, shape x dtype size
// equal to the byte range, no overlapping ranges. `name` is used in errors.
StatusOr<SafetensorsHeader> ParseSafetensorsHeader(const uint8_t* data, size_t size, const std::string& name);

}  // namespace skipkv
