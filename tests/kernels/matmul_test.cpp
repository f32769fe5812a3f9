// SIMD MatVec/MatMul vs the scalar oracle for every weight type, on every
// compiled Highway target, on sizes that are not multiples of the vector width
// or tile (rows 1, 7, 33; tokens 1..9; odd block counts), plus determinism:
// bit-identical results for 1 and 3 threads and for MatVec vs MatMul rows.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "kernels/ops.h"
#include "simd_targets.h"
#include "tensor/interleaved.h"
#include "tensor/quant.h"
#include "test_weights.h"

namespace skipkv {
namespace {

using kernels::ref::MatMul;

using testing::MakeWeights;
using testing::Weights;

std::vector<float> RandomVec(int64_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  v[0] = 4.f * scale;  // an outlier, as activations have
  return v;
}

// f32 -> bf16 -> f32, round to nearest even (finite inputs), written here
// independently of the kernel's vcvtneps2bf16.
float RoundToBf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  bits &= 0xFFFF0000u;
  std::memcpy(&v, &bits, 4);
  return v;
}

// The activations exactly as the SIMD path quantises them (see
// simd_internal.h): Q8_0/Q4_0 weights see 32-blocks with an f32 scale
// amax/127; K-quants see Q8_K (the reference QuantizeRow).
std::vector<float> QuantisedActivations(DType t, const std::vector<float>& x) {
  std::vector<float> out(x.size());
  if (t == DType::kQ8_0 || t == DType::kQ8_0x16 || t == DType::kQ4_0) {
    for (size_t b = 0; b < x.size() / 32; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
      const float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
      for (int j = 0; j < 32; ++j) out[b * 32 + j] = std::nearbyint(x[b * 32 + j] * id) * d;
    }
  } else if (t == DType::kQ4_K || t == DType::kQ4_Kx16 || t == DType::kQ6_K || t == DType::kQ6_Kx16) {
    std::vector<BlockQ8_K> q(x.size() / 256);
    QuantizeRow(DType::kQ8_K, x.data(), q.data(), x.size());
    DequantizeRow(DType::kQ8_K, q.data(), out.data(), x.size());
  } else if (t == DType::kBF16 && kernels::Bf16DotProducts()) {
    for (size_t i = 0; i < x.size(); ++i) out[i] = RoundToBf16(x[i]);
  } else {
    out = x;
  }
  return out;
}

struct Case {
  DType type;
  int64_t in;
};

class MatMulTest : public testing::SimdTargetTest {};

// For each type: SIMD == oracle on the quantised activations up to float
// summation order (tight), and == plain oracle up to activation quantisation.
TEST_P(MatMulTest, MatchesReferenceAllTypes) {
  const Case cases[] = {
      {DType::kF32, 37},   {DType::kF32, 224},  {DType::kF16, 37},  {DType::kF16, 200},
      {DType::kBF16, 37},  {DType::kBF16, 96},  {DType::kBF16, 200}, {DType::kQ8_0, 224}, {DType::kQ4_0, 224},
      {DType::kQ4_K, 768}, {DType::kQ6_K, 768},
  };
  ThreadPool pool(3);
  for (const Case& c : cases) {
    for (int64_t rows : {1, 7, 33}) {
      for (int64_t n : {1, 3, 6, 9, 17}) {
        SCOPED_TRACE(std::string(DTypeName(c.type)) + " in=" + std::to_string(c.in) +
                     " rows=" + std::to_string(rows) + " n=" + std::to_string(n));
        const Weights w = MakeWeights(c.type, c.in, rows, 11 + rows);
        const auto x = RandomVec(c.in * n, 5 + n, 0.5f);
        std::vector<float> y(n * rows), yq(n * rows), yref(n * rows);
        kernels::MatMul(w.view, x.data(), n, y.data(), pool);
        MatMul(w.view, x.data(), n, yref.data());
        std::vector<float> xq(x.size());
        for (int64_t t = 0; t < n; ++t) {
          std::vector<float> xt(x.begin() + t * c.in, x.begin() + (t + 1) * c.in);
          const auto q = QuantisedActivations(c.type, xt);
          std::copy(q.begin(), q.end(), xq.begin() + t * c.in);
        }
        MatMul(w.view, xq.data(), n, yq.data());
        // Scale of the sums: sum |w| |x| per output.
        std::vector<float> wrow(c.in);
        for (int64_t r = 0; r < rows; ++r) {
          kernels::ref::GetRow(w.view, r, wrow.data());
          for (int64_t t = 0; t < n; ++t) {
            double mag = 0;
            for (int64_t i = 0; i < c.in; ++i) mag += std::fabs(wrow[i] * x[t * c.in + i]);
            const float got = y[t * rows + r];
            ASSERT_NEAR(got, yq[t * rows + r], 1e-5 * mag + 1e-6) << "r=" << r << " t=" << t;
            const bool quant_act = c.type == DType::kQ8_0 || c.type == DType::kQ4_0 ||
                                   c.type == DType::kQ4_K || c.type == DType::kQ6_K;
            const bool bf16_act = c.type == DType::kBF16 && kernels::Bf16DotProducts();
            // bf16 rounding: |error| <= 2^-9 |x| per activation.
            const double act_tol = quant_act ? 1.5e-2 : bf16_act ? 2.0e-3 : 1e-5;
            ASSERT_NEAR(got, yref[t * rows + r], act_tol * mag + 1e-6)
                << "r=" << r << " t=" << t;
          }
        }
      }
    }
  }
}

TEST_P(MatMulTest, DeterministicAcrossThreadsAndTiles) {
  for (DType t : {DType::kF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(t));
    // n = 7: tails of every token tile; n = 37: full 4- and 8-token tiles,
    // 4-row tiles and (at 512 inputs, f16) a second token block.
    for (const int64_t n : {7, 37}) {
      const int64_t in = 512, rows = 133;
      const Weights w = MakeWeights(t, in, rows, 3);
      const auto x = RandomVec(in * n, 9);
      ThreadPool p1(1), p3(3);
      std::vector<float> y1(n * rows), y3(n * rows), yv(rows);
      kernels::MatMul(w.view, x.data(), n, y1.data(), p1);
      kernels::MatMul(w.view, x.data(), n, y3.data(), p3);
      ASSERT_EQ(0, std::memcmp(y1.data(), y3.data(), y1.size() * sizeof(float))) << "n=" << n;
      // Token t of a batch equals a lone MatVec of x[t], bit for bit.
      for (int64_t tok = 0; tok < n; ++tok) {
        kernels::MatVec(w.view, x.data() + tok * in, yv.data(), p3);
        ASSERT_EQ(0, std::memcmp(yv.data(), y1.data() + tok * rows, rows * sizeof(float))) << "n=" << n << " " << tok;
      }
    }
  }
}

// One batch of n tokens through a 1-thread and a `threads`-thread pool: bit
// for bit the same, equal to the oracle on the quantised activations, and
// token t (every `mv_step`-th) equal, bit for bit, to a lone MatVec of x[t].
void ExpectBatchMatchesOracleAndMatVec(DType t, int64_t in, int64_t rows, int64_t n, int threads,
                                       uint32_t seed, int64_t mv_step) {
  SCOPED_TRACE(DTypeName(t));
  ThreadPool p1(1), pn(threads);
  const Weights w = MakeWeights(t, in, rows, seed);
  const auto x = RandomVec(in * n, seed + 2, 0.5f);
  std::vector<float> y1(n * rows), yn(n * rows), yq(n * rows), yv(rows);
  kernels::MatMul(w.view, x.data(), n, y1.data(), p1);
  kernels::MatMul(w.view, x.data(), n, yn.data(), pn);
  ASSERT_EQ(0, std::memcmp(y1.data(), yn.data(), y1.size() * sizeof(float)));
  std::vector<float> xq(x.size());
  for (int64_t tok = 0; tok < n; ++tok) {
    const std::vector<float> xt(x.begin() + tok * in, x.begin() + (tok + 1) * in);
    const auto q = QuantisedActivations(t, xt);
    std::copy(q.begin(), q.end(), xq.begin() + tok * in);
  }
  MatMul(w.view, xq.data(), n, yq.data());
  std::vector<float> wrow(in);
  for (int64_t r = 0; r < rows; ++r) {
    kernels::ref::GetRow(w.view, r, wrow.data());
    for (int64_t tok = 0; tok < n; ++tok) {
      double mag = 0;
      for (int64_t i = 0; i < in; ++i) mag += std::fabs(wrow[i] * x[tok * in + i]);
      ASSERT_NEAR(y1[tok * rows + r], yq[tok * rows + r], 1e-5 * mag + 1e-6) << "r=" << r << " t=" << tok;
    }
  }
  for (int64_t tok = 0; tok < n; tok += mv_step) {
    kernels::MatVec(w.view, x.data() + tok * in, yv.data(), pn);
    ASSERT_EQ(0, std::memcmp(yv.data(), y1.data() + tok * rows, rows * sizeof(float))) << "token " << tok;
  }
}

// Batches larger than one cache block (ForEachCacheBlock, simd_internal.h):
// at in = 2560 every type's activations give several token blocks for n = 9
// (f32 4 tokens, bf16 4, Q8_0 8, Q8_K 8), and a 1-thread run's row chunks
// (1100 / 4 -> 280 rows) hold several row slices (f32 24 rows, f16/bf16 72,
// Q8_0 136, Q6_K 184, Q4_K/Q4_0 264). Checked against a 2-thread run (other
// chunks), the oracle and lone MatVecs.
TEST_P(MatMulTest, CacheBlockedBatchesMatchReferenceAndMatVec) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K}) {
    ExpectBatchMatchesOracleAndMatVec(t, 2560, 1100, 9, 2, 21, 4);
  }
}

