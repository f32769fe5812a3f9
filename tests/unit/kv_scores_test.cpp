// Eviction scores (src/kv/scores.h) against hand-worked examples, and the
// score-based policies against an independent naive implementation of spec
// §6.6 written here (full N×N matrices, double precision, std::sort). CTest
// runs this binary once per compiled SIMD target (SKIPKV_SIMD, see
// tests/CMakeLists.txt); KvScoresSimd checks that the scores run there.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kv/kv_policy.h"
#include "kv/score_adjust.h"
#include "kv/scores.h"
#include "kernels/ops.h"
#include "kernels/panel_matmul.h"

namespace skipkv {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- Importance ---------------------------------------------------------------

TEST(KvScores, ImportanceGqaMaxOnLogits) {
  // d = 1 (scale 1), G = 2, one window row, keys k = [1, −1].
  // head 0: q = 2  -> logits [2, −2];  head 1: q = −3 -> logits [−3, 3].
  // GQA max on logits: L = [2, 3]; softmax = [1/(1+e), e/(1+e)]
  //                                        = [0.2689414, 0.7310586].
  // (The mean of the per-head softmaxes would give [0.4910, 0.5090].)
  KvScratch s;
  const float q[] = {2.f, -3.f};  // [G][n_q][d]
  const float k[] = {1.f, -1.f};
  float out[2];
  kvscore::AttentionImportance(q, 2, 1, k, 2, 1, nullptr, out, s);
  EXPECT_NEAR(out[0], 0.2689414f, 1e-6);
  EXPECT_NEAR(out[1], 0.7310586f, 1e-6);
}

TEST(KvScores, ImportanceScaleMaskAndWindowMean) {
  // d = 4: scale 1/2. q = [1,1,1,1]; keys [1,0,0,0], [0,0,0,0], [9,9,9,9] (masked).
  // Row 0 logits [0.5, 0, −inf] -> softmax [e^.5/(1+e^.5), 1/(1+e^.5), 0]
  //                              = [0.6224593, 0.3775407, 0].
  // Row 1: q = 0 -> logits [0, 0, −inf] -> [0.5, 0.5, 0].
  // Mean over the 2 rows: [0.5612297, 0.4387703, 0].
  KvScratch s;
  const float q[] = {1, 1, 1, 1, 0, 0, 0, 0};  // G = 1, n_q = 2, d = 4
  const float k[] = {1, 0, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9};
  const uint8_t valid[] = {1, 1, 0};
  float out[3];
  kvscore::AttentionImportance(q, 1, 2, k, 3, 4, valid, out, s);
  EXPECT_NEAR(out[0], 0.5612297f, 1e-6);
  EXPECT_NEAR(out[1], 0.4387703f, 1e-6);
  EXPECT_EQ(out[2], 0.f);
}

TEST(KvScores, ImportanceSoftmaxOnlyOverCandidates) {
  // k has 3 rows but only the first 2 are candidates: row 2 must not enter
  // the softmax (d = 1, q = 1: logits [1, 2] -> [0.2689414, 0.7310586]).
  KvScratch s;
  const float q[] = {1.f};
  const float k[] = {1.f, 2.f, 100.f};
  float out[2];
  kvscore::AttentionImportance(q, 1, 1, k, 2, 1, nullptr, out, s);
  EXPECT_NEAR(out[0], 0.2689414f, 1e-6);
  EXPECT_NEAR(out[1], 0.7310586f, 1e-6);
}

// ---- Max-pool -----------------------------------------------------------------

TEST(KvScores, MaxPoolEdgesUseMinusInfPadding) {
  // Kernel 7, pad 3: out[i] = max(in[i−3 .. i+3] ∩ [0, n)).
  const float in[] = {1, 5, 2, 0, 0, 0, 0, 0, 9, 1};
  float out[10];
  kvscore::MaxPool1d(in, 10, 7, out);
  const float want[] = {5, 5, 5, 5, 5, 9, 9, 9, 9, 9};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(out[i], want[i]) << i;
  // All negative: zero padding would give 0; −inf padding gives the true max.
  const float neg[] = {-1, -2, -3};
  float o2[3];
  kvscore::MaxPool1d(neg, 3, 7, o2);
  for (float v : o2) EXPECT_EQ(v, -1.f);
  // Kernel 3 on a spike at the edge.
  const float sp[] = {7, -1, -1, -1};
  float o3[4];
  kvscore::MaxPool1d(sp, 4, 3, o3);
  EXPECT_EQ(o3[0], 7);
  EXPECT_EQ(o3[1], 7);
  EXPECT_EQ(o3[2], -1);
  EXPECT_EQ(o3[3], -1);
}

// ---- Redundancy ---------------------------------------------------------------

std::vector<float> Softmax(std::vector<double> x) {
  double mx = *std::max_element(x.begin(), x.end()), sum = 0;
  for (double& v : x) sum += (v = std::exp(v - mx));
  std::vector<float> out;
  for (double v : x) out.push_back(static_cast<float>(v / sum));
  return out;
}

TEST(KvScores, RedundancyRetainLastInACluster) {
  // d = 2. k0 = [1,0], k1 = [1,0], k2 = [0,1], k3 = [2,0]: k0, k1, k3 share a
  // direction. S (zero diagonal):      retain-last edits:
  //   row0 [0 1 0 1]  j* = 3 ->  [0 1 0 0]
  //   row1 [1 0 0 1]  j* = 3 ->  [1 0 0 0]
  //   row2 [0 0 0 0]  none -> j* = 0 (already 0)
  //   row3 [1 1 0 0]  j* = 1 ->  [1 0 0 0]
  // column sums [2, 1, 0, 0], /N = [0.5, 0.25, 0, 0]
  // softmax = [0.3342400, 0.2603064, 0.2027268, 0.2027268]:
  // the latest cluster member (k3) is the least redundant, like the unique k2.
  KvScratch s;
  const float k[] = {1, 0, 1, 0, 0, 1, 2, 0};
  float out[4];
  kvscore::Redundancy(k, 4, 2, nullptr, out, s);
  const auto want = Softmax({0.5, 0.25, 0, 0});
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], want[i], 1e-6) << i;
  EXPECT_NEAR(want[0], 0.3342400f, 1e-6);
}

