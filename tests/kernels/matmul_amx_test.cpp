// The Q8_0 AMX path (matmul_amx_x86.cpp) against a scalar oracle written
// from its documented formulation, exactly (bit for bit): per 32-block, in
// order, acc = fma(float(exact int32 block sum), f32(dw) * da, acc), with the
// activations quantised as ActQ8 (d = max|x| / 127, q = round-half-even(x *
// (1 / d))). Run on software tiles (any AVX-512 CPU) and on real tiles where
// the CPU and Linux allow AMX; a mode that cannot run here is skipped with
// the reason. Exact equality also proves that results do not depend on the
// token count (decode = batch), the thread count or the guarded decode loop.
// Q4_K on tiles likewise, against an oracle decoding the raw Q4_K bytes
// (ggml's block layout) and quantising the activations to Q8_K itself, per
// the formulation in matmul_amx_x86.cpp; and against the AVX-512 Q4_K kernel
// (AMX off) within float rounding, so the formulation cannot be wrong in the
// same way as its oracle.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "kernels/simd_internal.h"
#include "tensor/quant.h"
#include "util/fp16.h"

namespace skipkv {
namespace {

using kernels::internal::AmxMode;

struct Case {
  int64_t rows, in, n;
};

std::vector<uint8_t> RandomQ8_0(int64_t rows, int64_t in, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 0.05f);
  std::vector<uint8_t> w(RowBytes(DType::kQ8_0, in) * rows);
  std::vector<float> row(in);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = nd(rng);
    QuantizeRow(DType::kQ8_0, row.data(), w.data() + r * RowBytes(DType::kQ8_0, in), in);
  }
  return w;
}

// The oracle: the formulation above, from the raw bytes (Q8_0 block = f16
// scale + 32 int8).
std::vector<float> Oracle(const std::vector<uint8_t>& w, const std::vector<float>& x, const Case& c) {
  const int64_t nb = c.in / 32;
  const size_t row_bytes = static_cast<size_t>(nb) * 34;
  std::vector<float> y(c.rows * c.n);
  std::vector<int8_t> q(c.in);
  std::vector<float> d(nb);
  for (int64_t t = 0; t < c.n; ++t) {
    for (int64_t b = 0; b < nb; ++b) {
      float amax = 0.f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[t * c.in + 32 * b + i]));
      d[b] = amax / 127.f;
      const float inv = d[b] != 0.f ? 1.f / d[b] : 0.f;
      for (int i = 0; i < 32; ++i) q[32 * b + i] = static_cast<int8_t>(std::nearbyint(x[t * c.in + 32 * b + i] * inv));
    }
    for (int64_t r = 0; r < c.rows; ++r) {
      float acc = 0.f;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = w.data() + r * row_bytes + b * 34;
        uint16_t scale;
        std::memcpy(&scale, blk, 2);
        int32_t isum = 0;
        for (int i = 0; i < 32; ++i) isum += int32_t{static_cast<int8_t>(blk[2 + i])} * int32_t{q[32 * b + i]};
        acc = std::fmaf(static_cast<float>(isum), F16ToF32(scale) * d[b], acc);
      }
      y[t * c.rows + r] = acc;
    }
  }
  return y;
}

class AmxTest : public ::testing::TestWithParam<AmxMode> {
 protected:
  void SetUp() override {
    std::string why;
    if (!kernels::internal::SetAmxModeForTesting(GetParam(), &why)) GTEST_SKIP() << "not run here: " << why;
  }
  void TearDown() override { kernels::internal::ResetAmxModeForTesting(); }
};

TensorView Q8View(const std::vector<uint8_t>& w, int64_t rows, int64_t in) {
  TensorView v;
  v.name = "w";
  v.type = DType::kQ8_0;
  v.n_dims = 2;
  v.ne[0] = in;
  v.ne[1] = rows;
  v.data = w.data();
  return v;
}

void ExpectBitEqual(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(&got[i], &want[i], sizeof(float)))
        << what << ": element " << i << " = " << got[i] << ", oracle " << want[i];
  }
}

