// Panel products (kernels/panel_matmul.h), ConvertF16ToF32, ReadSweep and FmaChains against their
// scalar oracles on every compiled target, on sizes that are not multiples
// of the tile (6 rows) or the panel (16 columns) or the vector width; the
// Gram pass's hits, sums and tile order, and the target actually used.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/ops.h"
#include "kernels/panel_matmul.h"
#include "simd_targets.h"

namespace skipkv {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

std::vector<float> Packed(const std::vector<float>& b, int64_t n, int d) {
  std::vector<float> p(kernels::PackedPanelFloats(n, d), -1.f);
  kernels::PackPanels(b.data(), n, d, p.data());
  return p;
}

class PanelMatMulTest : public testing::SimdTargetTest {};

TEST_P(PanelMatMulTest, PackPanelsLayout) {
  const int64_t n = 19;
  const int d = 3;
  const auto b = Random(n * d, 1);
  const auto p = Packed(b, n, d);
  ASSERT_EQ(p.size(), 32u * 3);
  for (int64_t j = 0; j < 32; ++j)
    for (int k = 0; k < d; ++k)
      EXPECT_EQ(p[((j / 16) * d + k) * 16 + j % 16], j < n ? b[j * d + k] : 0.f) << j << "," << k;
}

TEST_P(PanelMatMulTest, MatMulABtMatchesReference) {
  for (auto [m, n, d] : {std::tuple{1, 1, 1}, {7, 17, 5}, {13, 33, 128}, {6, 16, 3}, {25, 100, 64}, {5, 15, 9}}) {
    const auto a = Random(m * d, 2), b = Random(n * d, 3);
    const auto p = Packed(b, n, d);
    // ldc > n: columns past n must stay untouched.
    const int64_t ldc = n + 3;
    std::vector<float> c(m * ldc, 42.f), want(m * ldc, 42.f);
    kernels::MatMulABtPacked(a.data(), m, p.data(), n, d, c.data(), ldc);
    kernels::ref::MatMulABtPacked(a.data(), m, p.data(), n, d, want.data(), ldc);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < ldc; ++j)
        ASSERT_NEAR(c[i * ldc + j], want[i * ldc + j], 1e-5 * (1 + std::abs(want[i * ldc + j]) + d))
            << m << "x" << n << "x" << d << " at " << i << "," << j;
    // The convenience form packs B itself.
    std::vector<float> c2(m * n);
    kernels::MatMulABt(a.data(), m, b.data(), n, d, c2.data());
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) ASSERT_EQ(c2[i * n + j], c[i * ldc + j]);
  }
  EXPECT_STREQ(kernels::LastPanelTargetName(), kernels::SimdTargetName());
}

TEST_P(PanelMatMulTest, SameRowsGiveSameBitsAnywhere) {
  // One dot product, computed as row 0 of a 1-row call and as row 4 of a
  // 6-row call against a panel at another column: bit-identical.
  const int d = 37;
  const auto x = Random(40 * d, 4);
  const auto p = Packed(x, 40, d);
  std::vector<float> one(40), six(6 * 40);
  kernels::MatMulABtPacked(x.data() + 9 * d, 1, p.data(), 40, d, one.data(), 40);
  kernels::MatMulABtPacked(x.data() + 5 * d, 6, p.data(), 40, d, six.data(), 40);
  for (int j = 0; j < 40; ++j) EXPECT_EQ(std::memcmp(&one[j], &six[4 * 40 + j], 4), 0) << j;
}

// Records every tile handed to the sink, in order.
struct RecordingSink final : kernels::GramTileSink {
  struct Tile {
    int64_t i0, j0;
    std::vector<float> values;
    std::vector<uint32_t> hits;
  };
  std::vector<Tile> tiles;
  void OnHits(int64_t i0, int64_t j0, const float* tile, const uint32_t* hits) override {
    tiles.push_back({i0, j0, std::vector<float>(tile, tile + kernels::kTileRows * kernels::kPanelCols),
                     std::vector<uint32_t>(hits, hits + kernels::kTileRows)});
  }
};

// Rows drawn around a few centres and normalised, so that many pairs are
// similar (above 0.5) and many are not.
std::vector<float> ClusteredUnitRows(int64_t n, int d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> centres(4 * d);
  for (auto& v : centres) v = nd(rng);
  std::vector<float> x(n * d);
  for (int64_t r = 0; r < n; ++r) {
    const int c = static_cast<int>(rng() % 5);
    double ss = 0;
    for (int k = 0; k < d; ++k) {
      x[r * d + k] = (c < 4 ? centres[c * d + k] : 0.f) + 0.7f * nd(rng);
      ss += double(x[r * d + k]) * x[r * d + k];
    }
    for (int k = 0; k < d; ++k) x[r * d + k] = static_cast<float>(x[r * d + k] / std::sqrt(ss));
  }
  return x;
}

