// Conversion between Q4_K rows and skipkv's 16-row interleaved layout
// (DType::kQ4_Kx16, BlockQ4_Kx16 in dtype.h). Lossless both ways: the Q4_K
// 12-byte scale record is a bijection of its sixteen 6-bit values, so a row
// taken back out is byte for byte the row that went in.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace skipkv {

// True when a Q4_K matrix of `rows` rows of `in` elements can be interleaved:
// rows a positive multiple of 16, in a positive multiple of 256.
bool CanInterleaveQ4K(int64_t rows, int64_t in);

// Rewrites `rows` Q4_K rows of `in` elements at `data` (RowBytes(kQ4_K, in)
// apart) as rows / 16 groups of in / 256 BlockQ4_Kx16, in place: the bytes
// of rows 16g .. 16g + 15 become group g. CanInterleaveQ4K(rows, in) must hold.
void InterleaveQ4KRows(uint8_t* data, int64_t rows, int64_t in);

// Row `row` of an interleaved matrix (whose groups start at `data`) as the
// in / 256 Q4_K blocks it was made from.
void ExtractQ4KRow(const uint8_t* data, int64_t in, int64_t row, BlockQ4_K* out);

}  // namespace skipkv