// Q4_K decode (one token) takes runs of rows with the token's bsum pair sums
// on the stack, for rows of up to 128 blocks (Q4_KDecodeRows); a longer row,
// 129 blocks here, takes the batch path's per-row kernel. Both against the
// oracle and against batches, bit for bit, with runs of 32 rows and a rest.
TEST_P(MatMulTest, Q4KDecodeBeyondStackedPairSums) {
  ExpectBatchMatchesOracleAndMatVec(DType::kQ4_K, 129 * 256, 45, 2, 2, 41, 1);
  ExpectBatchMatchesOracleAndMatVec(DType::kQ4_K, 128 * 256, 45, 2, 2, 43, 1);
}

// Q4_K, Q6_K and Q8_0 interleaved in groups of 16 rows (kQ4_Kx16, kQ6_Kx16, kQ8_0x16): against the
// oracle, across thread counts and as lone MatVecs, for decode-sized and
// cache-blocked batches (in = 2560: several token blocks at n = 9; 1104 rows:
// several row slices per chunk), with 1 to 4-token tiles.
TEST_P(MatMulTest, InterleavedMatchesReferenceAndMatVec) {
  for (const DType t : {DType::kQ4_Kx16, DType::kQ6_Kx16, DType::kQ8_0x16}) {
    ExpectBatchMatchesOracleAndMatVec(t, 1536, 64, 1, 3, 61, 1);
    ExpectBatchMatchesOracleAndMatVec(t, 1536, 48, 7, 2, 62, 1);
    ExpectBatchMatchesOracleAndMatVec(t, 2560, 1104, 9, 2, 63, 4);
  }
  ExpectBatchMatchesOracleAndMatVec(DType::kQ8_0x16, 96, 32, 5, 2, 64, 1);  // an odd number of blocks
}

