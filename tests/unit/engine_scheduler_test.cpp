// Scheduler stages (capacity, micro-batch), padded-mode batch grouping and
// the streamed stop-string matcher, all without a model.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "engine/stop_matcher.h"

namespace skipkv::engine {
namespace {

SeqView Seq(SeqState st, int64_t len = 10, int64_t done = 0, int64_t group = 0) {
  return SeqView{st, len, done, group};
}

TEST(AdmitTest, RaggedFillsFreeSlotsInOrder) {
  std::vector<SeqView> s = {Seq(SeqState::kDecode), Seq(SeqState::kWaiting), Seq(SeqState::kFinished),
                            Seq(SeqState::kWaiting), Seq(SeqState::kWaiting)};
  SchedulerLimits lim;
  lim.max_active = 3;  // one active: two may start
  EXPECT_EQ(Admit(s, lim), (std::vector<size_t>{1, 3}));
  lim.max_active = 0;  // unlimited
  EXPECT_EQ(Admit(s, lim), (std::vector<size_t>{1, 3, 4}));
  lim.max_active = 1;
  EXPECT_TRUE(Admit(s, lim).empty());
}

TEST(AdmitTest, GroupedStartsWholeLowestGroupOnlyWhenIdle) {
  std::vector<SeqView> s = {Seq(SeqState::kWaiting, 5, 0, 1), Seq(SeqState::kWaiting, 5, 0, 0),
                            Seq(SeqState::kWaiting, 5, 0, 1), Seq(SeqState::kWaiting, 5, 0, 0)};
  SchedulerLimits lim;
  lim.grouped = true;
  EXPECT_EQ(Admit(s, lim), (std::vector<size_t>{1, 3}));
  s[1].state = SeqState::kFinished;
  s[3].state = SeqState::kDecode;  // group 0 still running
  EXPECT_TRUE(Admit(s, lim).empty());
  s[3].state = SeqState::kFinished;
  EXPECT_EQ(Admit(s, lim), (std::vector<size_t>{0, 2}));
}

TEST(AdmitTest, KvMemoryAdmitsFifoWhileReservationsFit) {
  std::vector<SeqView> s = {Seq(SeqState::kDecode), Seq(SeqState::kWaiting), Seq(SeqState::kWaiting),
                            Seq(SeqState::kWaiting)};
  s[0].kv_bytes = 400;  // active: reserved
  s[1].kv_bytes = 300;
  s[2].kv_bytes = 500;  // does not fit after s[1]: admission stops (no overtaking by s[3])
  s[3].kv_bytes = 100;
  SchedulerLimits lim;
  lim.kv_memory = 1000;
  EXPECT_EQ(Admit(s, lim), (std::vector<size_t>{1}));
  lim.kv_memory = 1200;  // exactly 400 + 300 + 500
  EXPECT_EQ(Admit(s, lim), (std::vector<size_t>{1, 2}));
  lim.kv_memory = 699;   // s[1] alone would exceed it
  EXPECT_TRUE(Admit(s, lim).empty());
  s[0].state = SeqState::kFinished;  // a finished sequence holds nothing
  EXPECT_EQ(Admit(s, lim), (std::vector<size_t>{1}));
  lim.kv_memory = 0;  // no limit
  EXPECT_EQ(Admit(s, lim), (std::vector<size_t>{1, 2, 3}));
}

TEST(PlanStepTest, MixedStepCarriesDecodesAndPrefillChunks) {
  std::vector<SeqView> s = {Seq(SeqState::kPrefill, 1000, 0), Seq(SeqState::kDecode),
                            Seq(SeqState::kPrefill, 300, 100), Seq(SeqState::kDecode)};
  SchedulerLimits lim;
  lim.n_ubatch = 512;
  lim.n_batch = 600;
  lim.mixed = true;
  StepPlan p = PlanStep(s, lim);
  EXPECT_TRUE(p.prefill);
  ASSERT_EQ(p.items.size(), 4u);
  // Index order; the two decodes take 2 of the 600 tokens, the prefill chunks the rest.
  EXPECT_EQ(p.items[0].seq, 0u);
  EXPECT_TRUE(p.items[0].prefill);
  EXPECT_EQ(p.items[0].count, 512);
  EXPECT_EQ(p.items[1].seq, 1u);
  EXPECT_FALSE(p.items[1].prefill);
  EXPECT_EQ(p.items[1].count, 1);
  EXPECT_EQ(p.items[2].seq, 2u);
  EXPECT_TRUE(p.items[2].prefill);
  EXPECT_EQ(p.items[2].begin, 100);
  EXPECT_EQ(p.items[2].count, 598 - 512);
  EXPECT_FALSE(p.items[2].completes_prefill);
  EXPECT_EQ(p.items[3].seq, 3u);
  EXPECT_FALSE(p.items[3].prefill);
  EXPECT_EQ(p.tokens(), 600);
  // Unmixed, the same state runs prefill only and the decodes wait.
  lim.mixed = false;
  p = PlanStep(s, lim);
  for (const StepItem& it : p.items) EXPECT_TRUE(it.prefill);
  // Mixed with no prefill left: a plain decode step.
  lim.mixed = true;
  s[0].state = s[2].state = SeqState::kDecode;
  p = PlanStep(s, lim);
  EXPECT_FALSE(p.prefill);
  EXPECT_EQ(p.items.size(), 4u);
  // More decodes than n_batch: a prefill chunk still gets one token.
  lim.n_batch = 2;
  s[0] = Seq(SeqState::kPrefill, 10, 0);
  p = PlanStep(s, lim);
  ASSERT_EQ(p.items.size(), 4u);
  EXPECT_TRUE(p.items[0].prefill);
  EXPECT_EQ(p.items[0].count, 1);
}

TEST(PlanStepTest, PrefillChunksRespectUbatchAndBatch) {
  std::vector<SeqView> s = {Seq(SeqState::kPrefill, 1000, 0), Seq(SeqState::kDecode),
                            Seq(SeqState::kPrefill, 300, 100), Seq(SeqState::kPrefill, 50, 0)};
  SchedulerLimits lim;
  lim.n_ubatch = 512;
  lim.n_batch = 800;
  StepPlan p = PlanStep(s, lim);
  ASSERT_TRUE(p.prefill);
  ASSERT_EQ(p.items.size(), 3u);  // 512 + 200 + 50 = 762 <= 800
  EXPECT_EQ(p.items[0].seq, 0u);
  EXPECT_EQ(p.items[0].count, 512);
  EXPECT_FALSE(p.items[0].completes_prefill);
  EXPECT_EQ(p.items[1].seq, 2u);
  EXPECT_EQ(p.items[1].begin, 100);
  EXPECT_EQ(p.items[1].count, 200);
  EXPECT_TRUE(p.items[1].completes_prefill);
  EXPECT_EQ(p.items[2].seq, 3u);
  EXPECT_EQ(p.items[2].count, 50);
  lim.n_batch = 720;  // the third chunk is cut to the 8 tokens left
  p = PlanStep(s, lim);
  ASSERT_EQ(p.items.size(), 3u);
  EXPECT_EQ(p.items[2].count, 8);
  EXPECT_FALSE(p.items[2].completes_prefill);
}

TEST(PlanStepTest, LastPrefillItemIsCutToTheBatchBudget) {
  std::vector<SeqView> s = {Seq(SeqState::kPrefill, 100, 0), Seq(SeqState::kPrefill, 100, 0)};
  SchedulerLimits lim;
  lim.n_ubatch = 64;
  lim.n_batch = 100;
  StepPlan p = PlanStep(s, lim);
  ASSERT_EQ(p.items.size(), 2u);
  EXPECT_EQ(p.items[0].count, 64);
  EXPECT_EQ(p.items[1].count, 36);
  EXPECT_EQ(p.tokens(), 100);
}

TEST(PlanStepTest, DecodeStepFeedsOneTokenPerDecodingSequence) {
  std::vector<SeqView> s = {Seq(SeqState::kDecode), Seq(SeqState::kFinished), Seq(SeqState::kWaiting),
                            Seq(SeqState::kDecode)};
  StepPlan p = PlanStep(s, SchedulerLimits{});
  ASSERT_FALSE(p.prefill);
  ASSERT_EQ(p.items.size(), 2u);
  EXPECT_EQ(p.items[0].seq, 0u);
  EXPECT_EQ(p.items[1].seq, 3u);
  EXPECT_EQ(p.tokens(), 2);
  std::vector<SeqView> idle = {Seq(SeqState::kFinished), Seq(SeqState::kWaiting)};
  EXPECT_TRUE(PlanStep(idle, SchedulerLimits{}).empty());
}

TEST(GroupBatchesTest, StableArgsortThenChunks) {
  const std::vector<int64_t> lens = {7, 3, 7, 1, 3};
  auto b = GroupBatches(lens, 2, true);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0], (std::vector<size_t>{3, 1}));
  EXPECT_EQ(b[1], (std::vector<size_t>{4, 0}));  // ties keep submission order
  EXPECT_EQ(b[2], (std::vector<size_t>{2}));
  auto u = GroupBatches(lens, 2, false);
  EXPECT_EQ(u[0], (std::vector<size_t>{0, 1}));
  EXPECT_EQ(GroupBatches(lens, 0, true).size(), 1u);
}

