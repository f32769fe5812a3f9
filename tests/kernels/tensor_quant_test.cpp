// Reference (de)quantisation: hand-built blocks decode to hand-computed values
// (the bit layout is ggml's), quantise -> dequantise stays within per-type
// error bounds, and f16/bf16 conversions round to nearest even.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/interleaved.h"
#include "tensor/quant.h"

namespace skipkv {
namespace {

std::vector<float> Decode(DType t, const void* src, int64_t n) {
  std::vector<float> out(n);
  DequantizeRow(t, src, out.data(), n);
  return out;
}

TEST(QuantDecode, Q8_0HandBuiltBlock) {
  BlockQ8_0 b{};
  b.d = 0x3800;  // f16 0.5
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j - 16);
  const auto y = Decode(DType::kQ8_0, &b, 32);
  EXPECT_EQ(y[0], -8.0f);   // -16 * 0.5
  EXPECT_EQ(y[16], 0.0f);   //   0 * 0.5
  EXPECT_EQ(y[31], 7.5f);   //  15 * 0.5
  EXPECT_EQ(y[17], 0.5f);
}

TEST(QuantDecode, Q4_0HandBuiltBlock) {
  BlockQ4_0 b{};
  b.d = 0x4000;  // f16 2.0
  for (auto& q : b.qs) q = 0x88;  // both nibbles 8 -> 0
  b.qs[0] = 0x9F;  // element 0: low nibble 15 -> (15-8)*2 = 14; element 16: 9 -> 2
  b.qs[1] = 0x08;  // element 1: 8 -> 0; element 17: 0 -> -16
  const auto y = Decode(DType::kQ4_0, &b, 32);
  EXPECT_EQ(y[0], 14.0f);
  EXPECT_EQ(y[16], 2.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[17], -16.0f);
  EXPECT_EQ(y[5], 0.0f);
}

TEST(QuantDecode, Q4_KHandBuiltBlock) {
  BlockQ4_K b{};
  b.d = 0x3C00;     // 1.0
  b.dmin = 0x3800;  // 0.5
  // Sub-block 0: scale = scales[0] & 63 = 2, min = scales[4] & 63 = 3.
  // Sub-block 1: scale = scales[1] & 63 = 4, min = scales[5] & 63 = 1.
  // Sub-block 4: scale = (scales[8] & 15) | (scales[0] >> 6) << 4 = 1 | 16 = 17,
  //              min   = (scales[8] >> 4) | (scales[4] >> 6) << 4 = 5 | 32 = 37.
  b.scales[0] = 2 | (1 << 6);
  b.scales[4] = 3 | (2 << 6);
  b.scales[1] = 4;
  b.scales[5] = 1;
  b.scales[8] = 0x51;
  // qs[0..31] hold elements 0..31 (low nibbles) and 32..63 (high nibbles);
  // qs[64..95] hold elements 128..159 (low) and 160..191 (high).
  b.qs[0] = 0x7A;  // element 0: q = 10; element 32: q = 7
  b.qs[64] = 0x03;  // element 128: q = 3
  const auto y = Decode(DType::kQ4_K, &b, 256);
  EXPECT_FLOAT_EQ(y[0], 1.0f * 2 * 10 - 0.5f * 3);    // 18.5
  EXPECT_FLOAT_EQ(y[1], -0.5f * 3);                   // q = 0: -1.5
  EXPECT_FLOAT_EQ(y[32], 1.0f * 4 * 7 - 0.5f * 1);    // 27.5
  EXPECT_FLOAT_EQ(y[128], 1.0f * 17 * 3 - 0.5f * 37); // 32.5
  EXPECT_FLOAT_EQ(y[129], -0.5f * 37);                // -18.5
}

TEST(QuantDecode, Q6_KHandBuiltBlock) {
  BlockQ6_K b{};
  b.d = 0x3400;  // 0.25
  // q = (4 low bits from ql) | (2 high bits from qh) << 4, value = d * scale * (q - 32).
  // qh[0] = 0b00'01'11'10: element 0 gets 2, element 32 gets 3, element 64 gets 1, 96 gets 0.
  b.ql[0] = 0x5F;   // element 0 low = 15, element 64 low = 5
  b.ql[32] = 0x01;  // element 32 low = 1, element 96 low = 0
  b.qh[0] = 0x1E;
  b.scales[0] = 2;   // elements 0..15
  b.scales[1] = 5;   // elements 16..31
  b.scales[2] = -3;  // elements 32..47
  b.scales[4] = 4;   // elements 64..79
  b.scales[6] = 1;   // elements 96..111
  // Second half: ql[64..], qh[32..], scales[8..].
  b.ql[64] = 0x0C;
  b.qh[32] = 0x03;
  b.scales[8] = -1;
  const auto y = Decode(DType::kQ6_K, &b, 256);
  EXPECT_FLOAT_EQ(y[0], 0.25f * 2 * (47 - 32));     // 7.5
  EXPECT_FLOAT_EQ(y[16], 0.25f * 5 * (0 - 32));     // -40
  EXPECT_FLOAT_EQ(y[32], 0.25f * -3 * (49 - 32));   // -12.75
  EXPECT_FLOAT_EQ(y[64], 0.25f * 4 * (21 - 32));    // -11
  EXPECT_FLOAT_EQ(y[96], 0.25f * 1 * (0 - 32));     // -8
  EXPECT_FLOAT_EQ(y[128], 0.25f * -1 * (60 - 32));  // -7
}

TEST(QuantDecode, Q8_KHandBuiltBlock) {
  BlockQ8_K b{};
  b.d = 0.5f;
  b.qs[3] = -7;
  b.qs[255] = 127;
  const auto y = Decode(DType::kQ8_K, &b, 256);
  EXPECT_EQ(y[3], -3.5f);
  EXPECT_EQ(y[255], 63.5f);
  EXPECT_EQ(y[0], 0.0f);
}

TEST(QuantDecode, Q8_KQuantiserFillsBsums) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  std::vector<float> x(512);
  for (auto& v : x) v = nd(rng);
  std::vector<BlockQ8_K> b(2);
  QuantizeRow(DType::kQ8_K, x.data(), b.data(), 512);
  for (const auto& blk : b) {
    int amax = 0;
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) {
        sum += blk.qs[16 * g + i];
        amax = std::max(amax, std::abs(static_cast<int>(blk.qs[16 * g + i])));
      }
      EXPECT_EQ(blk.bsums[g], sum);
    }
    EXPECT_EQ(amax, 127);  // the largest magnitude maps to +-127, never -128
  }
}

