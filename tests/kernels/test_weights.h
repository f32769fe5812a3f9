// Weight matrices for the kernel tests: rows of a file type (random floats
// through the library's QuantizeRow, or given bytes), interleaved in groups of
// 16 when the requested type is an interleaved one (kQ4_Kx16, kQ8_0x16), with
// a TensorView over them.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "tensor/interleaved.h"
#include "tensor/quant.h"
#include "tensor/tensor_view.h"

namespace skipkv::testing {

struct Weights {
  std::vector<uint8_t> bytes;
  TensorView view;
};

// `bytes`: rows x RowBytes(FileTypeOf(type), in) bytes of the file type.
inline Weights WrapWeights(DType type, std::vector<uint8_t> bytes, int64_t in, int64_t rows) {
  Weights w;
  w.bytes = std::move(bytes);
  const DType file_type = FileTypeOf(type);
  if (file_type != type) InterleaveRows(file_type, w.bytes.data(), rows, in);
  w.view.name = "w";
  w.view.type = type;
  w.view.n_dims = 2;
  w.view.ne = {in, rows, 1, 1};
  w.view.data = w.bytes.data();
  return w;
}

// Rows of normal(0, sd) floats quantised to FileTypeOf(type).
inline Weights MakeWeights(DType type, int64_t in, int64_t rows, uint32_t seed, float sd = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, sd);
  const DType file_type = FileTypeOf(type);
  const size_t row_bytes = RowBytes(file_type, in);
  std::vector<uint8_t> bytes(row_bytes * rows);
  std::vector<float> row(in);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = nd(rng);
    QuantizeRow(file_type, row.data(), bytes.data() + r * row_bytes, in);
  }
  return WrapWeights(type, std::move(bytes), in, rows);
}

}  // namespace skipkv::testing
