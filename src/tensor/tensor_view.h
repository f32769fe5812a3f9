// TensorView: a non-owning view of a weight tensor (usually inside an mmap).
// Dimensions use ggml's order: ne[0] is the innermost (contiguous) dimension,
// so a weight matrix W[out][in] has ne = {in, out}. Rows are contiguous and
// each row holds ne[0] elements of `type` (RowBytes(type, ne[0]) bytes).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "tensor/dtype.h"

namespace skipkv {

struct TensorView {
  std::string name;
  DType type = DType::kF32;
  int n_dims = 0;
  std::array<int64_t, 4> ne = {1, 1, 1, 1};
  const uint8_t* data = nullptr;

  int64_t NumElements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t NumRows() const { return ne[1] * ne[2] * ne[3]; }
  size_t RowBytesCount() const { return RowBytes(type, ne[0]); }
  size_t NumBytes() const { return RowBytesCount() * static_cast<size_t>(NumRows()); }
  const uint8_t* Row(int64_t r) const { return data + static_cast<size_t>(r) * RowBytesCount(); }
  std::string ShapeString() const;  // "[1536, 8960]"
};

}  // namespace skipkv