// ---- f16 / bf16 rounding ------------------------------------------------------

uint16_t ToF16(float f) {
  uint16_t h;
  QuantizeRow(DType::kF16, &f, &h, 1);
  return h;
}
uint16_t ToBF16(float f) {
  uint16_t h;
  QuantizeRow(DType::kBF16, &f, &h, 1);
  return h;
}

TEST(QuantF16, RoundsToNearestEvenAndHandlesSpecials) {
  EXPECT_EQ(ToF16(1.0f), 0x3C00);
  EXPECT_EQ(ToF16(1.0f + std::ldexp(1.f, -11)), 0x3C00);      // tie -> even (mantissa 0)
  EXPECT_EQ(ToF16(1.0f + 3 * std::ldexp(1.f, -11)), 0x3C02);  // tie between 1 and 2 -> 2
  EXPECT_EQ(ToF16(1.0f + std::ldexp(1.1f, -11)), 0x3C01);     // above the tie -> up
  EXPECT_EQ(ToF16(65504.f), 0x7BFF);                          // largest finite
  EXPECT_EQ(ToF16(65519.f), 0x7BFF);                          // below the overflow tie
  EXPECT_EQ(ToF16(65520.f), 0x7C00);                          // tie rounds to even = inf
  EXPECT_EQ(ToF16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(ToF16(-std::numeric_limits<float>::infinity()), 0xFC00);
  const uint16_t nan = ToF16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
  EXPECT_EQ(ToF16(-0.0f), 0x8000);
  // Subnormals: 2^-24 is the smallest; 2^-25 is a tie with 0 -> 0 (even);
  // 3 * 2^-25 is a tie between 1 and 2 ulps -> 2.
  EXPECT_EQ(ToF16(std::ldexp(1.f, -24)), 0x0001);
  EXPECT_EQ(ToF16(std::ldexp(1.f, -25)), 0x0000);
  EXPECT_EQ(ToF16(std::ldexp(3.f, -25)), 0x0002);
  EXPECT_EQ(ToF16(std::ldexp(1.f, -14)), 0x0400);            // smallest normal
  EXPECT_EQ(ToF16(std::ldexp(1023.f, -24)), 0x03FF);         // largest subnormal

  const uint16_t halves[] = {0x0001, 0x03FF, 0x0400, 0x3C00, 0x7BFF, 0x7C00, 0xFC00, 0x8001};
  const float expect[] = {std::ldexp(1.f, -24), std::ldexp(1023.f, -24), std::ldexp(1.f, -14),
                          1.0f, 65504.f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), -std::ldexp(1.f, -24)};
  const auto y = Decode(DType::kF16, halves, 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], expect[i]) << i;
  const uint16_t hnan = 0x7E00;
  EXPECT_TRUE(std::isnan(Decode(DType::kF16, &hnan, 1)[0]));
}

