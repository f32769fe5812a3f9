// The Q8_0 AMX path (matmul_amx_x86.cpp) against a scalar oracle written
// from its documented formulation, exactly (bit for bit): per 32-block, in
// order, acc = fma(float(exact int32 block sum), f32(dw) * da, acc), with the
// activations quantised as ActQ8 (d = max|x| / 127, q = round-half-even(x *
// (1 / d))). Run on software tiles (any AVX-512 CPU) and on real tiles where
// the CPU and Linux allow AMX; a mode that cannot run here is skipped with
// the reason. Exact equality also proves that results do not depend on the
// token count (decode = batch), the thread count or the guarded decode loop.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      std::vector<float> y(c.rows * c.n, NAN);
      kernels::MatMul(v, x.data(), c.n, y.data(), pool);
      ExpectBitEqual(y, want, what + " batch, threads " + std::to_string(threads));
      std::vector<float> yt(c.rows);
      for (int64_t t = 0; t < c.n; ++t) {  // each token alone (decode)
        kernels::MatVec(v, x.data() + t * c.in, yt.data(), pool);
        ExpectBitEqual(yt, std::vector<float>(want.begin() + t * c.rows, want.begin() + (t + 1) * c.rows),
                       what + " decode of token " + std::to_string(t));
      }
    }
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

std::string ModeName(const ::testing::TestParamInfo<AmxMode>& info) {
  return info.param == AmxMode::kTiles ? "Tiles" : "SoftwareTiles";
}

INSTANTIATE_TEST_SUITE_P(Modes, AmxTest, ::testing::Values(AmxMode::kSoftware, AmxMode::kTiles), ModeName);

}  // namespace
}  // namespace skipkv