TEST(GroupBatchesTest, SortingReducesTotalPadding) {
  const std::vector<int64_t> lens = {10, 100, 12, 98, 11, 99};
  auto total_pad = [&](bool sort) {
    int64_t t = 0;
    for (const auto& b : GroupBatches(lens, 2, sort))
      for (int64_t p : PadLens(lens, b)) t += p;
    return t;
  };
  EXPECT_EQ(total_pad(false), 90 + 86 + 88);
  EXPECT_EQ(total_pad(true), 1 + 86 + 1);  // {10,11},{12,98},{99,100}
  EXPECT_LT(total_pad(true), total_pad(false));
}

TEST(StopMatcherTest, NoStopsPassesThrough) {
  StopMatcher m;
  EXPECT_EQ(m.Push("abc"), "abc");
  EXPECT_EQ(m.Flush(), "");
  EXPECT_FALSE(m.matched());
}

TEST(StopMatcherTest, HoldsBackPossiblePrefixAcrossPieces) {
  StopMatcher m({"</answer>"});
  EXPECT_EQ(m.Push("x = 4 </an"), "x = 4 ");
  EXPECT_EQ(m.held(), 4u);
  EXPECT_EQ(m.Push("swer> tail"), "");
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.matched_string(), "</answer>");
  EXPECT_EQ(m.Push("more"), "");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcherTest, ReleasesFalseStartAndFlushesTail) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.Push("ST"), "");
  EXPECT_EQ(m.Push("ART S"), "START ");
  EXPECT_EQ(m.Flush(), "S");
  EXPECT_FALSE(m.matched());
}

TEST(StopMatcherTest, EarliestMatchWins) {
  StopMatcher m({"world", "lo w"});
  EXPECT_EQ(m.Push("hello world"), "hel");
  EXPECT_EQ(m.matched_string(), "lo w");
}

TEST(StopMatcherTest, MatchInsideOnePieceKeepsPrefixText) {
  StopMatcher m({"\n\n"});
  EXPECT_EQ(m.Push("One.\n"), "One.");
  EXPECT_EQ(m.Push("\nTwo"), "");
  EXPECT_TRUE(m.matched());
}

}  // namespace
}  // namespace skipkv::engine