// F32 and F16 interleaved in groups of 16 rows (kF32x16, kF16x16; their
// outer-product tiles, matmul_float_x16-inl.h): against the oracle, across
// thread counts and as lone MatVecs, with every token-tile tail (n = 1..9, 17),
// odd lengths, rows that leave a group beside the 3-group tiles (64 = 48 +
// 16), several row slices (1104 rows of 2560 inputs) and long rows (8,960).
TEST_P(MatMulTest, FloatInterleavedMatchesReferenceAndMatVec) {
  for (const DType t : {DType::kF32x16, DType::kF16x16}) {
    for (const int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 17})
      ExpectBatchMatchesOracleAndMatVec(t, 37, 64, n, 3, 80, 1);
    ExpectBatchMatchesOracleAndMatVec(t, 1536, 48, 11, 2, 81, 1);
    ExpectBatchMatchesOracleAndMatVec(t, 2560, 1104, 9, 2, 82, 4);
    ExpectBatchMatchesOracleAndMatVec(t, 8960, 96, 10, 2, 83, 3);
  }
}

// The float interleaved layouts' contract: every (row, token) result is the
// fused chain acc = fma(w[r][k], x[t][k], acc) over k ascending from 0, so on
// every target that fuses (all x86 ones, not the portable EMU128 or SCALAR) it
// equals that chain computed here with std::fma, bit for bit, for decode and
// batch; on the portable ones it is close.
// The weights are read back through the file layout's rows (f16 widened by
// the reference DequantizeRow, not the kernel's conversion).
TEST(MatMulFloatInterleaved, EveryResultIsTheScalarFusedChain) {
  for (const DType x16 : {DType::kF32x16, DType::kF16x16}) {
    SCOPED_TRACE(DTypeName(x16));
    const int64_t in = 203, rows = 80;
    const Weights wf = MakeWeights(FileTypeOf(x16), in, rows, 91);
    const Weights wx = MakeWeights(x16, in, rows, 91);
    for (const int64_t n : {1, 10}) {
      const auto x = RandomVec(in * n, 92 + n, 0.5f);
      std::vector<float> want(n * rows), wrow(in);
      for (int64_t r = 0; r < rows; ++r) {
        DequantizeRow(FileTypeOf(x16), wf.view.Row(r), wrow.data(), in);
        for (int64_t t = 0; t < n; ++t) {
          float acc = 0.f;
          for (int64_t k = 0; k < in; ++k) acc = std::fma(wrow[k], x[t * in + k], acc);
          want[t * rows + r] = acc;
        }
      }
      ThreadPool pool(2);
      for (const int64_t target : testing::CompiledMatMulTargets()) {
        testing::SelectSimdTarget(target);
        SCOPED_TRACE(std::string(kernels::SimdPathName()) + " n=" + std::to_string(n));
        std::vector<float> y(n * rows);
        kernels::MatMul(wx.view, x.data(), n, y.data(), pool);
        const std::string name = kernels::SimdTargetName();
        if (name == "EMU128" || name == "SCALAR") {  // the portable targets need not fuse
          for (size_t i = 0; i < y.size(); ++i)
            EXPECT_NEAR(y[i], want[i], 1e-4f * (std::fabs(want[i]) + 1.f)) << i;
        } else {
          EXPECT_EQ(0, std::memcmp(want.data(), y.data(), y.size() * sizeof(float)));
        }
      }
      testing::SelectSimdTarget(0);
    }
  }
}