TEST_P(PanelMatMulTest, GramUpperPassMatchesReference) {
  const float thr = 0.5f;
  for (auto nd : {std::pair{1, 8}, {2, 3}, {5, 16}, {16, 7}, {17, 32}, {40, 64}, {97, 128}, {130, 24}}) {
    const int n = nd.first, d = nd.second;  // not a structured binding: the lambdas below capture n (Clang 14)
    const auto x = ClusteredUnitRows(n, d, 5 + n);
    const auto p = Packed(x, n, d);
    std::vector<float> sum(n, 1.f), want(n, 1.f);  // added into
    RecordingSink got, ref;
    kernels::GramUpperPass(x.data(), p.data(), n, d, thr, sum.data(), got);
    kernels::ref::GramUpperPass(x.data(), p.data(), n, d, thr, want.data(), ref);
    for (int r = 0; r < n; ++r) ASSERT_NEAR(sum[r], want[r], 1e-4 * (1 + n)) << "n=" << n << " r=" << r;
    // Hits: the kernel's (from its own f32 values) must agree with the
    // oracle's except for entries within rounding of the threshold.
    auto hit_set = [&](const RecordingSink& s, std::vector<float>* value) {
      std::vector<uint8_t> h(n * n, 0);
      for (const auto& t : s.tiles) {
        EXPECT_EQ(t.i0 % kernels::kTileRows, 0);
        EXPECT_EQ(t.j0 % kernels::kPanelCols, 0);
        uint32_t any = 0;
        for (int i = 0; i < kernels::kTileRows; ++i) {
          any |= t.hits[i];
          for (int j = 0; j < kernels::kPanelCols; ++j) {
            if (!(t.hits[i] >> j & 1)) continue;
            const int64_t a = t.i0 + i, c = t.j0 + j;
            EXPECT_LT(a, c);
            EXPECT_LT(c, n);
            const float v = t.values[i * kernels::kPanelCols + j];
            EXPECT_GT(v, thr);
            if (a < c && c < n) h[a * n + c] = 1, (*value)[a * n + c] = v;
          }
        }
        EXPECT_NE(any, 0u) << "a tile without hits was handed to the sink";
      }
      for (size_t k = 1; k < s.tiles.size(); ++k) {
        const auto& u = s.tiles[k - 1];
        const auto& v = s.tiles[k];
        EXPECT_TRUE(u.i0 < v.i0 || (u.i0 == v.i0 && u.j0 < v.j0)) << "tile order";
      }
      return h;
    };
    std::vector<float> gv(n * n), rv(n * n);
    const auto gh = hit_set(got, &gv), rh = hit_set(ref, &rv);
    int64_t hits = 0;
    for (int a = 0; a < n; ++a)
      for (int c = a + 1; c < n; ++c) {
        double dot = 0;
        for (int k = 0; k < d; ++k) dot += double(x[a * d + k]) * x[c * d + k];
        if (std::abs(dot - thr) < 1e-5) continue;
        ASSERT_EQ(gh[a * n + c], rh[a * n + c]) << "n=" << n << " pair " << a << "," << c << " dot=" << dot;
        if (gh[a * n + c]) {
          ++hits;
          EXPECT_NEAR(gv[a * n + c], rv[a * n + c], 1e-5);
        }
      }
    if (n >= 17) EXPECT_GT(hits, 0) << "n=" << n;
  }
  EXPECT_STREQ(kernels::LastPanelTargetName(), kernels::SimdTargetName());
}

TEST_P(PanelMatMulTest, GramThresholdNeverHitsOutsideTheUpperTriangle) {
  // Threshold −inf: every pair a < c < n is a hit, nothing else is, and a
  // NaN entry never is.
  const int64_t n = 23;
  const int d = 4;
  auto x = Random(n * d, 6);
  x[7 * d] = std::nanf("");  // row 7: every S[7][c] and S[a][7] is NaN
  const auto p = Packed(x, n, d);
  std::vector<float> sum(n, 0.f);
  RecordingSink got;
  kernels::GramUpperPass(x.data(), p.data(), n, d, -INFINITY, sum.data(), got);
  std::vector<int> count(n * n, 0);
  for (const auto& t : got.tiles)
    for (int i = 0; i < kernels::kTileRows; ++i)
      for (int j = 0; j < kernels::kPanelCols; ++j)
        if (t.hits[i] >> j & 1) ++count[(t.i0 + i) * n + (t.j0 + j)];
  for (int64_t a = 0; a < n; ++a)
    for (int64_t c = 0; c < n; ++c)
      EXPECT_EQ(count[a * n + c], (a < c && a != 7 && c != 7) ? 1 : 0) << a << "," << c;
}

