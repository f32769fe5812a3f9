// Element and block types, numbered as GGUF/ggml numbers them (so a GGUF
// tensor's type field maps directly), with the quantised block layouts.
// Contract: a row of n elements of type t occupies RowBytes(t, n) bytes and n
// must be a multiple of BlockSize(t).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "util/fp16.h"

namespace skipkv {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
  // skipkv's own layouts, never in a file (LookupDType rejects their ids).
  kF32x16 = 1000,   // F32 rows interleaved in groups of 16: element k of row r at [k][r]
  kF16x16 = 1001,   // F16 rows interleaved in groups of 16, as kF32x16
  kQ8_0x16 = 1008,  // Q8_0 rows interleaved in groups of 16 (BlockQ8_0x16)
  kQ4_Kx16 = 1012,  // Q4_K rows interleaved in groups of 16 (BlockQ4_Kx16)
  kQ6_Kx16 = 1014,  // Q6_K rows interleaved in groups of 16 (BlockQ6_Kx16)
};
// Type ids from here on are skipkv-internal layouts.
constexpr uint32_t kFirstInternalDType = 1000;

struct DTypeInfo {
  DType type;
  const char* name;     // "f32", "q4_K", ... as llama.cpp prints them
  int64_t block_size;   // elements per block (1 for plain types)
  size_t block_bytes;   // bytes per block
  bool supported;       // skipkv can dequantise / compute with it
};

// Information for every type GGUF defines that skipkv knows the size of;
// nullopt for unknown type ids (a GGUF reader must reject those) and for
// skipkv's internal layouts (>= kFirstInternalDType), which no file holds.
std::optional<DTypeInfo> LookupDType(uint32_t id);
const DTypeInfo& GetDTypeInfo(DType t);  // CHECKs that t is known
inline const char* DTypeName(DType t) { return GetDTypeInfo(t).name; }
std::optional<DType> DTypeFromName(std::string_view name);  // "q8_0", "Q4_K", "f16", ... (file types only)

inline int64_t BlockSize(DType t) { return GetDTypeInfo(t).block_size; }
// Bytes for a row of n elements; n must be a multiple of BlockSize(t).
inline size_t RowBytes(DType t, int64_t n) {
  const auto& info = GetDTypeInfo(t);
  return static_cast<size_t>(n / info.block_size) * info.block_bytes;
}

// ---- Block layouts (bit-compatible with ggml) -----------------------------

constexpr int kQK4_0 = 32;
struct BlockQ4_0 {
  f16_t d;                 // scale
  uint8_t qs[kQK4_0 / 2];  // nibbles: element i in low nibble of qs[i], i+16 in high nibble; value = (q - 8) * d
};
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block is 18 bytes");