// The c.n tokens x as one batch (1 and 3 threads) and each token alone
// (decode) through the kernels, against `want` ([token][row]) bit for bit.
void ExpectBatchAndDecodeMatch(const TensorView& v, const std::vector<float>& x, const Case& c,
                               const std::vector<float>& want, const std::string& what) {
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    std::vector<float> y(c.rows * c.n, NAN);
    kernels::MatMul(v, x.data(), c.n, y.data(), pool);
    ExpectBitEqual(y, want, what + " batch, threads " + std::to_string(threads));
    std::vector<float> yt(c.rows);
    for (int64_t t = 0; t < c.n; ++t) {
      kernels::MatVec(v, x.data() + t * c.in, yt.data(), pool);
      ExpectBitEqual(yt, std::vector<float>(want.begin() + t * c.rows, want.begin() + (t + 1) * c.rows),
                     what + " decode of token " + std::to_string(t));
    }
  }
}

TEST_P(AmxTest, MatchesOracleExactly) {
  // Partial row groups (40, 24 rows), partial token groups (1, 3, 17, 40, 5,
  // 150 tokens), a single block (in = 32) and the FFN down projection's
  // length (8960).
  const Case cases[] = {{16, 32, 1}, {40, 256, 3}, {48, 1536, 17}, {24, 96, 40}, {32, 8960, 5}, {64, 1536, 150}};
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (const Case& c : cases) {
    const auto w = RandomQ8_0(c.rows, c.in, rng);
    std::vector<float> x(c.in * c.n);
    for (auto& v : x) v = nd(rng);
    x[0] = 0.f;  // a block with a zero beside others
    const auto want = Oracle(w, x, c);
    const TensorView v = Q8View(w, c.rows, c.in);
    const std::string what = std::to_string(c.rows) + "x" + std::to_string(c.in) + " n=" + std::to_string(c.n);
    ExpectBatchAndDecodeMatch(v, x, c, want, what);
  }
}

// Decode batches on a pool with backup execution take the guarded loop, which
// copies the activations (whole 16-token groups) for late runs.
TEST_P(AmxTest, GuardedDecodeLoopMatchesOracle) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  const Case c{96, 512, 5};
  const auto w = RandomQ8_0(c.rows, c.in, rng);
  std::vector<float> x(c.in * c.n);
  for (auto& v : x) v = nd(rng);
  ThreadPool pool(3);
  pool.SetBackupExecution(true);
  std::vector<float> y(c.rows * c.n, NAN);
  kernels::MatMul(Q8View(w, c.rows, c.in), x.data(), c.n, y.data(), pool);
  ExpectBitEqual(y, Oracle(w, x, c), "guarded decode batch");
}

// A group mixing Q8_0 (tile activations) with another format gives each
// product what it gives alone.
TEST_P(AmxTest, GroupWithOtherTypesMatchesLoneProducts) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t in = 256, n = 7;
  const auto wq8 = RandomQ8_0(48, in, rng);
  std::vector<float> wf(64 * in);
  for (auto& v : wf) v = 0.05f * nd(rng);
  std::vector<uint8_t> wk(RowBytes(DType::kQ4_K, in) * 64);
  for (int r = 0; r < 64; ++r) QuantizeRow(DType::kQ4_K, wf.data() + r * in, wk.data() + r * RowBytes(DType::kQ4_K, in), in);
  TensorView vk;
  vk.name = "wk";
  vk.type = DType::kQ4_K;
  vk.n_dims = 2;
  vk.ne[0] = in;
  vk.ne[1] = 64;
  vk.data = wk.data();
  const TensorView vq = Q8View(wq8, 48, in);
  std::vector<float> x(in * n);
  for (auto& v : x) v = nd(rng);
  ThreadPool pool(2);
  std::vector<float> yq(48 * n), yk(64 * n), lone_q(48 * n), lone_k(64 * n);
  const kernels::MatMulOut outs[] = {{&vq, yq.data()}, {&vk, yk.data()}};
  kernels::MatMulGroup(outs, x.data(), n, pool);
  kernels::MatMul(vq, x.data(), n, lone_q.data(), pool);
  kernels::MatMul(vk, x.data(), n, lone_k.data(), pool);
  ExpectBitEqual(yq, lone_q, "Q8_0 in a group");
  ExpectBitEqual(yk, lone_k, "Q4_K in a group");
  ExpectBitEqual(yq, Oracle(wq8, x, {48, in, n}), "Q8_0 in a group vs oracle");
}