TEST(KvScores, RedundancyColumnZeroSideEffect) {
  // Unit keys (d = 2): k0 = [1,0], k1 = [.28,.96], k2 = [.6,.8], k3 = [.28,−.96].
  // S off-diagonal: S01 = .28, S02 = .6, S03 = .28, S12 = .936, S13 = −.8432, S23 = −.6.
  //   row0 [0 .28 .6 .28]          j* = 2 -> [0 .28 0 .28]
  //   row1 [.28 0 .936 −.8432]     j* = 2 -> [.28 0 0 −.8432]
  //   row2 [.6 .936 0 −.6]         j* = 1 -> [.6 0 0 −.6]
  //   row3 [.28 −.8432 −.6 0]      no S > .5 -> j* = 0 -> [0 −.8432 −.6 0]
  // Row 3 zeroes column 0 although S30 = .28 (the R-KV side effect that
  // favours token 0). Column sums [.88, −.5632, −.6, −1.1632], /4 =
  // [.22, −.1408, −.15, −.2908]; softmax = [.3346868, .2333163, .2311797, .2008172].
  KvScratch s;
  const float k[] = {1, 0, .28f, .96f, .6f, .8f, .28f, -.96f};
  float out[4];
  kvscore::Redundancy(k, 4, 2, nullptr, out, s);
  const float want[] = {.3346868f, .2333163f, .2311797f, .2008172f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], want[i], 2e-6) << i;
}

TEST(KvScores, RedundancyMasksInvalidKeys) {
  // Same as the cluster example but k1 is a pad: its key is zeroed, so S
  // has no row/column 1. row0 [0 0 0 1] j*=3 -> 0; row2 none -> col 0 (0);
  // row3 [1 0 0 0] j* = 0 -> 0. Column sums all 0 -> uniform 0.25.
  KvScratch s;
  const float k[] = {1, 0, 1, 0, 0, 1, 2, 0};
  const uint8_t valid[] = {1, 0, 1, 1};
  float out[4];
  kvscore::Redundancy(k, 4, 2, valid, out, s);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], 0.25f, 1e-6) << i;
}

// ---- Mixing, adjustment, selection ----------------------------------------------

TEST(KvScores, MixAndPaddedInfinity) {
  // λ = 0.1: 0.1·0.5 − 0.9·0.1 = −0.04;  0.1·0.2 − 0.9·0.3 = −0.25.
  const float imp[] = {0.5f, 0.2f}, red[] = {0.1f, 0.3f};
  float out[2];
  kvscore::MixScores(imp, red, 2, 0.1f, out);
  EXPECT_NEAR(out[0], -0.04f, 1e-7);
  EXPECT_NEAR(out[1], -0.25f, 1e-7);
  const int32_t gp[] = {0, 1};
  const uint8_t valid[] = {0, 1};
  kvscore::FinishScores({}, 0, 0, gp, valid, /*padded=*/true, out);
  EXPECT_EQ(out[0], kInf);
  EXPECT_NEAR(out[1], -0.25f, 1e-7);
}

