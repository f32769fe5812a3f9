// RmsNorm, Rope, Softmax, SiluMul, Add: SIMD vs reference on every compiled
// target and on lengths that are not multiples of the vector width; Rope's
// frequencies (plain, linear and Llama-3 scaling) against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/ops.h"
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

void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, float rel, float abs_tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], abs_tol + rel * std::fabs(b[i])) << "i=" << i;
  }
}

class ElementwiseTest : public testing::SimdTargetTest {};

TEST_P(ElementwiseTest, RmsNormMatchesReference) {
  for (int64_t n : {1, 7, 33, 1539}) {
    const auto x = Random(n, 1), w = Random(n, 2);
    std::vector<float> out(n), ref(n);
    kernels::RmsNorm(x.data(), w.data(), n, 1e-6f, out.data());
    kernels::ref::RmsNorm(x.data(), w.data(), n, 1e-6f, ref.data());
    ExpectClose(out, ref, 1e-5f, 1e-6f);
    std::vector<float> inplace = x;  // out may alias x
    kernels::RmsNorm(inplace.data(), w.data(), n, 1e-6f, inplace.data());
    ExpectClose(inplace, ref, 1e-5f, 1e-6f);
  }
}

TEST_P(ElementwiseTest, SoftmaxMatchesReference) {
  for (int64_t n : {1, 7, 33, 1001}) {
    auto x = Random(n, 3, 5.f);
    x[0] = 80.f;  // large logits must not overflow
    auto ref = x;
    kernels::Softmax(x.data(), n);
    kernels::ref::Softmax(ref.data(), n);
    ExpectClose(x, ref, 1e-5f, 1e-9f);
    double sum = 0;
    for (float v : x) sum += v;
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST_P(ElementwiseTest, SiluMulAndAddMatchReference) {
  for (int64_t n : {1, 7, 33, 8963}) {
    auto g = Random(n, 4, 3.f);
    const auto u = Random(n, 5);
    g[0] = -120.f;  // exp(120) overflows f32: silu -> -0
    if (n > 1) g[1] = 95.f;
    std::vector<float> out(n), ref(n);
    kernels::SiluMul(g.data(), u.data(), out.data(), n);
    kernels::ref::SiluMul(g.data(), u.data(), ref.data(), n);
    ExpectClose(out, ref, 2e-6f, 1e-30f);
    auto y = g, yref = g;
    kernels::Add(y.data(), u.data(), n);
    kernels::ref::Add(yref.data(), u.data(), n);
    ExpectClose(y, yref, 0.f, 0.f);
  }
}

TEST_P(ElementwiseTest, RopeMatchesReferenceBothStyles) {
  kernels::RopeParams variants[4];
  variants[0].style = kernels::RopeStyle::kRotateHalf;
  variants[1].style = kernels::RopeStyle::kAdjacentPairs;
  variants[2].style = kernels::RopeStyle::kRotateHalf;
  variants[2].theta = 500000.f;
  variants[2].llama3_factor = 8.f;
  variants[3].style = kernels::RopeStyle::kAdjacentPairs;
  variants[3].rot_dim = 48;  // partial rotation: dims 48.. untouched
  variants[3].linear_scale = 4.f;
  for (const auto& p : variants) {
    for (int head_dim : {64, 128, 80}) {
      for (int64_t pos : {0, 1, 17, 100003}) {
        auto x = Random(3 * head_dim, 6);
        auto ref = x;
        kernels::Rope(x.data(), 3, head_dim, pos, p);
        kernels::ref::Rope(ref.data(), 3, head_dim, pos, p);
        ExpectClose(x, ref, 1e-6f, 1e-6f);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, ElementwiseTest, ::testing::ValuesIn(testing::CompiledSimdTargets()),
                         testing::TargetParamName);

// Rotating (1, 0) by position 1 gives (cos f, sin f): f is the pair's
// frequency. Expected values computed by hand from HF's
// _compute_llama3_parameters (theta 5e5, dim 128, factor 8, low 1, high 4,
// original context 8192).
double AngleOfPair(const kernels::RopeParams& p, int dim, int pair, int64_t pos) {
  std::vector<float> x(dim, 0.f);
  const int a = p.style == kernels::RopeStyle::kRotateHalf ? pair : 2 * pair;
  const int b = p.style == kernels::RopeStyle::kRotateHalf ? pair + dim / 2 : 2 * pair + 1;
  x[a] = 1.f;
  kernels::ref::Rope(x.data(), 1, dim, pos, p);
  return std::atan2(x[b], x[a]);
}

TEST(RopeFrequencies, PlainLinearAndLlama3) {
  kernels::RopeParams plain;
  plain.theta = 10000.f;
  // pair 1 of 64 dims: 10000^(-2/64) = 0.74989420933...
  EXPECT_NEAR(AngleOfPair(plain, 64, 1, 1), 0.7498942093324559, 1e-6);
  plain.style = kernels::RopeStyle::kAdjacentPairs;
  EXPECT_NEAR(AngleOfPair(plain, 64, 1, 1), 0.7498942093324559, 1e-6);
  kernels::RopeParams linear = plain;
  linear.linear_scale = 2.f;  // position 2 behaves as position 1
  EXPECT_NEAR(AngleOfPair(linear, 64, 1, 2), 0.7498942093324559, 1e-6);

  kernels::RopeParams l3;
  l3.theta = 500000.f;
  l3.llama3_factor = 8.f;
  l3.llama3_low_freq_factor = 1.f;
  l3.llama3_high_freq_factor = 4.f;
  l3.llama3_original_context = 8192;
  EXPECT_NEAR(AngleOfPair(l3, 128, 20, 1), 0.016560440080994446, 1e-8);    // short wave: unchanged
  EXPECT_NEAR(AngleOfPair(l3, 128, 31, 1), 0.0008567514129196321, 1e-9);   // smoothed
  EXPECT_NEAR(AngleOfPair(l3, 128, 34, 1), 0.0001785078127679964, 1e-9);   // smoothed
  EXPECT_NEAR(AngleOfPair(l3, 128, 40, 1), 3.428102195952591e-05, 1e-10);  // long wave: / 8
  EXPECT_NEAR(AngleOfPair(l3, 128, 63, 1), 3.068925988914511e-07, 1e-12);
}

}  // namespace
}  // namespace skipkv