// ---- Q4_K ------------------------------------------------------------------

// Rows of Q4_K blocks (144 bytes: f16 d, f16 dmin, 12 scale bytes, 128 nibble
// bytes). Odd cases are random bytes (every nibble and 6-bit scale value, d
// and dmin of either sign), the others QuantizeRow of normal floats.
std::vector<uint8_t> RandomQ4_K(int64_t rows, int64_t in, std::mt19937& rng, bool raw) {
  const size_t row_bytes = RowBytes(DType::kQ4_K, in);
  std::vector<uint8_t> w(row_bytes * rows);
  if (raw) {
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(-0.01f, 0.01f);
    for (size_t blk = 0; blk < w.size() / 144; ++blk) {
      uint8_t* p = w.data() + blk * 144;
      const uint16_t d = F32ToF16(scale(rng)), dmin = F32ToF16(scale(rng));
      std::memcpy(p, &d, 2);
      std::memcpy(p + 2, &dmin, 2);
      for (int i = 4; i < 144; ++i) p[i] = static_cast<uint8_t>(byte(rng));
    }
    return w;
  }
  std::normal_distribution<float> nd(0.f, 0.05f);
  std::vector<float> row(in);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = nd(rng);
    QuantizeRow(DType::kQ4_K, row.data(), w.data() + r * row_bytes, in);
  }
  return w;
}

TensorView View(DType type, const std::vector<uint8_t>& w, int64_t rows, int64_t in) {
  TensorView v;
  v.name = "w";
  v.type = type;
  v.n_dims = 2;
  v.ne[0] = in;
  v.ne[1] = rows;
  v.data = w.data();
  return v;
}

// One token's 256 activations as Q8_K (ggml's quantize_row_q8_K): amax =
// the signed value of largest magnitude (+ on a tie), d = amax / -127, q =
// min(127, round-half-even(x * (-127 / amax))); all 0 when amax is 0.
void OracleQ8K(const float* x, int8_t* q, float* d) {
  float mx = x[0], mn = x[0];
  for (int i = 1; i < 256; ++i) mx = std::max(mx, x[i]), mn = std::min(mn, x[i]);
  const float amax = mx >= -mn ? mx : mn;
  if (amax == 0.f) {
    std::memset(q, 0, 256);
    *d = 0.f;
    return;
  }
  const float iscale = -127.f / amax;
  for (int i = 0; i < 256; ++i) q[i] = static_cast<int8_t>(std::min(127.f, std::nearbyint(x[i] * iscale)));
  *d = 1.f / iscale;
}

// The Q4_K formulation of matmul_amx_x86.cpp from the raw bytes; `mag`, when
// given, gets per result the sum of the magnitudes of its terms (a scale for
// comparing with other roundings).
std::vector<float> OracleQ4K(const std::vector<uint8_t>& w, const std::vector<float>& x, const Case& c,
                             std::vector<double>* mag = nullptr) {
  const int64_t nsb = c.in / 256;
  const size_t row_bytes = static_cast<size_t>(nsb) * 144;
  std::vector<float> y(c.rows * c.n);
  if (mag != nullptr) mag->assign(c.rows * c.n, 0.0);
  std::vector<int8_t> q(c.in);
  std::vector<float> da(nsb);
  for (int64_t t = 0; t < c.n; ++t) {
    for (int64_t b = 0; b < nsb; ++b) OracleQ8K(&x[t * c.in + 256 * b], &q[256 * b], &da[b]);
    for (int64_t r = 0; r < c.rows; ++r) {
      float acc = 0.f;
      double sum_abs = 0.0;
      for (int64_t b = 0; b < nsb; ++b) {
        const uint8_t* blk = w.data() + r * row_bytes + b * 144;
        uint16_t dh, dminh;
        std::memcpy(&dh, blk, 2);
        std::memcpy(&dminh, blk + 2, 2);
        const uint8_t* sm = blk + 4;  // 12 bytes: 8 x (6-bit scale, 6-bit min)
        const uint8_t* qs = blk + 16;
        int32_t S = 0, M = 0;
        for (int s = 0; s < 8; ++s) {
          // Sub-blocks 0-3: low 6 bits of bytes s (scale) and s + 4 (min).
          // Sub-blocks 4-7: low nibble (scale) / high nibble (min) of byte
          // s + 4, with the top 2 bits of bytes s - 4 / s on top.
          const int sc = s < 4 ? sm[s] % 64 : sm[s + 4] % 16 + (sm[s - 4] / 64) * 16;
          const int mn = s < 4 ? sm[s + 4] % 64 : sm[s + 4] / 16 + (sm[s] / 64) * 16;
          int32_t isum = 0, asum = 0;
          for (int l = 0; l < 32; ++l) {
            const int e = 32 * s + l;  // element of the superblock
            const uint8_t byte = qs[32 * (e / 64) + e % 32];
            const int nibble = e % 64 < 32 ? byte % 16 : byte / 16;
            isum += nibble * q[256 * b + e];
            asum += q[256 * b + e];
          }
          S += sc * isum;
          M += mn * asum;
        }
        const float dd = F16ToF32(dh) * da[b], dm = F16ToF32(dminh) * da[b];
        acc = std::fmaf(static_cast<float>(S), dd, acc);
        acc = std::fmaf(static_cast<float>(M), -dm, acc);
        sum_abs +=
            std::fabs(double{static_cast<float>(S)} * dd) + std::fabs(double{static_cast<float>(M)} * dm);
      }
      y[t * c.rows + r] = acc;
      if (mag != nullptr) (*mag)[t * c.rows + r] = sum_abs;
    }
  }
  return y;
}