TEST(KvScores, SelectionTiesGoToLowerPositionAndResultIsSorted) {
  KvScratch s;
  std::vector<int32_t> keep;
  // 6 slots, recent 2 -> candidates 0..3, keep 2 of them.
  const float score[] = {0.5f, 0.9f, 0.5f, 0.5f};
  kvscore::SelectTopKPlusRecent(score, 6, 2, 4, &keep, s);
  EXPECT_EQ(keep, (std::vector<int32_t>{0, 1, 4, 5}));
  // NaN counts as −inf; +inf (pads) always win, the lower one first.
  const float s2[] = {std::nanf(""), kInf, 1.f, kInf, 2.f};
  kvscore::SelectTopKPlusRecent(s2, 6, 1, 4, &keep, s);
  EXPECT_EQ(keep, (std::vector<int32_t>{1, 3, 4, 5}));
}

TEST(KvScores, RangePenaltyMapsGenPosPerHead) {
  // Head gen_pos after evictions: [0, 2, 3, 5, 7, 8, 9, 10]; 6 candidates
  // (the last 2 slots are the window). Range [3, 7] covers slots 2..4;
  // range [8, 10] covers slot 5 only (slots 6, 7 are window: clipped);
  // range [11, 12] is not in the cache. Same range twice keeps the max λ.
  GenPosRangePenalty pen;
  pen.Add(3, 7, 0.5f);
  pen.Add(3, 7, 0.25f);
  pen.Add(8, 10, 1.f);
  pen.Add(11, 12, 2.f);
  EXPECT_EQ(pen.size(), 3u);
  const int32_t gp[] = {0, 2, 3, 5, 7, 8, 9, 10};
  std::vector<float> score(6, 0.f);
  pen.Adjust(0, 0, std::span<const int32_t>(gp, 8), score);
  EXPECT_EQ(score, (std::vector<float>{0, 0, -0.5f, -0.5f, -0.5f, -1.f}));
}

// ---- Naive oracle of docs/spec.md §6.6 for one KV head --------------------------------------

struct NaiveInput {
  int n, d, group, n_q;
  std::vector<float> k;  // [n][d]
  std::vector<float> q;  // [group][n_q][d]
  std::vector<uint8_t> valid;
};

std::vector<double> NaiveImportance(const NaiveInput& in, int n_cand, int n_q_used, int pool) {
  std::vector<double> imp(n_cand, 0.0);
  for (int w = in.n_q - n_q_used; w < in.n_q; ++w) {
    std::vector<double> l(n_cand);
    for (int n = 0; n < n_cand; ++n) {
      double best = -INFINITY;
      for (int g = 0; g < in.group; ++g) {
        double dot = 0;
        for (int i = 0; i < in.d; ++i) dot += double(in.q[(g * in.n_q + w) * in.d + i]) * in.k[n * in.d + i];
        best = std::max(best, dot / std::sqrt(double(in.d)));
      }
      l[n] = in.valid[n] ? best : -INFINITY;
    }
    double mx = *std::max_element(l.begin(), l.end()), sum = 0;
    for (double& v : l) sum += (v = std::exp(v - mx));
    for (int n = 0; n < n_cand; ++n) imp[n] += l[n] / sum / n_q_used;
  }
  if (pool <= 1) return imp;
  std::vector<double> pooled(n_cand);
  for (int n = 0; n < n_cand; ++n) {
    double m = -INFINITY;
    for (int j = n - pool / 2; j <= n + pool / 2; ++j)
      if (j >= 0 && j < n_cand) m = std::max(m, imp[j]);
    pooled[n] = m;
  }
  return pooled;
}

