// Reference (scalar) conversion between f32 and every supported DType. These
// define the formats' semantics, are the oracles of the SIMD kernels, and are
// what `skipkv make-model` uses to write quantised weights.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace skipkv {

// dst[0..n) = the values encoded in `src` (n elements of type t, n a
// multiple of BlockSize(t)). Supported: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, Q8_K.
void DequantizeRow(DType t, const void* src, float* dst, int64_t n);
// Encodes n floats as type t into dst (RowBytes(t, n) bytes).
void QuantizeRow(DType t, const float* src, void* dst, int64_t n);
// True if t can be (de)quantised by the functions above.
bool IsQuantizable(DType t);

}  // namespace skipkv