// The interleaved layout's results do not depend on the SIMD target (its
// integers are exact and its float steps fixed: matmul_x16-inl.h), and
// agree with the file layout's (another summation order) to float rounding.
void ExpectSameBitsOnEveryTargetCloseToFileLayout(DType type) {
  const int64_t in = 768, rows = 32, n = 6;
  const Weights wx = MakeWeights(type, in, rows, 71);
  const Weights wf = MakeWeights(FileTypeOf(type), in, rows, 71);
  const auto x = RandomVec(in * n, 72, 0.5f);
  ThreadPool pool(2);
  std::vector<float> first;
  for (const int64_t target : testing::CompiledMatMulTargets()) {
    testing::SelectSimdTarget(target);
    SCOPED_TRACE(kernels::SimdPathName());
    std::vector<float> yx(n * rows), yf(n * rows);
    kernels::MatMul(wx.view, x.data(), n, yx.data(), pool);
    kernels::MatMul(wf.view, x.data(), n, yf.data(), pool);
    if (first.empty()) first = yx;
    EXPECT_EQ(0, std::memcmp(first.data(), yx.data(), yx.size() * sizeof(float)));
    for (size_t i = 0; i < yx.size(); ++i) EXPECT_NEAR(yx[i], yf[i], 1e-5f * (std::fabs(yf[i]) + 1.f)) << i;
  }
  testing::SelectSimdTarget(0);
  EXPECT_FALSE(first.empty());
}

