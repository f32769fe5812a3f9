// Sampler: validation, greedy ties, and the distribution of seeded draws.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

namespace skipkv::engine {
namespace {

std::vector<float> LogitsFromProbs(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

// Frequencies of `n` draws.
std::vector<double> Frequencies(Sampler& s, const std::vector<float>& logits, int n) {
  std::vector<double> f(logits.size(), 0.0);
  for (int i = 0; i < n; ++i) f[s.Sample(logits, {})] += 1.0;
  for (double& x : f) x /= n;
  return f;
}

TEST(SamplingParamsTest, DefaultsAreValidAndGreedy) {
  SamplingParams p;
  EXPECT_TRUE(ValidateSamplingParams(p).ok());
  EXPECT_EQ(p.temperature, 0.f);
}

TEST(SamplingParamsTest, RejectsEachBadFieldByName) {
  struct Case {
    SamplingParams p;
    const char* field;
  };
  std::vector<Case> cases;
  SamplingParams p;
  p = {}; p.temperature = -1.f; cases.push_back({p, "temperature"});
  p = {}; p.temperature = NAN; cases.push_back({p, "temperature"});
  p = {}; p.top_k = -3; cases.push_back({p, "top_k"});
  p = {}; p.top_p = 0.f; cases.push_back({p, "top_p"});
  p = {}; p.top_p = 1.5f; cases.push_back({p, "top_p"});
  p = {}; p.min_p = -0.1f; cases.push_back({p, "min_p"});
  p = {}; p.min_p = 1.1f; cases.push_back({p, "min_p"});
  p = {}; p.repeat_penalty = 0.f; cases.push_back({p, "repeat_penalty"});
  p = {}; p.repeat_penalty = -1.f; cases.push_back({p, "repeat_penalty"});
  p = {}; p.repeat_last_n = -2; cases.push_back({p, "repeat_last_n"});
  for (const auto& c : cases) {
    Status st = ValidateSamplingParams(c.p);
    ASSERT_FALSE(st.ok()) << c.field;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(c.field), std::string::npos) << st.message();
  }
}

TEST(SamplerTest, GreedyPicksArgmaxLowestIdOnTies) {
  Sampler s(SamplingParams{});
  EXPECT_EQ(s.Sample(std::vector<float>{0.f, 3.f, 1.f, 3.f}, {}), 1);
  EXPECT_EQ(s.Sample(std::vector<float>{-5.f, -2.f, -7.f}, {}), 1);
  EXPECT_TRUE(s.last_candidates().empty());
}

TEST(SamplerTest, TopKOneAndTinyTopPEqualGreedy) {
  std::mt19937 gen(7);
  std::normal_distribution<float> nd(0.f, 3.f);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> logits(300);
    for (float& x : logits) x = nd(gen);
    const int32_t greedy = Argmax(logits);
    SamplingParams k1;
    k1.temperature = 1.5f;
    k1.top_k = 1;
    k1.seed = trial;
    SamplingParams p0;
    p0.temperature = 1.5f;
    p0.top_p = 1e-6f;
    p0.seed = trial;
    Sampler a(k1), b(p0);
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(a.Sample(logits, {}), greedy);
      EXPECT_EQ(b.Sample(logits, {}), greedy);
    }
  }
}

TEST(SamplerTest, TemperatureOneMatchesSoftmax) {
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
  SamplingParams p;
  p.temperature = 1.f;
  p.seed = 42;
  Sampler s(p);
  auto f = Frequencies(s, LogitsFromProbs(probs), 40000);
  for (size_t i = 0; i < probs.size(); ++i) EXPECT_NEAR(f[i], probs[i], 0.01) << i;
}

TEST(SamplerTest, TemperatureSharpensAndFlattens) {
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
  const auto logits = LogitsFromProbs(probs);
  for (float t : {0.5f, 2.f}) {
    SamplingParams p;
    p.temperature = t;
    p.seed = 3;
    Sampler s(p);
    auto f = Frequencies(s, logits, 40000);
    double z = 0.0;
    std::vector<double> want;
    for (double q : probs) want.push_back(std::pow(q, 1.0 / t)), z += want.back();
    for (size_t i = 0; i < probs.size(); ++i) EXPECT_NEAR(f[i], want[i] / z, 0.01) << "T=" << t << " i=" << i;
  }
}

TEST(SamplerTest, TopKRenormalisesOverTheKBest) {
  SamplingParams p;
  p.temperature = 1.f;
  p.top_k = 2;
  Sampler s(p);
  auto f = Frequencies(s, LogitsFromProbs({0.1, 0.2, 0.3, 0.4}), 30000);
  EXPECT_EQ(f[0], 0.0);
  EXPECT_EQ(f[1], 0.0);
  EXPECT_NEAR(f[2], 3.0 / 7.0, 0.012);
  EXPECT_NEAR(f[3], 4.0 / 7.0, 0.012);
}