TEST(QuantBF16, RoundsToNearestEvenAndHandlesSpecials) {
  EXPECT_EQ(ToBF16(1.0f), 0x3F80);
  EXPECT_EQ(ToBF16(1.0f + std::ldexp(1.f, -8)), 0x3F80);      // tie -> even
  EXPECT_EQ(ToBF16(1.0f + 3 * std::ldexp(1.f, -8)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(ToBF16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(ToBF16(std::numeric_limits<float>::max()), 0x7F80);  // rounds up to inf
  const uint16_t nan = ToBF16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0);
  EXPECT_EQ(ToBF16(std::ldexp(1.f, -133)), 0x0001);  // f32 subnormal kept as bf16 subnormal
  const uint16_t b[] = {0x3F80, 0xC000, 0x0001};
  const auto y = Decode(DType::kBF16, b, 3);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], std::ldexp(1.f, -133));
}

// ---- quantise -> dequantise error ---------------------------------------------

struct RoundTrip {
  DType type;
  double max_rel_rmse;  // RMS error / RMS(x) for gaussian data
};

class QuantRoundTrip : public ::testing::TestWithParam<RoundTrip> {};

TEST_P(QuantRoundTrip, GaussianErrorWithinBound) {
  const RoundTrip rt = GetParam();
  const int64_t n = 256 * 33;  // an odd number of super-blocks
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  // A few outliers and a constant region, as real weights have.
  x[5] = 9.f;
  x[1000] = -7.f;
  for (int i = 512; i < 768; ++i) x[i] = 0.25f;
  std::vector<uint8_t> q(RowBytes(rt.type, n));
  QuantizeRow(rt.type, x.data(), q.data(), n);
  const auto y = Decode(rt.type, q.data(), n);
  double err2 = 0, x2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(std::isfinite(y[i])) << i;
    err2 += (y[i] - x[i]) * double(y[i] - x[i]);
    x2 += x[i] * double(x[i]);
  }
  const double rel = std::sqrt(err2 / x2);
  EXPECT_LT(rel, rt.max_rel_rmse) << DTypeName(rt.type);
  // The encoding is stable: re-quantising the decoded values reproduces them.
  std::vector<uint8_t> q2(q.size());
  QuantizeRow(rt.type, y.data(), q2.data(), n);
  const auto y2 = Decode(rt.type, q2.data(), n);
  double drift2 = 0;
  for (int64_t i = 0; i < n; ++i) drift2 += (y2[i] - y[i]) * double(y2[i] - y[i]);
  EXPECT_LT(std::sqrt(drift2 / x2), rt.max_rel_rmse * 0.5) << DTypeName(rt.type);
  // Zeros encode to zeros.
  std::vector<float> z(256, 0.f);
  QuantizeRow(rt.type, z.data(), q.data(), 256);
  for (float v : Decode(rt.type, q.data(), 256)) ASSERT_EQ(v, 0.f);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantRoundTrip,
                         // Bounds sit ~15% above what the quantisers reach (llama.cpp's reach on
                         // gaussian data: q4_0 0.087, q4_K ~0.07, q6_K 0.018).
                         ::testing::Values(RoundTrip{DType::kF32, 1e-9},
                                           RoundTrip{DType::kF16, 3e-4},
                                           RoundTrip{DType::kBF16, 2e-3},
                                           RoundTrip{DType::kQ8_0, 0.0065},
                                           RoundTrip{DType::kQ8_K, 0.0085},
                                           RoundTrip{DType::kQ6_K, 0.021},
                                           RoundTrip{DType::kQ4_K, 0.082},
                                           RoundTrip{DType::kQ4_0, 0.10}),
                         [](const auto& info) { return std::string(DTypeName(info.param.type)); });

