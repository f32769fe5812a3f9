// skipkv calibrate's rules (src/eval/calibrate.h) on hand-made inputs: the
// pair collection (kinds, the policy's window), the percentile, the τ rule
// (a fixture whose 5th percentile is computed by hand), the α0 rule and the
// presets written from a result (valid file presets that read back).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "eval/calibrate.h"

namespace skipkv::eval {
namespace {

// Sentences of one trace with 2-D unit embeddings whose dot products are
// known: e0·e2 = 0.8, e1·e4 = 1, e0·e3 = 0, e2·e3 = 0.6.
CalTrace HandTrace() {
  CalTrace t;
  t.problem = "p";
  t.sentences = {
      {{1, 2, 3}, {1.0f, 0.0f}, false},  // s0
      {{4, 5}, {0.6f, 0.8f}, true},      // s1
      {{1, 2, 3}, {0.8f, 0.6f}, false},  // s2: a duplicate of s0
      {{1, 9}, {0.0f, 1.0f}, false},     // s3: the kind of s0 and s2 (first token 1), other content
      {{4, 5}, {0.6f, 0.8f}, true},      // s4: a duplicate of s1
  };
  return t;
}

std::vector<float> Sorted(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(CalibrateTest, PairsByKindWithinThePolicysWindow) {
  const std::vector<CalTrace> traces = {HandTrace()};
  const PssPairs all = CollectPssPairs(traces, 1024);
  EXPECT_EQ(all.compared, 10);  // 5 sentences: every pair
  ASSERT_EQ(all.duplicate.size(), 2u);
  EXPECT_NEAR(Sorted(all.duplicate)[0], 0.8f, 1e-6);  // (s0, s2)
  EXPECT_NEAR(Sorted(all.duplicate)[1], 1.0f, 1e-6);  // (s1, s4)
  ASSERT_EQ(all.same_kind.size(), 2u);
  EXPECT_NEAR(Sorted(all.same_kind)[0], 0.0f, 1e-6);  // (s0, s3)
  EXPECT_NEAR(Sorted(all.same_kind)[1], 0.6f, 1e-6);  // (s2, s3)
  // PSS >= 0.95 over every pair, any kind: (s1, s2) = 0.6·0.8 + 0.8·0.6 = 0.96, (s1, s4) = 1, (s2, s4) =
  // 0.96.
  EXPECT_EQ(all.similar, 3);
  // K = 2: each sentence is compared with the 2 before it, so (s0, s3) and
  // (s1, s4) are out of reach.
  const PssPairs near = CollectPssPairs(traces, 2);
  EXPECT_EQ(near.compared, 7);
  ASSERT_EQ(near.duplicate.size(), 1u);
  EXPECT_NEAR(near.duplicate[0], 0.8f, 1e-6);
  ASSERT_EQ(near.same_kind.size(), 1u);
  EXPECT_NEAR(near.same_kind[0], 0.6f, 1e-6);
  // Pairs never cross traces.
  const std::vector<CalTrace> two = {HandTrace(), HandTrace()};
  EXPECT_EQ(CollectPssPairs(two, 1024).compared, 20);
  EXPECT_EQ(CollectPssPairs(two, 1024).duplicate.size(), 4u);
}

TEST(CalibrateTest, KindAndClassBreakdowns) {
  const std::vector<CalTrace> traces = {HandTrace()};
  const PssPairs p = CollectPssPairs(traces, 1024);
  const std::vector<KindRow> kinds = KindBreakdown(p, 0.7, 8);
  ASSERT_EQ(kinds.size(), 2u);
  EXPECT_EQ(kinds[0].first_token, 1);  // 1 duplicate + 2 same-kind pairs
  EXPECT_EQ(kinds[0].duplicate, 1);
  EXPECT_DOUBLE_EQ(kinds[0].duplicate_above, 1.0);  // 0.8 > 0.7
  EXPECT_EQ(kinds[0].same_kind, 2);
  EXPECT_DOUBLE_EQ(kinds[0].same_kind_above, 0.0);  // 0 and 0.6
  EXPECT_EQ(kinds[1].first_token, 4);
  EXPECT_EQ(kinds[1].duplicate, 1);
  EXPECT_EQ(kinds[1].same_kind, 0);
  EXPECT_EQ(KindBreakdown(p, 0.7, 1).size(), 1u);
  const KindRow nonexec = ClassBreakdown(p, 0.7, true), other = ClassBreakdown(p, 0.7, false);
  EXPECT_EQ(nonexec.duplicate, 1);  // (s1, s4)
  EXPECT_EQ(nonexec.same_kind, 0);
  EXPECT_EQ(other.duplicate, 1);
  EXPECT_EQ(other.same_kind, 2);
}

TEST(CalibrateTest, PercentileInterpolatesBetweenRanks) {
  const std::vector<float> v = {0.9f, 0.5f, 0.7f, 0.8f, 0.6f};  // sorted: 0.5 0.6 0.7 0.8 0.9
  EXPECT_NEAR(Percentile(v, 0), 0.5, 1e-6);
  EXPECT_NEAR(Percentile(v, 5), 0.52, 1e-6);  // h = 4 * 0.05 = 0.2: 0.5 + 0.2 * 0.1
  EXPECT_NEAR(Percentile(v, 50), 0.7, 1e-6);
  EXPECT_NEAR(Percentile(v, 90), 0.86, 1e-6);  // h = 3.6
  EXPECT_NEAR(Percentile(v, 100), 0.9, 1e-6);
  EXPECT_NEAR(Percentile({0.3f}, 5), 0.3, 1e-6);
  EXPECT_DOUBLE_EQ(ShareAbove(v, 0.7), 0.4);  // strictly above
  EXPECT_DOUBLE_EQ(ShareAbove({}, 0.7), 0.0);
}

TEST(CalibrateTest, TauIsTheFifthPercentileOfDuplicates) {
  // 20 duplicate pairs 0.60, 0.62, ..., 0.98 (shuffled): h = 19 * 0.05 =
  // 0.95, so the 5th percentile is 0.60 + 0.95 * 0.02 = 0.619 and τ = 0.619.
  PssPairs p;
  for (int k = 0; k < 20; ++k) p.duplicate.push_back(0.60f + 0.02f * static_cast<float>(k));
  std::shuffle(p.duplicate.begin(), p.duplicate.end(), std::mt19937(7));
  p.same_kind = {0.1f, 0.3f, 0.62f, 0.7f, 0.96f};
  auto t = ChooseTau(p, 5, 0.95);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_NEAR(t->exact, 0.619, 1e-6);
  EXPECT_DOUBLE_EQ(t->tau, 0.619);
  EXPECT_DOUBLE_EQ(t->recall, 19.0 / 20);         // all but 0.60 exceed 0.619
  EXPECT_DOUBLE_EQ(t->same_kind_above, 3.0 / 5);  // 0.62, 0.7, 0.96
  EXPECT_DOUBLE_EQ(t->paper_tau, 0.95);
  EXPECT_DOUBLE_EQ(t->paper_recall, 2.0 / 20);  // 0.96, 0.98
  EXPECT_DOUBLE_EQ(t->paper_same_kind_above, 1.0 / 5);
  // The 25th percentile: h = 4.75 -> 0.68 + 0.75 * 0.02 = 0.695.
  auto q = ChooseTau(p, 25, 0.95);
  ASSERT_TRUE(q.ok());
  EXPECT_DOUBLE_EQ(q->tau, 0.695);
  // Rounded down: 0.6234 -> 0.623.
  PssPairs r;
  r.duplicate = {0.6234f, 0.9f};
  EXPECT_DOUBLE_EQ(ChooseTau(r, 0, 0.95)->tau, 0.623);
}

TEST(CalibrateTest, TauErrors) {
  PssPairs none;
  none.compared = 12;
  auto t = ChooseTau(none, 5, 0.95);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("no word-for-word duplicate"), std::string::npos)
      << t.status().message();
  PssPairs negative;
  negative.duplicate = {-0.2f, -0.1f};
  t = ChooseTau(negative, 5, 0.95);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("outside (0, 1]"), std::string::npos) << t.status().message();
  PssPairs ok;
  ok.duplicate = {0.9f};
  EXPECT_FALSE(ChooseTau(ok, 100, 0.95).ok());
  EXPECT_FALSE(ChooseTau(ok, -1, 0.95).ok());
}

TEST(CalibrateTest, AlphaIsTheLargestGridValueWithinTolerance) {
  // FullKV 99.5 %: 1 point of tolerance admits 98.5 % and up.
  std::vector<GridPoint> grid = {
      {1.0, 85, 100, 0}, {0.5, 98, 100, 0}, {0.25, 99, 100, 0}, {0.125, 100, 100, 0}};
  AlphaChoice a = ChooseAlpha0(grid, 99.5, 1.0, 1.0, 0.02);
  ASSERT_TRUE(a.alpha0.has_value());
  EXPECT_DOUBLE_EQ(*a.alpha0, 0.25);
  EXPECT_DOUBLE_EQ(a.gamma, 0.005);        // γ / α0 kept at the paper's 0.02 / 1
  std::reverse(grid.begin(), grid.end());  // order does not matter
  EXPECT_DOUBLE_EQ(*ChooseAlpha0(grid, 99.5, 1.0, 1.0, 0.02).alpha0, 0.25);
  // The boundary is included: 98 >= 100 - 2.
  a = ChooseAlpha0(grid, 100, 2.0, 1.0, 0.02);
  EXPECT_DOUBLE_EQ(*a.alpha0, 0.5);
  EXPECT_DOUBLE_EQ(a.gamma, 0.01);
  // Other paper values scale γ the same way: γ = α0 · 0.05 / 2.
  EXPECT_DOUBLE_EQ(ChooseAlpha0(grid, 99.5, 1.0, 2.0, 0.05).gamma, 0.25 * 0.05 / 2.0);
  // Better than FullKV is within tolerance too.
  EXPECT_DOUBLE_EQ(*ChooseAlpha0(grid, 80, 1.0, 1.0, 0.02).alpha0, 1.0);
  // Nothing close enough: no α0.
  EXPECT_FALSE(ChooseAlpha0({{{1.0, 50, 100, 0}}}, 99.5, 1.0, 1.0, 0.02).alpha0.has_value());
  // A grid point without rows never qualifies.
  EXPECT_FALSE(ChooseAlpha0({{{1.0, 0, 0, 0}}}, 0, 1.0, 1.0, 0.02).alpha0.has_value());
}

TEST(CalibrateTest, PresetsCarryTheCalibratedValues) {
  CalibrationResult r;
  r.tau.tau = 0.707;
  r.tau.paper_tau = 0.95;
  r.paper_alpha0 = 1;
  r.paper_gamma = 0.02;
  r.alpha.alpha0 = 0.25;
  r.alpha.gamma = 0.005;
  const nlohmann::json prov = {{"dataset", "testbed-val"}, {"problems", 200}};
  const std::vector<PresetFileEntry> with = CalibratedPresets(r, prov);
  ASSERT_EQ(with.size(), 4u);
  EXPECT_EQ(with[0].name, "rkv+sentence-cal");
  EXPECT_EQ(with[0].base, "rkv+sentence");
  EXPECT_EQ(with[0].settings, std::vector<std::string>{"sim_threshold=0.707"});
  const std::vector<std::string> steer = {"sim_threshold=0.707", "steer_alpha0=0.25", "steer_gamma=0.005"};
  EXPECT_EQ(with[1].name, "rkv+sentence+steering-cal");
  EXPECT_EQ(with[1].settings, steer);
  EXPECT_EQ(with[2].name, "skipkv-cal");
  EXPECT_EQ(with[2].base, "skipkv");
  EXPECT_EQ(with[2].settings, steer);
  EXPECT_EQ(with[3].name, "seal-cal");
  EXPECT_EQ(with[3].settings, std::vector<std::string>{"steer_coef=0.25"});
  for (const auto& e : with) {
    EXPECT_EQ(nlohmann::json::parse(e.provenance_json), prov) << e.name;
    EXPECT_NE(e.description.find("testbed-val"), std::string::npos) << e.description;
    EXPECT_NE(e.description.find("paper: tau 0.95"), std::string::npos) << e.description;
  }
  // Every entry is a valid file preset, and the file's text reads back as written.
  for (const auto& e : with) EXPECT_TRUE(ValidatePresetFileEntry(e).ok()) << e.name;
  auto back = ParsePresetFile(PresetFileJson(with), "cal.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), with.size());
  for (size_t i = 0; i < with.size(); ++i) {
    EXPECT_EQ((*back)[i].name, with[i].name);
    EXPECT_EQ((*back)[i].base, with[i].base);
    EXPECT_EQ((*back)[i].settings, with[i].settings);
    EXPECT_EQ(nlohmann::json::parse((*back)[i].provenance_json), prov);
  }
  // Without α0: τ only, and skipkv-cal says it steers at the paper's strength.
  r.alpha.alpha0.reset();
  const std::vector<PresetFileEntry> without = CalibratedPresets(r, prov);
  ASSERT_EQ(without.size(), 2u);
  EXPECT_EQ(without[1].name, "skipkv-cal");
  EXPECT_EQ(without[1].settings, std::vector<std::string>{"sim_threshold=0.707"});
  EXPECT_NE(without[1].description.find("alpha0 not calibrated"), std::string::npos);
}

}  // namespace
}  // namespace skipkv::eval