constexpr int kQK8_0 = 32;
struct BlockQ8_0 {
  f16_t d;             // scale
  int8_t qs[kQK8_0];   // value = q * d
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block is 34 bytes");

// kQ8_0x16: 16 Q8_0 rows r = 0..15 (a group), block b of all 16 in one
// BlockQ8_0x16, laid out as kQ4_Kx16 is (see there; tensor/interleaved.h).
struct BlockQ8_0x16 {
  f16_t d[16];       // row r's d
  int8_t qs[8][64];  // [c][4 r + k]: row r's q of element 4 c + k
};
static_assert(sizeof(BlockQ8_0x16) == 16 * sizeof(BlockQ8_0), "a Q8_0x16 block is 16 Q8_0 blocks");

constexpr int kQK_K = 256;        // super-block size of the K-quants
constexpr int kKScaleBytes = 12;  // packed 6-bit scales and mins of Q4_K

// Q4_K: 8 sub-blocks of 32; value = d * scale_j * q - dmin * min_j, q in [0, 15].
struct BlockQ4_K {
  f16_t d;                      // super-block scale for the scales
  f16_t dmin;                   // super-block scale for the mins
  uint8_t scales[kKScaleBytes]; // 8 x (6-bit scale, 6-bit min), packed as in ggml get_scale_min_k4
  uint8_t qs[kQK_K / 2];        // 4-bit quants, 64 elements per 32 bytes (low nibbles first)
};
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block is 144 bytes");

// kQ4_Kx16: the same numbers as 16 Q4_K rows r = 0..15 (a group), superblock
// b of all 16 rows in one BlockQ4_Kx16, so that one SIMD lane per row
// computes 16 dot products with no horizontal sums (tensor/interleaved.h
// converts). A weight of this type has a multiple of 16 rows; rows 16g ..
// 16g + 15 occupy the 16 * RowBytes bytes from row 16g on (so RowBytes and
// NumBytes equal Q4_K's), but a single row is not contiguous. With (sc_j, m_j)
// row r's 6-bit scale and min of sub-block j (get_scale_min_k4) and
// q_e its 4-bit quant of element e = 32 j + i:
struct BlockQ4_Kx16 {
  f16_t d[16];         // row r's d
  f16_t dmin[16];      // row r's dmin
  uint8_t sc_lo[64];   // [j / 2][r]: low 4 bits of sc_j in bits 4 (j % 2) .. 4 (j % 2) + 3
  uint8_t m_lo[64];    // [j / 2][r]: the same for m_j
  uint16_t sc_hi[16];  // [r]: the top 2 bits of sc_j in bits 2 j, 2 j + 1
  uint16_t m_hi[16];   // [r]: the same for m_j
  uint8_t qs[32][64];  // [8 p + c][4 r + k]: q_e of e = 64 p + 4 c + k (low nibble), e + 32 (high)
};
static_assert(sizeof(BlockQ4_Kx16) == 16 * sizeof(BlockQ4_K), "a Q4_Kx16 block is 16 Q4_K blocks");

// Q6_K: 16 sub-blocks of 16; value = d * scales[j] * (q - 32), q in [0, 63].
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];      // lower 4 bits
  uint8_t qh[kQK_K / 4];      // upper 2 bits
  int8_t scales[kQK_K / 16];  // 8-bit sub-block scales
  f16_t d;                    // super-block scale
};
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block is 210 bytes");

// kQ6_Kx16: 16 Q6_K rows r = 0..15 (a group), superblock b of all 16 in one
// BlockQ6_Kx16, as kQ4_Kx16 does for Q4_K (same contract on rows and bytes).
// Row r's value of element e is d_r * sc[e / 16][r] * (q_e - 32). With
// e = 128 h + 4 c + k (h < 2, c < 8, k < 4), chunk qs[h][c][s][4 r + k]
// holds, as ggml's Q6_K bytes ql[64 h + 4 c + k], ql[64 h + 32 + 4 c + k]
// and qh[32 h + 4 c + k] do (so a row's bytes move 4 at a time):
//   s = 0: the low 4 bits of q_e (low nibble) and of q_{e+64} (high nibble);
//   s = 1: the same for q_{e+32} and q_{e+96};
//   s = 2: the top 2 bits of q_{e + 32 i} in bits 2 i, 2 i + 1 (i < 4).
// The three chunks of one (h, c) are adjacent, so a kernel reads the quants
// in address order.
struct BlockQ6_Kx16 {
  f16_t d[16];              // row r's d
  int8_t sc[16][16];        // [j][r]: row r's scale of sub-block j (elements 16 j .. 16 j + 15)
  uint8_t qs[2][8][3][64];  // see above
};
static_assert(sizeof(BlockQ6_Kx16) == 16 * sizeof(BlockQ6_K), "a Q6_Kx16 block is 16 Q6_K blocks");

// Q8_K: activation format of the K-quant dot products (never stored in files).
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];  // sums of groups of 16 quants
};
static_assert(sizeof(BlockQ8_K) == 292, "Q8_K block is 292 bytes");

}  // namespace skipkv