std::vector<double> NaiveRedundancy(const NaiveInput& in) {
  const int n = in.n, d = in.d;
  std::vector<double> kn(n * d, 0.0);
  for (int r = 0; r < n; ++r) {
    if (!in.valid[r]) continue;
    double norm = 0;
    for (int i = 0; i < d; ++i) norm += double(in.k[r * d + i]) * in.k[r * d + i];
    norm = std::sqrt(norm) + 1e-8;
    for (int i = 0; i < d; ++i) kn[r * d + i] = in.k[r * d + i] / norm;
  }
  std::vector<double> s(n * n);
  for (int a = 0; a < n; ++a)
    for (int c = 0; c < n; ++c) {
      double dot = 0;
      for (int i = 0; i < d; ++i) dot += kn[a * d + i] * kn[c * d + i];
      s[a * n + c] = a == c ? 0.0 : dot;
    }
  for (int a = 0; a < n; ++a) {
    int j = 0;
    for (int c = 0; c < n; ++c)
      if (s[a * n + c] > 0.5) j = c;
    s[a * n + j] = 0.0;
  }
  std::vector<double> mean(n, 0.0);
  for (int c = 0; c < n; ++c) {
    for (int a = 0; a < n; ++a) mean[c] += s[a * n + c];
    mean[c] /= n;
  }
  double mx = *std::max_element(mean.begin(), mean.end()), sum = 0;
  for (double& v : mean) sum += (v = std::exp(v - mx));
  for (double& v : mean) v /= sum;
  return mean;
}

// kind: 0 = rkv, 1 = snapkv, 2 = h2o_rkv.
std::vector<int32_t> NaiveKeep(const NaiveInput& in, int kind, int window, int budget, double lambda,
                               bool padded) {
  const int recent = kind == 2 ? 1 : window;
  const int n_cand = in.n - recent;
  std::vector<double> score;
  if (kind == 2) {
    score = NaiveImportance(in, n_cand, 1, 1);
  } else {
    score = NaiveImportance(in, n_cand, in.n_q, 7);
    if (kind == 0) {
      const auto red = NaiveRedundancy(in);
      for (int i = 0; i < n_cand; ++i) score[i] = lambda * score[i] - (1 - lambda) * red[i];
    }
  }
  if (padded)
    for (int i = 0; i < n_cand; ++i)
      if (!in.valid[i]) score[i] = INFINITY;
  std::vector<int32_t> idx(n_cand);
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(),
            [&](int a, int b) { return score[a] > score[b] || (score[a] == score[b] && a < b); });
  idx.resize(budget - recent);
  std::sort(idx.begin(), idx.end());
  for (int i = n_cand; i < in.n; ++i) idx.push_back(i);
  return idx;
}

// Clustered keys, so that many pairs pass the 0.5 similarity threshold.
NaiveInput RandomInput(std::mt19937& rng, int n, int d, int group, int n_q, int n_pad) {
  std::normal_distribution<float> nd;
  NaiveInput in{n,
                d,
                group,
                n_q,
                std::vector<float>(n * d),
                std::vector<float>(group * n_q * d),
                std::vector<uint8_t>(n, 1)};
  std::vector<float> centres(5 * d);
  for (auto& x : centres) x = nd(rng);
  for (int r = 0; r < n; ++r) {
    const int c = static_cast<int>(rng() % 6);  // 5 clusters + unclustered
    for (int i = 0; i < d; ++i) in.k[r * d + i] = (c < 5 ? centres[c * d + i] : 0.f) + 0.6f * nd(rng);
  }
  for (auto& x : in.q) x = 2.f * nd(rng);
  for (int r = 0; r < n_pad; ++r) in.valid[r] = 0;
  return in;
}

struct PolicyCase {
  const char* name;
  int kind;
};

class KvOracleTest : public ::testing::TestWithParam<PolicyCase> {};