TEST(MatMulInterleaved, SameBitsOnEveryTargetCloseToFileLayout) {
  for (const DType x : {DType::kQ4_Kx16, DType::kQ6_Kx16, DType::kQ8_0x16}) {
    SCOPED_TRACE(DTypeName(x));
    ExpectSameBitsOnEveryTargetCloseToFileLayout(x);
  }
}

// A MatMulGroup of weights of every type (one shared quantisation per
// activation format, one parallel loop over all their rows): each output
// against the oracle on its quantised activations, and bit for bit equal to a
// lone MatMul of its weight, for 1, 2 and 3 threads and for decode (n = 1) and
// a batch. The row counts make chunks that end inside a weight and weights
// smaller than one chunk.
TEST_P(MatMulTest, GroupMatchesLoneProducts) {
  const int64_t in = 512;
  const struct {
    DType type;
    int64_t rows;
  } parts[] = {{DType::kQ4_K, 133},   {DType::kQ6_K, 40},    {DType::kQ4_K, 7},     {DType::kQ8_0, 64},
               {DType::kF16, 21},     {DType::kBF16, 9},     {DType::kQ4_0, 33},    {DType::kF32, 5},
               {DType::kQ4_Kx16, 48}, {DType::kQ8_0x16, 32}, {DType::kQ6_Kx16, 32}, {DType::kF16x16, 64},
               {DType::kF32x16, 16}};
  std::vector<Weights> ws;
  for (size_t i = 0; i < std::size(parts); ++i) ws.push_back(MakeWeights(parts[i].type, in, parts[i].rows, 50 + i));
  for (const int64_t n : {1, 5}) {
    const auto x = RandomVec(in * n, 77 + n, 0.5f);
    std::vector<std::vector<float>> lone(ws.size());
    ThreadPool p1(1);
    for (size_t i = 0; i < ws.size(); ++i) {
      lone[i].resize(n * parts[i].rows);
      kernels::MatMul(ws[i].view, x.data(), n, lone[i].data(), p1);
    }
    for (const int threads : {1, 2, 3}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " threads=" + std::to_string(threads));
      ThreadPool pool(threads);
      std::vector<std::vector<float>> ys(ws.size());
      std::vector<kernels::MatMulOut> outs;
      for (size_t i = 0; i < ws.size(); ++i) {
        ys[i].assign(n * parts[i].rows, -1.f);
        outs.push_back({&ws[i].view, ys[i].data()});
      }
      kernels::MatMulGroup(outs, x.data(), n, pool);
      for (size_t i = 0; i < ws.size(); ++i) {
        SCOPED_TRACE(std::string(DTypeName(parts[i].type)) + " part " + std::to_string(i));
        ASSERT_EQ(0, std::memcmp(ys[i].data(), lone[i].data(), ys[i].size() * sizeof(float)));
        // Against the oracle on this weight's quantised activations.
        const int64_t rows = parts[i].rows;
        std::vector<float> xq(x.size()), yq(n * rows), wrow(in);
        for (int64_t tok = 0; tok < n; ++tok) {
          const std::vector<float> xt(x.begin() + tok * in, x.begin() + (tok + 1) * in);
          const auto q = QuantisedActivations(parts[i].type, xt);
          std::copy(q.begin(), q.end(), xq.begin() + tok * in);
        }
        MatMul(ws[i].view, xq.data(), n, yq.data());
        for (int64_t r = 0; r < rows; ++r) {
          kernels::ref::GetRow(ws[i].view, r, wrow.data());
          for (int64_t tok = 0; tok < n; ++tok) {
            double mag = 0;
            for (int64_t k = 0; k < in; ++k) mag += std::fabs(wrow[k] * x[tok * in + k]);
            ASSERT_NEAR(ys[i][tok * rows + r], yq[tok * rows + r], 1e-5 * mag + 1e-6) << "r=" << r << " t=" << tok;
          }
        }
      }
    }
  }
}