TEST_P(AmxTest, Q4_KMatchesOracleExactly) {
  // Partial row groups (40, 24, 33, 45 rows), partial token groups, one
  // superblock (in = 256) and the FFN down projection's length (8960). 45
  // rows end in a chunk of 13, which the one-token kernel takes as 4 parts
  // of 3 rows and 1 row left over.
  const Case cases[] = {{16, 256, 1},  {40, 512, 3},  {24, 1536, 17}, {33, 256, 40},
                        {32, 8960, 5}, {48, 1536, 70}, {45, 512, 2}};
  std::mt19937 rng(13);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (size_t k = 0; k < std::size(cases); ++k) {
    const Case& c = cases[k];
    const auto w = RandomQ4_K(c.rows, c.in, rng, k % 2 == 1);
    std::vector<float> x(c.in * c.n);
    for (auto& v : x) v = nd(rng);
    if (c.in > 256) std::fill(x.begin() + 256, x.begin() + 512, 0.f);  // a superblock of zeros (d = 0)
    const auto want = OracleQ4K(w, x, c);
    const TensorView v = View(DType::kQ4_K, w, c.rows, c.in);
    const std::string what =
        "Q4_K " + std::to_string(c.rows) + "x" + std::to_string(c.in) + " n=" + std::to_string(c.n);
    ExpectBatchAndDecodeMatch(v, x, c, want, what);
  }
}

// The tiles against the AVX-512 Q4_K kernel (AMX off), which sums in another
// order: equal within float rounding of the terms' magnitudes. Dropping the
// min term or misplacing nibbles breaks this by far more.
TEST_P(AmxTest, Q4_KMatchesNonAmxKernelWithinRounding) {
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (const Case& c : {Case{40, 1536, 19}, Case{32, 8960, 2}}) {
    for (bool raw : {false, true}) {
      const auto w = RandomQ4_K(c.rows, c.in, rng, raw);
      std::vector<float> x(c.in * c.n);
      for (auto& v : x) v = nd(rng);
      std::vector<double> mag;
      OracleQ4K(w, x, c, &mag);
      const TensorView v = View(DType::kQ4_K, w, c.rows, c.in);
      ThreadPool pool(2);
      std::vector<float> y(c.rows * c.n), y_off(c.rows * c.n);
      kernels::MatMul(v, x.data(), c.n, y.data(), pool);
      std::string why;
      ASSERT_TRUE(kernels::internal::SetAmxModeForTesting(AmxMode::kOff, &why)) << why;
      kernels::MatMul(v, x.data(), c.n, y_off.data(), pool);
      ASSERT_TRUE(kernels::internal::SetAmxModeForTesting(GetParam(), &why)) << why;
      double worst = 0.0;
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_GT(mag[i], 0.0);
        const double rel = std::fabs(double{y[i]} - double{y_off[i]}) / mag[i];
        worst = std::max(worst, rel);
        ASSERT_LE(rel, 1e-5) << "element " << i << ": AMX " << y[i] << ", AVX-512 " << y_off[i] << ", raw "
                             << raw;
      }
      char text[32];
      std::snprintf(text, sizeof text, "%.3g", worst);
      RecordProperty(raw ? "worst_rel_raw" : "worst_rel", text);
    }
  }
}