TEST_P(PanelMatMulTest, ConvertF16ToF32IsExactForEveryValue) {
  // All 65,536 bit patterns, in an odd-length run (so the tail path runs too).
  std::vector<uint16_t> h(65536 + 3);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(i * 40503u);  // odd multiplier: a permutation
  std::vector<float> got(h.size()), want(h.size());
  kernels::ConvertF16ToF32(h.data(), got.data(), static_cast<int64_t>(h.size()));
  kernels::ref::ConvertF16ToF32(h.data(), want.data(), static_cast<int64_t>(h.size()));
  for (size_t i = 0; i < h.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << std::hex << h[i];
      ASSERT_EQ(std::signbit(got[i]), std::signbit(want[i])) << std::hex << h[i];
    } else {
      ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0) << std::hex << h[i] << " " << got[i] << " vs " << want[i];
    }
  }
  // Spot values: 1, −2, 65504, the smallest subnormal, +inf.
  const uint16_t spot[] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00};
  float out[5];
  kernels::ConvertF16ToF32(spot, out, 5);
  EXPECT_EQ(out[0], 1.f);
  EXPECT_EQ(out[1], -2.f);
  EXPECT_EQ(out[2], 65504.f);
  EXPECT_EQ(out[3], std::ldexp(1.f, -24));
  EXPECT_EQ(out[4], INFINITY);
}

TEST_P(PanelMatMulTest, ReadSweepEqualsTheScalarXorAtEveryLengthAndOffset) {
  // Every length up to 200 words from every offset up to 7 (unaligned
  // starts, every tail), and one long run; each word has a distinct bit
  // pattern, so a skipped or twice-read word changes the result.
  std::vector<uint64_t> w(4096 + 8);
  for (size_t i = 0; i < w.size(); ++i) w[i] = (i + 1) * 0x9e3779b97f4a7c15ull;
  for (int64_t off = 0; off < 8; ++off) {
    for (int64_t n = 0; n <= 200; ++n) {
      ASSERT_EQ(kernels::ReadSweep(w.data() + off, n), kernels::ref::ReadSweep(w.data() + off, n))
          << "offset " << off << " length " << n;
    }
  }
  EXPECT_EQ(kernels::ReadSweep(w.data(), 4096), kernels::ref::ReadSweep(w.data(), 4096));
  // The scalar reference itself on a hand-computed case: 1 ^ 2 ^ 4 = 7.
  const uint64_t three[] = {1, 2, 4};
  EXPECT_EQ(kernels::ref::ReadSweep(three, 3), 7u);
  EXPECT_EQ(kernels::ReadSweep(three, 3), 7u);
}

TEST_P(PanelMatMulTest, FmaChainsEqualTheScalarFusedChains) {
  // 12 chains of the target's widest float vectors; each value follows its
  // own start, so a swapped lane, a chain run too often or too rarely, or
  // an unfused multiply-add changes the result. EMU128 rounds the product
  // before the add (hn::MulAdd without FMA); each rounding decays by 0.999 a
  // step, so there the chains agree to 1000 roundings of 1.0, below 1e-4.
  const int64_t values = kernels::FmaChainValues();
  ASSERT_EQ(values % 12, 0);
  ASSERT_GE(values, 12);
  const bool fused = GetParam() != HWY_EMU128 && GetParam() != HWY_SCALAR;
  for (const int64_t steps : {0, 1, 7, 1000}) {
    std::vector<float> got(static_cast<size_t>(values)), want(static_cast<size_t>(values));
    kernels::FmaChains(steps, got.data());
    kernels::ref::FmaChains(steps, values, want.data());
    for (int64_t v = 0; v < values; ++v) {
      if (fused) {
        ASSERT_EQ(got[v], want[v]) << "steps " << steps << " value " << v;
      } else {
        ASSERT_NEAR(got[v], want[v], 1e-4f) << "steps " << steps << " value " << v;
      }
    }
  }
  // The reference on hand-computed values: no steps leave 1 + v / 1024;
  // one step of value 0 is 1 * 0.999 + 0.001 = 1.
  float one[3];
  kernels::ref::FmaChains(0, 3, one);
  EXPECT_EQ(one[2], 1.0f + 2.0f / 1024.0f);
  kernels::ref::FmaChains(1, 1, one);
  EXPECT_NEAR(one[0], 1.0f, 1e-7f);
}

INSTANTIATE_TEST_SUITE_P(Targets, PanelMatMulTest, ::testing::ValuesIn(testing::CompiledSimdTargets()),
                         testing::TargetParamName);

}  // namespace
}  // namespace skipkv