// Decode products (one token, and decode batches of 3 and 16) on a pool with
// backup execution (ThreadPool::RunGuarded: each chunk computed into the
// worker's staging from the pool's copy of the activations, published by the
// first run to finish). Workers' runs are delayed at random so that the
// caller redoes some chunks; every output stays bit for bit equal to a lone
// single-threaded MatMul, over groups of up to four weights of every type,
// with chunks ending inside a weight.
TEST_P(MatMulTest, GuardedDecodeMatchesLoneProducts) {
  const int64_t in = 512;
  const std::vector<std::vector<std::pair<DType, int64_t>>> groups = {
      {{DType::kQ4_K, 133}, {DType::kQ6_K, 40}, {DType::kF16, 21}, {DType::kQ8_0, 64}},
      {{DType::kBF16, 9}, {DType::kQ4_0, 33}, {DType::kF32, 5}, {DType::kQ4_K, 7}},
      {{DType::kQ4_Kx16, 64}, {DType::kQ6_K, 40}, {DType::kQ4_K, 7}, {DType::kQ8_0x16, 48}},
      {{DType::kQ6_K, 300}},
      {{DType::kQ6_Kx16, 96}, {DType::kQ4_Kx16, 16}}};
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<Weights> ws;
    for (size_t i = 0; i < groups[g].size(); ++i) ws.push_back(MakeWeights(groups[g][i].first, in, groups[g][i].second, 90 + i));
    for (const int threads : {2, 3}) {
      SCOPED_TRACE("group " + std::to_string(g) + " threads=" + std::to_string(threads));
      ThreadPool p1(1);
      ThreadPool pool(threads);  // after ws: destroyed first (late runs read the weights)
      pool.SetBackupExecution(true);
      std::atomic<uint32_t> rng{7};
      pool.SetGuardedTaskHookForTest([&](int, int64_t) {
        const uint32_t r = rng.fetch_add(2654435761u) >> 16;
        if (r % 2 == 0) std::this_thread::sleep_for(std::chrono::microseconds(100 + r % 300));
      });
      // At least 40 iterations, and on until a chunk has been redone (up to 30
      // s). A worker claims chunks only if it runs when a loop starts, and these
      // loops take the caller microseconds, less than a sleeping worker's
      // wake-up on a loaded machine (3 of 3 runs beside a build redid nothing in
      // 2,000 single loops). So each iteration runs the group twice back to
      // back: the second loop starts while the workers still spin after the first.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      for (int it = 0; it < 40 || (pool.backup_runs() == 0 && std::chrono::steady_clock::now() < deadline);
           ++it) {
        const int64_t n = it % 3 == 0 ? 1 : it % 3 == 1 ? 3 : 16;
        const auto x = RandomVec(in * n, 300 + it, 0.5f);
        std::vector<std::vector<float>> lone(ws.size());
        for (size_t i = 0; i < ws.size(); ++i) {
          lone[i].resize(n * groups[g][i].second);
          kernels::MatMul(ws[i].view, x.data(), n, lone[i].data(), p1);
        }
        std::vector<std::vector<float>> ys[2];
        std::vector<kernels::MatMulOut> outs[2];
        for (int rep = 0; rep < 2; ++rep) {
          ys[rep].resize(ws.size());
          for (size_t i = 0; i < ws.size(); ++i) {
            ys[rep][i].assign(n * groups[g][i].second, -1.f);
            outs[rep].push_back({&ws[i].view, ys[rep][i].data()});
          }
        }
        kernels::MatMulGroup(outs[0], x.data(), n, pool);
        kernels::MatMulGroup(outs[1], x.data(), n, pool);
        for (int rep = 0; rep < 2; ++rep) {
          for (size_t i = 0; i < ws.size(); ++i) {
            ASSERT_EQ(0, std::memcmp(ys[rep][i].data(), lone[i].data(), lone[i].size() * sizeof(float)))
                << DTypeName(groups[g][i].first) << " part " << i << " n=" << n << " iteration " << it
                << " run " << rep;
          }
        }
      }
      EXPECT_GT(pool.backup_runs(), 0) << "no chunk was redone: the guarded path was not exercised";
    }
  }
}

// Float and bf16 weights with more inputs than one k slice of the bf16 dot
// product tiles (TileCacheBlock, simd_internal.h: 3,072 bf16 activations;
// float tiles read whole rows, so for them this is the long-row case): in =
// 3,237 gives two slices, the last with the odd vector and a tail
// that is not a multiple of any vector width; 50 rows give 3-row tiles and
// 2 rows left over (6-row float tiles on AVX-512: 8 tiles and 2 rows); n =
// 6 gives a group of 4 tokens and one of 2. Checked
// against a 3-thread run, the oracle and lone MatVecs of every token.
TEST_P(MatMulTest, KSlicedBatchesMatchReferenceAndMatVec) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    ExpectBatchMatchesOracleAndMatVec(t, 3237, 50, 6, 3, 31, 1);
  }
}