TEST_P(AmxTest, Q4_KGuardedDecodeLoopMatchesOracle) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  const Case c{96, 512, 5};
  const auto w = RandomQ4_K(c.rows, c.in, rng, true);
  std::vector<float> x(c.in * c.n);
  for (auto& v : x) v = nd(rng);
  ThreadPool pool(3);
  pool.SetBackupExecution(true);
  std::vector<float> y(c.rows * c.n, NAN);
  kernels::MatMul(View(DType::kQ4_K, w, c.rows, c.in), x.data(), c.n, y.data(), pool);
  ExpectBitEqual(y, OracleQ4K(w, x, c), "Q4_K guarded decode batch");
}

// A Q4_K_M-like group: Q4_K (kQ8KTiles), Q8_0 (kQ8Tiles) and Q6_K (still
// kQ8K and the AVX-512 kernel) in one MatMulGroup, as a batch and as a
// guarded decode step: each product equals its oracle (Q4_K, Q8_0) or the
// Q6_K product with AMX off.
TEST_P(AmxTest, Q4_KGroupWithQ8_0AndQ6_K) {
  std::mt19937 rng(19);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t in = 512;
  const auto w4 = RandomQ4_K(40, in, rng, false);
  const auto w8 = RandomQ8_0(24, in, rng);
  std::vector<float> wf(56 * in);
  for (auto& v : wf) v = 0.05f * nd(rng);
  std::vector<uint8_t> w6(RowBytes(DType::kQ6_K, in) * 56);
  for (int r = 0; r < 56; ++r) {
    QuantizeRow(DType::kQ6_K, wf.data() + r * in, w6.data() + r * RowBytes(DType::kQ6_K, in), in);
  }
  const TensorView v4 = View(DType::kQ4_K, w4, 40, in), v8 = Q8View(w8, 24, in),
                   v6 = View(DType::kQ6_K, w6, 56, in);
  for (int64_t n : {int64_t{1}, int64_t{4}, int64_t{21}}) {
    std::vector<float> x(in * n);
    for (auto& v : x) v = nd(rng);
    for (bool guarded : {false, true}) {
      ThreadPool pool(3);
      pool.SetBackupExecution(guarded);
      std::vector<float> y4(40 * n, NAN), y8(24 * n, NAN), y6(56 * n, NAN), y6_off(56 * n, NAN);
      const kernels::MatMulOut outs[] = {{&v4, y4.data()}, {&v6, y6.data()}, {&v8, y8.data()}};
      kernels::MatMulGroup(outs, x.data(), n, pool);
      std::string why;
      ASSERT_TRUE(kernels::internal::SetAmxModeForTesting(AmxMode::kOff, &why)) << why;
      kernels::MatMul(v6, x.data(), n, y6_off.data(), pool);
      ASSERT_TRUE(kernels::internal::SetAmxModeForTesting(GetParam(), &why)) << why;
      const std::string what = " in a group, n=" + std::to_string(n) + (guarded ? " guarded" : "");
      ExpectBitEqual(y4, OracleQ4K(w4, x, {40, in, n}), "Q4_K" + what);
      ExpectBitEqual(y8, Oracle(w8, x, {24, in, n}), "Q8_0" + what);
      ExpectBitEqual(y6, y6_off, "Q6_K" + what);
    }
  }
}

std::string ModeName(const ::testing::TestParamInfo<AmxMode>& info) {
  return info.param == AmxMode::kTiles ? "Tiles" : "SoftwareTiles";
}

INSTANTIATE_TEST_SUITE_P(Modes, AmxTest, ::testing::Values(AmxMode::kSoftware, AmxMode::kTiles), ModeName);

}  // namespace
}  // namespace skipkv