// Q8_0 per element: |x - q * d16| <= d / 2 + 127 * |d - d16| with d = amax / 127.
TEST(QuantRoundTrip, Q8_0PerElementBound) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> ud(-3.f, 3.f);
  std::vector<float> x(32 * 9);
  for (auto& v : x) v = ud(rng);
  std::vector<BlockQ8_0> b(9);
  QuantizeRow(DType::kQ8_0, x.data(), b.data(), x.size());
  const auto y = Decode(DType::kQ8_0, b.data(), x.size());
  for (int blk = 0; blk < 9; ++blk) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[blk * 32 + j]));
    const float d = amax / 127.f;
    const float d16 = F16ToF32(b[blk].d);
    for (int j = 0; j < 32; ++j) {
      EXPECT_LE(std::fabs(y[blk * 32 + j] - x[blk * 32 + j]),
                d / 2 + 127 * std::fabs(d - d16) + 1e-6f);
    }
  }
}

// Q4_K with an all-positive sub-block must not need a positive offset, and a
// sub-block spanning [-a, a] must use its min: both decode close to the input.
TEST(QuantRoundTrip, Q4_KShiftedSubBlocks) {
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) {
    const int sub = i / 32, l = i % 32;
    x[i] = sub % 2 == 0 ? 10.f + l * 0.1f : -1.f + l * (2.f / 31);
  }
  BlockQ4_K b;
  QuantizeRow(DType::kQ4_K, x.data(), &b, 256);
  const auto y = Decode(DType::kQ4_K, &b, 256);
  // Positive sub-blocks fit x ~= s * q with s ~= 13.1 / 15 (error <= s / 2);
  // the symmetric ones use their min and a fine scale.
  for (int i = 0; i < 256; ++i) EXPECT_NEAR(y[i], x[i], (i / 32) % 2 == 0 ? 0.45f : 0.08f) << i;
}

// ---- Q4_K and Q8_0 interleaved in groups of 16 rows (tensor/interleaved.h) --------