// Batches whose activations exceed kCachedActBytes (8 MiB; simd_internal.h)
// go in token groups of kGroupActBytes (2 MiB): 700 tokens of 3,237 f32
// inputs are 8.6 MiB, so groups of 160 tokens and a last one of 60. bf16
// activations (AVX3_DL with AVX512_BF16) stay one group, k-sliced.
// Against a 2-thread run, the oracle and lone MatVecs of every 7th token.
TEST_P(MatMulTest, TokenGroupsMatchReferenceAndMatVec) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    ExpectBatchMatchesOracleAndMatVec(t, 3237, 30, 700, 2, 41, 7);
  }
}

// Decode (fewer than 4 tokens in a cache block) with a token's activations
// over kDecodeRowActBytes (16 KiB; simd_internal.h) runs 3-row bf16 tiles,
// or for float weights 6 overlapped rows from 6 parts of the range
// (FloatDecodeParts), instead of one row at a time: in = 8,237 is 32.2 KiB of f32 and 16.1 KiB of bf16
// activations, with a tail that is not a multiple of any vector width; 50
// rows give whole tiles and 2 rows left over. n = 1 and 3 are decode
// throughout (3 tokens: a 2-token and a 1-token tile where float tiles take
// 2 tokens, AVX2 and scalar); n = 6 is a
// block of 4 tokens (k-sliced in bf16 tiles) and then a decode block of 2. Each against a
// 3-thread run, the oracle and lone MatVecs of every token.
TEST_P(MatMulTest, DecodeRowTilesOnLongActivations) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const int64_t n : {1, 3, 6}) {
      SCOPED_TRACE("n=" + std::to_string(n));
      ExpectBatchMatchesOracleAndMatVec(t, 8237, 50, n, 3, 61, 1);
    }
  }
}

// BF16 weights: bf16 dot products exactly where the CPU has AVX512_BF16 and
// the target is AVX3_DL, and then on bf16-rounded activations, worked by
// hand: weights (1, 1, 1), x = (1 + 2^-8, 1 + 2^-8, 1 + 3 * 2^-8). bf16 keeps
// 7 mantissa bits, so near 1 its step is 2^-7: 1 + 2^-8 is halfway between 1
// and 1 + 2^-7 and rounds to the even 1; 1 + 3 * 2^-8 is halfway between
// 1 + 2^-7 and 1 + 2^-6 and rounds to the even 1 + 2^-6. The dot is then
// 3 + 2^-6 = 3.015625; with f32 activations it is 3 + 5 * 2^-8 = 3.01953125.
TEST_P(MatMulTest, Bf16ActivationRounding) {
#if defined(__x86_64__)
  const bool cpu_bf16 = __builtin_cpu_supports("avx512bf16");
#else
  const bool cpu_bf16 = false;
#endif
  EXPECT_EQ(kernels::Bf16DotProducts(), cpu_bf16 && GetParam() == HWY_AVX3_DL);
  std::vector<uint16_t> wbits(3, 0x3F80);  // bf16 1.0
  TensorView w;
  w.name = "w";
  w.type = DType::kBF16;
  w.n_dims = 2;
  w.ne = {3, 1, 1, 1};
  w.data = reinterpret_cast<uint8_t*>(wbits.data());
  const float x[3] = {1.f + 0x1p-8f, 1.f + 0x1p-8f, 1.f + 3 * 0x1p-8f};
  float y = 0;
  ThreadPool pool(1);
  kernels::MatVec(w, x, &y, pool);
  EXPECT_EQ(y, kernels::Bf16DotProducts() ? 3.015625f : 3.01953125f);
}

INSTANTIATE_TEST_SUITE_P(Targets, MatMulTest, ::testing::ValuesIn(testing::CompiledMatMulTargets()),
                         testing::TargetParamName);

}  // namespace
}  // namespace skipkv