TEST_P(KvOracleTest, KeptSetsEqualTheNaiveImplementation) {
  const PolicyCase pc = GetParam();
  std::mt19937 rng(1234 + pc.kind);
  int trials = 0;
  for (int n : {40, 97, 200}) {
    for (int d : {16, 64}) {
      for (int n_pad : {0, 5}) {
        const int group = 3, hk = 2, window = 8, budget = n / 2 + 4, n_q = window;
        KvPolicyConfig cfg;
        cfg.policy = pc.name;
        cfg.budget = budget;
        cfg.window = window;
        cfg.pad_policy = n_pad ? PadPolicy::kPadded : PadPolicy::kRagged;
        auto policy = CreateKvPolicy(cfg);
        ASSERT_TRUE(policy.ok()) << policy.status().ToString();
        std::vector<NaiveInput> heads;
        std::vector<float> keys, queries(static_cast<size_t>(group * hk) * n_q * d);
        std::vector<std::vector<int32_t>> gp(hk, std::vector<int32_t>(n));
        std::vector<const int32_t*> gpp;
        std::vector<const uint8_t*> vp;
        for (int h = 0; h < hk; ++h) {
          heads.push_back(RandomInput(rng, n, d, group, n_q, n_pad));
          keys.insert(keys.end(), heads[h].k.begin(), heads[h].k.end());
          std::copy(heads[h].q.begin(), heads[h].q.end(),
                    queries.begin() + static_cast<size_t>(h) * group * n_q * d);
          std::iota(gp[h].begin(), gp[h].end(), 0);
        }
        for (int h = 0; h < hk; ++h) gpp.push_back(gp[h].data()), vp.push_back(heads[h].valid.data());
        KvLayerInput in;
        in.n_slots = n;
        in.n_heads = group * hk;
        in.n_kv_heads = hk;
        in.head_dim = d;
        in.keys = keys.data();
        in.queries = queries.data();
        in.n_queries = n_q;
        in.gen_pos = gpp;
        in.valid = vp;
        in.padded = n_pad > 0;
        KvScratch scratch;
        KeepSets keep;
        (*policy)->SelectKeep(in, scratch, keep);
        for (int h = 0; h < hk; ++h) {
          const auto want = NaiveKeep(heads[h], pc.kind, window, budget, cfg.mix_lambda, n_pad > 0);
          EXPECT_EQ(keep[h], want) << pc.name << " n=" << n << " d=" << d << " pad=" << n_pad << " h=" << h;
        }
        ++trials;
      }
    }
  }
  EXPECT_EQ(trials, 12);
}

INSTANTIATE_TEST_SUITE_P(Policies, KvOracleTest,
                         ::testing::Values(PolicyCase{"rkv", 0}, PolicyCase{"snapkv", 1},
                                           PolicyCase{"h2o", 2}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(KvScores, RedundancyMatchesNaiveOnClusteredKeys) {
  std::mt19937 rng(99);
  for (int n : {1, 2, 5, 16, 17, 63, 130}) {
    const auto in = RandomInput(rng, n, 32, 1, 1, n > 4 ? 2 : 0);
    KvScratch s;
    std::vector<float> out(n);
    kvscore::Redundancy(in.k.data(), n, 32, in.valid.data(), out.data(), s);
    const auto want = NaiveRedundancy(in);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(out[i], want[i], 1e-6) << "n=" << n << " i=" << i;
  }
}

// The eviction scores run on the SIMD target the kernels dispatch to, and
// SKIPKV_SIMD=<target> moves them there (when the CPU has that target).
TEST(KvScoresSimd, ScoresRunOnTheDispatchedTarget) {
  std::mt19937 rng(5);
  const auto in = RandomInput(rng, 40, 16, 2, 4, 0);
  KvScratch s;
  std::vector<float> out(40);
  kvscore::Redundancy(in.k.data(), 40, 16, nullptr, out.data(), s);
  EXPECT_STREQ(kernels::LastPanelTargetName(), kernels::SimdTargetName());
  kvscore::AttentionImportance(in.q.data(), 2, 4, in.k.data(), 32, 16, nullptr, out.data(), s);
  EXPECT_STREQ(kernels::LastPanelTargetName(), kernels::SimdTargetName());
  const char* env = std::getenv("SKIPKV_SIMD");
  if (env == nullptr || *env == '\0') return;  // uncapped: the best target, checked above
  std::string want(env);
  for (char& ch : want) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (want == "EMU128" || want == "SCALAR" || want == "PORTABLE") {
    // The portable fallback: EMU128, or SCALAR where Highway builds that instead.
    const std::string got = kernels::LastPanelTargetName();
    EXPECT_TRUE(got == "EMU128" || got == "SCALAR") << got;
    return;
  }
  const std::string got_simd = kernels::SimdTargetName(), got_panel = kernels::LastPanelTargetName();
  // Highway 1.0's SupportedTargets() re-detects the CPU and resets the chosen
  // target to the best one; Update() with its (capped) result restores the cap.
  const int64_t supported = hwy::SupportedTargets();
  hwy::GetChosenTarget().Update(supported);
  for (int i = 0; i <= 62; ++i) {
    const int64_t bit = int64_t{1} << i;
    if (want != hwy::TargetName(bit)) continue;
    if ((supported & bit) == 0) GTEST_SKIP() << "this CPU lacks " << want;
    EXPECT_EQ(got_simd, want);
    EXPECT_EQ(got_panel, want);
    return;
  }
  FAIL() << "SKIPKV_SIMD=" << env << " names no Highway target";
}

}  // namespace
}  // namespace skipkv