// Sub-block j's 6-bit (scale, min) written out from ggml's get_scale_min_k4.
void ScaleMinK4(const uint8_t* q, int j, int* sc, int* m) {
  *sc = j < 4 ? q[j] & 63 : (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
  *m = j < 4 ? q[j + 4] & 63 : (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
}

// Random bytes in every field (all 12 scale bytes' bits are meaningful),
// rows x (in / 256) Q4_K blocks.
std::vector<uint8_t> RandomQ4KRows(int64_t rows, int64_t in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(RowBytes(DType::kQ4_K, in) * rows);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

// Every field of every row lands where dtype.h's BlockQ4_Kx16 comments say.
TEST(Q4KInterleave, FieldsWhereTheLayoutSays) {
  const int64_t in = 512, rows = 32, nb = 2;
  const auto src = RandomQ4KRows(rows, in, 5);
  auto x = src;
  InterleaveRows(DType::kQ4_K, x.data(), rows, in);
  const auto* groups = reinterpret_cast<const BlockQ4_Kx16*>(x.data());
  for (int64_t row = 0; row < rows; ++row) {
    const auto* w = reinterpret_cast<const BlockQ4_K*>(src.data() + row * RowBytes(DType::kQ4_K, in));
    const int r = static_cast<int>(row % 16);
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ4_Kx16& g = groups[(row / 16) * nb + b];
      EXPECT_EQ(g.d[r], w[b].d);
      EXPECT_EQ(g.dmin[r], w[b].dmin);
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        ScaleMinK4(w[b].scales, j, &sc, &m);
        const int lo_sc = (g.sc_lo[(j / 2) * 16 + r] >> (4 * (j % 2))) & 15;
        const int lo_m = (g.m_lo[(j / 2) * 16 + r] >> (4 * (j % 2))) & 15;
        EXPECT_EQ(lo_sc | (((g.sc_hi[r] >> (2 * j)) & 3) << 4), sc) << "row " << row << " j " << j;
        EXPECT_EQ(lo_m | (((g.m_hi[r] >> (2 * j)) & 3) << 4), m) << "row " << row << " j " << j;
      }
      for (int e = 0; e < 256; ++e) {  // element e's quant, as DequantQ4_K reads it
        const int q = (w[b].qs[32 * (e / 64) + e % 32] >> (e % 64 < 32 ? 0 : 4)) & 15;
        const int p = e / 64, c = (e % 32) / 4, k = e % 4;
        EXPECT_EQ((g.qs[8 * p + c][4 * r + k] >> (e % 64 < 32 ? 0 : 4)) & 15, q)
            << "row " << row << " e " << e;
      }
    }
  }
}

// Lossless: each row taken back out is byte for byte the row that went in.
TEST(Q4KInterleave, RowsComeBackExactly) {
  for (const int64_t in : {256, 1536}) {
    const int64_t rows = 48;
    const auto src = RandomQ4KRows(rows, in, 11 + static_cast<uint32_t>(in));
    auto x = src;
    InterleaveRows(DType::kQ4_K, x.data(), rows, in);
    EXPECT_NE(0, std::memcmp(x.data(), src.data(), src.size()));
    std::vector<BlockQ4_K> row(in / 256);
    for (int64_t r = 0; r < rows; ++r) {
      ExtractRow(DType::kQ4_Kx16, x.data(), in, r, row.data());
      ASSERT_EQ(
          0, std::memcmp(row.data(), src.data() + r * RowBytes(DType::kQ4_K, in), RowBytes(DType::kQ4_K, in)))
          << "in " << in << " row " << r;
    }
  }
}

// Q8_0: each row's d and quants where BlockQ8_0x16's comments say, and back.
TEST(Q8_0Interleave, FieldsWhereTheLayoutSaysAndRowsComeBack) {
  const int64_t in = 96, rows = 32, nb = 3;
  std::mt19937 rng(17);
  std::vector<uint8_t> src(RowBytes(DType::kQ8_0, in) * rows);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  auto x = src;
  InterleaveRows(DType::kQ8_0, x.data(), rows, in);
  const auto* groups = reinterpret_cast<const BlockQ8_0x16*>(x.data());
  std::vector<BlockQ8_0> row(nb);
  for (int64_t r = 0; r < rows; ++r) {
    const auto* w = reinterpret_cast<const BlockQ8_0*>(src.data() + r * RowBytes(DType::kQ8_0, in));
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ8_0x16& g = groups[(r / 16) * nb + b];
      EXPECT_EQ(g.d[r % 16], w[b].d);
      for (int e = 0; e < 32; ++e)
        EXPECT_EQ(g.qs[e / 4][4 * (r % 16) + e % 4], w[b].qs[e]) << "row " << r << " e " << e;
    }
    ExtractRow(DType::kQ8_0x16, x.data(), in, r, row.data());
    ASSERT_EQ(0, std::memcmp(row.data(), w, RowBytes(DType::kQ8_0, in))) << "row " << r;
  }
}

// Q6_K: each row's d, scales and every element's 6-bit quant (as DequantQ6_K
// reads it from ql/qh) where BlockQ6_Kx16's comments say, and back byte for byte.
TEST(Q6KInterleave, FieldsWhereTheLayoutSaysAndRowsComeBack) {
  for (const int64_t in : {256, 512}) {
    const int64_t rows = 32, nb = in / 256;
    std::mt19937 rng(23 + static_cast<uint32_t>(in));
    std::vector<uint8_t> src(RowBytes(DType::kQ6_K, in) * rows);
    for (auto& b : src) b = static_cast<uint8_t>(rng());
    auto x = src;
    InterleaveRows(DType::kQ6_K, x.data(), rows, in);
    EXPECT_NE(0, std::memcmp(x.data(), src.data(), src.size()));
    const auto* groups = reinterpret_cast<const BlockQ6_Kx16*>(x.data());
    std::vector<BlockQ6_K> row(nb);
    for (int64_t r = 0; r < rows; ++r) {
      const auto* w = reinterpret_cast<const BlockQ6_K*>(src.data() + r * RowBytes(DType::kQ6_K, in));
      const int rr = static_cast<int>(r % 16);
      for (int64_t b = 0; b < nb; ++b) {
        const BlockQ6_Kx16& g = groups[(r / 16) * nb + b];
        EXPECT_EQ(g.d[rr], w[b].d);
        for (int j = 0; j < 16; ++j) EXPECT_EQ(g.sc[j][rr], w[b].scales[j]) << "row " << r << " j " << j;
        for (int e = 0; e < 256; ++e) {
          // ggml's Q6_K: in half h, l = e % 32 and i = (e % 128) / 32, the low
          // bits in ql[64 h + l + 32 (i % 2)] (nibble i / 2), the top bits in
          // qh[32 h + l] bits 2 i, 2 i + 1.
          const int h = e / 128, i = (e % 128) / 32, l = e % 32;
          const int want = ((w[b].ql[64 * h + l + 32 * (i % 2)] >> (4 * (i / 2))) & 15) |
                           (((w[b].qh[32 * h + l] >> (2 * i)) & 3) << 4);
          const int c = l / 4, k = l % 4;
          const int got = ((g.qs[h][c][i % 2][4 * rr + k] >> (4 * (i / 2))) & 15) |
                          (((g.qs[h][c][2][4 * rr + k] >> (2 * i)) & 3) << 4);
          EXPECT_EQ(got, want) << "row " << r << " e " << e;
        }
      }
      ExtractRow(DType::kQ6_Kx16, x.data(), in, r, row.data());
      ASSERT_EQ(0, std::memcmp(row.data(), w, RowBytes(DType::kQ6_K, in))) << "in " << in << " row " << r;
    }
  }
}