TEST(SamplerTest, TopPKeepsSmallestPrefixReachingMass) {
  SamplingParams p;
  p.temperature = 1.f;
  p.top_p = 0.65f;  // 0.4 < 0.65 <= 0.4 + 0.3
  Sampler s(p);
  auto f = Frequencies(s, LogitsFromProbs({0.1, 0.3, 0.2, 0.4}), 30000);
  EXPECT_EQ(f[0], 0.0);
  EXPECT_EQ(f[2], 0.0);
  EXPECT_NEAR(f[1], 3.0 / 7.0, 0.012);
  EXPECT_NEAR(f[3], 4.0 / 7.0, 0.012);
  ASSERT_EQ(s.last_candidates().size(), 2u);
  EXPECT_EQ(s.last_candidates()[0].id, 3);  // descending probability
}

TEST(SamplerTest, TopPOverLargeVocabularyBeyondFirstHead) {
  // 3000 equal tokens: the mass of the best 1024 (about 0.34) is below
  // top_p = 0.9, so the sampler must fall back to a full sort and keep 2700.
  std::vector<float> logits(3000, 0.f);
  SamplingParams p;
  p.temperature = 1.f;
  p.top_p = 0.9f;
  Sampler s(p);
  s.Sample(logits, {});
  EXPECT_NEAR(static_cast<double>(s.last_candidates().size()), 2700.0, 2.0);
  for (const auto& c : s.last_candidates()) ASSERT_LT(c.id, 2702);  // ties by id: the lowest ids
}

TEST(SamplerTest, MinPDropsTokensBelowFractionOfMax) {
  SamplingParams p;
  p.temperature = 1.f;
  p.min_p = 0.6f;  // floor 0.24: keeps 0.4 and 0.3
  Sampler s(p);
  auto f = Frequencies(s, LogitsFromProbs({0.1, 0.3, 0.2, 0.4}), 30000);
  EXPECT_EQ(f[0], 0.0);
  EXPECT_EQ(f[2], 0.0);
  EXPECT_NEAR(f[1], 3.0 / 7.0, 0.012);
}

TEST(SamplerTest, NegativeInfinityIsNeverDrawn) {
  SamplingParams p;
  p.temperature = 5.f;
  Sampler s(p);
  std::vector<float> logits = {-INFINITY, 0.f, -INFINITY, 0.f};
  auto f = Frequencies(s, logits, 5000);
  EXPECT_EQ(f[0] + f[2], 0.0);
  EXPECT_NEAR(f[1], 0.5, 0.03);
}

TEST(SamplerTest, SameSeedSameDrawsDifferentSeedDifferent) {
  std::vector<float> logits(64);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i));
  auto draws = [&](uint64_t seed) {
    SamplingParams p;
    p.temperature = 1.f;
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 100; ++i) out.push_back(s.Sample(logits, {}));
    return out;
  };
  EXPECT_EQ(draws(11), draws(11));
  EXPECT_NE(draws(11), draws(12));
}

TEST(RepetitionPenaltyTest, DividesPositiveMultipliesNegativeOncePerId) {
  std::vector<float> logits = {2.f, -2.f, 1.f, 4.f};
  std::vector<int32_t> scratch;
  const std::vector<int32_t> window = {0, 1, 1, 1, 7, -1};  // repeats count once; out-of-range ignored
  ApplyRepetitionPenalty(logits, window, 2.f, &scratch);
  EXPECT_FLOAT_EQ(logits[0], 1.f);
  EXPECT_FLOAT_EQ(logits[1], -4.f);
  EXPECT_FLOAT_EQ(logits[2], 1.f);
  EXPECT_FLOAT_EQ(logits[3], 4.f);
}

TEST(RepetitionPenaltyTest, ChangesGreedyChoiceOnlyInsideWindow) {
  const std::vector<float> logits = {2.f, 1.9f, 0.f};
  SamplingParams p;
  p.repeat_penalty = 1.5f;
  p.repeat_last_n = 1;
  Sampler s(p);
  const std::vector<int32_t> recent0 = {1, 0};  // 0 is in the last-1 window
  const std::vector<int32_t> old0 = {0, 2};     // 0 fell out of the window
  EXPECT_EQ(s.Sample(logits, recent0), 1);
  EXPECT_EQ(s.Sample(logits, old0), 0);
  p.repeat_last_n = 0;  // off
  Sampler off(p);
  EXPECT_EQ(off.Sample(logits, recent0), 0);
  p.repeat_last_n = -1;  // whole history
  Sampler all(p);
  EXPECT_EQ(all.Sample(logits, old0), 1);
  EXPECT_EQ(logits[0], 2.f);  // the caller's logits are untouched
}

TEST(RepetitionPenaltyTest, LowersEmpiricalFrequencyOfRepeatedToken) {
  const auto logits = LogitsFromProbs({0.5, 0.5});
  SamplingParams p;
  p.temperature = 1.f;
  p.repeat_penalty = 1.3f;
  Sampler s(p);
  const std::vector<int32_t> hist = {0};
  int zeros = 0;
  for (int i = 0; i < 20000; ++i) zeros += s.Sample(logits, hist) == 0;
  // log(0.5) < 0 is multiplied by 1.3: p0 = 0.5^1.3 / (0.5^1.3 + 0.5) ~= 0.448.
  const double want = std::pow(0.5, 1.3) / (std::pow(0.5, 1.3) + 0.5);
  EXPECT_NEAR(zeros / 20000.0, want, 0.012);
}

}  // namespace
}  // namespace skipkv::engine
