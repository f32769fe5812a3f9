// Conversion between file rows and skipkv's 16-row interleaved layouts
// (DType::kQ4_Kx16, kQ6_Kx16 and kQ8_0x16; their blocks in dtype.h):
// block b of 16 consecutive rows (a group) in one interleaved block, so that
// one SIMD lane per row computes 16 dot products at once. Float rows
// (kF32x16, kF16x16) are the same with one element as the block: element k
// of row 16g + r at index 16k + r of group g (the group transposed). Lossless
// both ways (the Q4_K 12-byte scale record is a bijection of its sixteen 6-bit
// values), so a row taken back out is byte for byte the row that went in.
#pragma once

#include <cstdint>
#include <optional>

#include "tensor/dtype.h"

namespace skipkv {

// The interleaved layout of a file type (kQ4_K -> kQ4_Kx16, kQ6_K ->
// kQ6_Kx16, kQ8_0 -> kQ8_0x16, kF32 -> kF32x16, kF16 -> kF16x16), nullopt for
// the others; and back (FileTypeOf(kQ4_Kx16) == kQ4_K, any other type is
// returned as is).
std::optional<DType> InterleavedType(DType file_type);
DType FileTypeOf(DType t);

// True when a matrix of `rows` rows of `in` elements of type t can be
// interleaved: InterleavedType(t) exists, rows is a positive multiple of 16
// and in a positive multiple of t's block size.
bool CanInterleave(DType t, int64_t rows, int64_t in);

// Rewrites `rows` rows of `in` elements of type t at `data` (RowBytes(t, in)
// apart) in its interleaved layout, in place: the bytes of rows 16g ..
// 16g + 15 become group g. CanInterleave(t, rows, in) must hold.
void InterleaveRows(DType t, uint8_t* data, int64_t rows, int64_t in);

// Row `row` of an interleaved matrix of type `x` (whose groups start at
// `data`) as the RowBytes(FileTypeOf(x), in) bytes of the row it was made from.
void ExtractRow(DType x, const uint8_t* data, int64_t in, int64_t row, void* out);

}  // namespace skipkv