// F32 and F16: element k of row 16 g + r at index 16 k + r of group g, the
// bytes unchanged, and every row back out byte for byte.
TEST(FloatInterleave, ElementsWhereTheLayoutSaysAndRowsComeBack) {
  const int64_t rows = 48, in = 37;
  for (const DType t : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(DTypeName(t));
    const size_t elem = t == DType::kF32 ? 4 : 2, row_bytes = RowBytes(t, in);
    ASSERT_EQ(row_bytes, static_cast<size_t>(in) * elem);
    std::vector<uint8_t> file(rows * row_bytes);
    for (size_t i = 0; i < file.size(); ++i) file[i] = static_cast<uint8_t>(i * 131 + i / 7);
    std::vector<uint8_t> x = file;
    ASSERT_TRUE(CanInterleave(t, rows, in));
    InterleaveRows(t, x.data(), rows, in);
    const DType x16 = *InterleavedType(t);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t k = 0; k < in; ++k) {
        const size_t at = (static_cast<size_t>(r / 16) * 16 * in + k * 16 + r % 16) * elem;
        ASSERT_EQ(0, std::memcmp(x.data() + at, file.data() + r * row_bytes + k * elem, elem))
            << r << " " << k;
      }
      std::vector<uint8_t> row(row_bytes);
      ExtractRow(x16, x.data(), in, r, row.data());
      ASSERT_EQ(0, std::memcmp(row.data(), file.data() + r * row_bytes, row_bytes)) << r;
    }
  }
}

TEST(Q4KInterleave, OnlyWholeGroupsAndNeverAFileType) {
  EXPECT_TRUE(CanInterleave(DType::kQ4_K, 16, 256));
  EXPECT_TRUE(CanInterleave(DType::kQ8_0, 32, 64));
  EXPECT_FALSE(CanInterleave(DType::kQ4_K, 24, 256));
  EXPECT_FALSE(CanInterleave(DType::kQ4_K, 0, 256));
  EXPECT_FALSE(CanInterleave(DType::kQ4_K, 16, 128));
  EXPECT_FALSE(CanInterleave(DType::kQ8_0, 16, 48));
  EXPECT_TRUE(CanInterleave(DType::kQ6_K, 16, 256));
  EXPECT_FALSE(CanInterleave(DType::kQ6_K, 8, 256));
  EXPECT_FALSE(CanInterleave(DType::kQ4_0, 16, 256));
  EXPECT_FALSE(CanInterleave(DType::kQ4_Kx16, 16, 256));
  EXPECT_TRUE(CanInterleave(DType::kF16, 32, 37));
  EXPECT_TRUE(CanInterleave(DType::kF32, 16, 1));
  EXPECT_FALSE(CanInterleave(DType::kF16, 40, 64));
  EXPECT_FALSE(CanInterleave(DType::kBF16, 16, 64));
  EXPECT_FALSE(CanInterleave(DType::kF16x16, 16, 64));
  for (const DType x : {DType::kQ4_Kx16, DType::kQ8_0x16, DType::kQ6_Kx16, DType::kF32x16, DType::kF16x16}) {
    EXPECT_FALSE(LookupDType(static_cast<uint32_t>(x)).has_value());
    EXPECT_FALSE(DTypeFromName(DTypeName(x)).has_value());
    EXPECT_EQ(RowBytes(x, 512), RowBytes(FileTypeOf(x), 512));
    EXPECT_EQ(*InterleavedType(FileTypeOf(x)), x);
  }
}

}  // namespace
}  // namespace skipkv
