// SentenceTracker and SkipkvSentenceHooks on hand-made token / hidden-state
// sequences (spec §6.1, §6.5 step 5 and 7, Eq. 2, A3, A6, A9).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sentence/sentence_tracker.h"
#include "sentence/sentence_hooks.h"

namespace skipkv {
namespace {

// A hand-made vocabulary: 10 and 11 are delimiters, 20 is a NONEXEC
// keyword token, "Wait" is matched on text.
SkipkvTokenSets HandSets() {
  SkipkvTokenSets s;
  s.delimiters = {10, 11};
  s.nonexec = {20};
  s.nonexec_text = {"Wait"};
  return s;
}

struct Fed {
  int32_t token;
  std::vector<float> h;  // d = 2
  std::string text;
};

TEST(SentenceTrackerTest, SpansEmbeddingsAndShortSpans) {
  const SkipkvTokenSets sets = HandSets();
  SentenceTracker t(&sets, 2, /*min_sentence_tokens=*/2);
  t.Reset(/*first_pos=*/0, /*prompt_end=*/3);
  // gen_pos: 0     1      2(10)   3     4(10)  5(10)   6      7      8(11)
  const std::vector<Fed> seq = {{1, {3, 0}, ""},  {2, {0, 4}, ""},   {10, {0, 0}, ""},
                                {3, {1, 1}, ""},  {10, {1, 1}, ""},  {10, {5, 5}, ""},
                                {4, {0, -2}, ""}, {20, {0, -1}, ""}, {11, {0, 0}, ""}};
  std::vector<int> closed;
  for (size_t i = 0; i < seq.size(); ++i) {
    if (t.Add(seq[i].token, static_cast<int32_t>(i), seq[i].h.data(), seq[i].text)) {
      closed.push_back(static_cast<int>(i));
      const std::vector<float>& v = t.last_embedding();
      if (i == 2) {  // mean (1, 4/3), norm 5/3 -> (0.6, 0.8)
        EXPECT_NEAR(v[0], 0.6f, 1e-6);
        EXPECT_NEAR(v[1], 0.8f, 1e-6);
      } else if (i == 4) {  // mean (1, 1) -> (1/√2, 1/√2)
        EXPECT_NEAR(v[0], std::sqrt(0.5f), 1e-6);
        EXPECT_NEAR(v[1], std::sqrt(0.5f), 1e-6);
      } else if (i == 8) {  // mean (0, −1): the dropped span's (5, 5) is not in it
        EXPECT_NEAR(v[0], 0.f, 1e-6);
        EXPECT_NEAR(v[1], -1.f, 1e-6);
      }
    }
  }
  // gen_pos 5 is a lone delimiter: a 1-token span, dropped (A9).
  EXPECT_EQ(closed, (std::vector<int>{2, 4, 8}));
  EXPECT_EQ(t.dropped_spans(), 1);
  const auto& s = t.sentences();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].b, 0);
  EXPECT_EQ(s[0].e, 2);
  EXPECT_TRUE(s[0].prompt);  // e = 2 < prompt_end = 3
  EXPECT_EQ(s[1].b, 3);
  EXPECT_EQ(s[1].e, 4);
  EXPECT_FALSE(s[1].prompt);  // e = 4 >= prompt_end
  EXPECT_EQ(s[2].b, 6);
  EXPECT_EQ(s[2].e, 8);
  EXPECT_EQ(s[2].tokens(), 3);
  EXPECT_FALSE(s[0].nonexec);
  EXPECT_FALSE(s[1].nonexec);
  EXPECT_TRUE(s[2].nonexec);  // token 20
  EXPECT_EQ(t.open_tokens(), 0);
  EXPECT_EQ(t.next_pos(), 9);
}

TEST(SentenceTrackerTest, MinimumLengthAndPaddedStart) {
  const SkipkvTokenSets sets = HandSets();
  SentenceTracker t(&sets, 2, /*min_sentence_tokens=*/3);
  t.Reset(/*first_pos=*/4, /*prompt_end=*/6);  // Δpad = 4: the first real token is at gen_pos 4
  const float h[2] = {1, 0};
  EXPECT_FALSE(t.Add(1, 4, h, ""));
  EXPECT_FALSE(t.Add(10, 5, h, ""));  // 2 tokens < 3: dropped
  EXPECT_FALSE(t.Add(1, 6, h, ""));
  EXPECT_FALSE(t.Add(1, 7, h, ""));
  EXPECT_TRUE(t.Add(11, 8, h, ""));  // [6, 8]
  ASSERT_EQ(t.sentences().size(), 1u);
  EXPECT_EQ(t.sentences()[0].b, 6);
  EXPECT_EQ(t.sentences()[0].e, 8);
  EXPECT_EQ(t.dropped_spans(), 1);
  // min 1: a lone delimiter is a sentence.
  SentenceTracker one(&sets, 2, 1);
  one.Reset(0, 0);
  EXPECT_TRUE(one.Add(10, 0, h, ""));
  EXPECT_EQ(one.sentences()[0].tokens(), 1);
}

TEST(SentenceTrackerTest, TextFallbackMatchesAcrossTokensAtWordStart) {
  const SkipkvTokenSets sets = HandSets();
  SentenceTracker t(&sets, 2, 2);
  t.Reset(0, 0);
  const float h[2] = {0, 1};
  int32_t pos = 0;
  auto feed = [&](int32_t token, const std::string& text) { return t.Add(token, pos++, h, text); };
  // "Wa" + "it" spans two tokens: NONEXEC.
  feed(1, "So");
  feed(1, " Wa");
  feed(1, "it");
  ASSERT_TRUE(feed(10, "."));
  // "await": "wait" is lower case; "Await" would contain "wait" but the
  // keyword is "Wait" and needs a word start: "aWait" is not one.
  feed(1, " aWa");
  feed(1, "it");
  ASSERT_TRUE(feed(10, "."));
  // A keyword split over a delimiter-free run far from its start.
  feed(1, "x");
  feed(1, "W");
  feed(1, "ait");
  ASSERT_TRUE(feed(10, ""));
  // The match of the previous sentence does not leak: "it" alone is no match.
  feed(1, "it");
  ASSERT_TRUE(feed(10, ""));
  const auto& s = t.sentences();
  ASSERT_EQ(s.size(), 4u);
  EXPECT_TRUE(s[0].nonexec);
  EXPECT_FALSE(s[1].nonexec);
  EXPECT_FALSE(s[2].nonexec);  // "xWait": no word start
  EXPECT_FALSE(s[3].nonexec);
}

// Feeds rows through the hooks as the engine does: one prefill of the
// prompt, then per step OnToken(sampled) + BeforeForward + OnFinalHidden(fed).
class HookDriver {
 public:
  HookDriver(SkipkvSentenceHooks* hooks, const std::vector<int32_t>& prompt, int64_t pad, int d)
      : hooks_(hooks), d_(d), l_(pad) {
    SequenceStart st;
    st.prompt = prompt;
    st.pad_len = pad;
    st.d_model = d;
    hooks_->OnStart(st);
    prompt_ = prompt;
  }
  void Prefill(const std::vector<std::vector<float>>& hidden) {
    std::vector<BatchToken> rows;
    std::vector<float> flat;
    for (int64_t j = 0; j < l_; ++j) {  // pad rows first (ignored by the hooks)
      rows.push_back({.token = 0, .gen_pos = static_cast<int32_t>(j), .valid = false});
      flat.insert(flat.end(), d_, 100.f);
    }
    for (size_t i = 0; i < prompt_.size(); ++i) {
      rows.push_back({.token = prompt_[i], .gen_pos = static_cast<int32_t>(l_ + i)});
      flat.insert(flat.end(), hidden[i].begin(), hidden[i].end());
    }
    SequenceStep step{
        .l_before = 0, .l_after = l_ + static_cast<int64_t>(prompt_.size()), .kind = ForwardKind::kPrefill};
    hooks_->BeforeForward(step);
    hooks_->OnFinalHidden(rows, flat.data());
    l_ += static_cast<int64_t>(prompt_.size());
  }
  // `token` was sampled; it is fed in the next forward, which compresses if asked.
  void Step(int32_t token, const std::string& text, const std::vector<float>& h, bool compresses) {
    hooks_->OnToken(token, text);
    hooks_->BeforeForward({.l_before = l_, .l_after = l_ + 1, .compresses = compresses});
    BatchToken row{.token = token, .gen_pos = static_cast<int32_t>(l_)};
    hooks_->OnFinalHidden(std::span<const BatchToken>(&row, 1), h.data());
    ++l_;
  }

 private:
  SkipkvSentenceHooks* hooks_;
  int d_;
  int64_t l_;
  std::vector<int32_t> prompt_;
};

double Diag(const SkipkvSentenceHooks& h, const std::string& key) {
  for (const auto& [k, v] : h.Diagnostics()) {
    if (k == key) return v;
  }
  ADD_FAILURE() << "no diagnostic " << key;
  return -1;
}

TEST(SkipkvSentenceHooksTest, PromptRuleRedundantSetAndNonExecCount) {
  auto sets = std::make_shared<const SkipkvTokenSets>(HandSets());
  for (bool include_prompt : {false, true}) {
    SkipkvConfig c;
    c.sim_threshold = 0.9f;
    c.pss_include_prompt = include_prompt;
    GenPosRangePenalty penalty;
    auto hooks = MakeSkipkvSentenceHooks(c, sets, &penalty);
    ASSERT_TRUE(hooks->WantsFinalHidden());
    // Padded row: Δpad = 2, prompt [20 1 10] at gen_pos 2..4 is a NONEXEC
    // prompt sentence with embedding (1, 0).
    HookDriver drv(hooks.get(), {20, 1, 10}, /*pad=*/2, /*d=*/2);
    drv.Prefill({{1, 0}, {1, 0}, {1, 0}});
    EXPECT_EQ(hooks->tracker().sentences().size(), 1u);
    EXPECT_TRUE(hooks->tracker().sentences()[0].prompt);
    // Generated: [5..6] = (1, 0.1)/.. ≈ the prompt sentence; [7..9] NONEXEC by
    // text ("Wait"), orthogonal (0, 1); then [10..11] = (1, 0) again.
    drv.Step(1, "The", {1, 0.1f}, false);  // fed at gen_pos 5
    drv.Step(10, ".", {1, 0.1f}, false);   // 6: closes [5, 6]
    drv.Step(1, " Wait", {0, 1}, false);   // 7
    drv.Step(1, ",", {0, 1}, false);       // 8
    drv.Step(11, "\n", {0, 1}, false);     // 9: closes [7, 9]
    EXPECT_EQ(hooks->nonexec_count(), include_prompt ? 2 : 1);
    EXPECT_TRUE(penalty.ranges().empty());          // no scheduled step yet: T untouched
    drv.Step(1, "The", {1, 0}, false);              // 10
    drv.Step(10, ".", {1, 0}, false);               // 11: closes [10, 11]
    drv.Step(1, "x", {0, 1}, /*compresses=*/true);  // PSS update before this forward
    const auto& T = hooks->redundant().table();
    const float s56 = 1.f / std::sqrt(1.01f);  // PSS([5,6], [10,11]) = 1/√1.01 ≈ 0.995
    if (include_prompt) {
      // [2,4] matches [5,6] (λ = 0.995) and [10,11] (λ = 1): max (A7).
      ASSERT_EQ(T.size(), 2u);
      EXPECT_FLOAT_EQ(T.at({2, 4}), 1.f);
    } else {
      ASSERT_EQ(T.size(), 1u);
      EXPECT_EQ(T.count({2, 4}), 0u);  // A3: prompt sentences never become redundant
    }
    EXPECT_NEAR(T.at({5, 6}), s56, 1e-6);
    EXPECT_EQ(penalty.ranges(), T);
    EXPECT_EQ(hooks->pss_updates(), 1);
    EXPECT_EQ(Diag(*hooks, "skipkv.sentences"), 4);
    EXPECT_EQ(Diag(*hooks, "skipkv.prompt_sentences"), 1);
    EXPECT_EQ(Diag(*hooks, "skipkv.pss_sentences"), include_prompt ? 4 : 3);
    EXPECT_EQ(Diag(*hooks, "skipkv.redundant_sentences"), static_cast<double>(T.size()));
    EXPECT_EQ(Diag(*hooks, "skipkv.nonexec_sentences"), include_prompt ? 2 : 1);
    // 3 or 4 sentences compared with all earlier ones: 0+1+2 (+3).
    EXPECT_EQ(Diag(*hooks, "skipkv.pss_comparisons"), include_prompt ? 6 : 3);
  }
}

TEST(SkipkvSentenceHooksTest, SentenceClosesOneStepAfterItsDelimiterWasSampled) {
  auto sets = std::make_shared<const SkipkvTokenSets>(HandSets());
  SkipkvConfig c;
  GenPosRangePenalty penalty;
  auto hooks = MakeSkipkvSentenceHooks(c, sets, &penalty);
  HookDriver drv(hooks.get(), {1, 1}, 0, 2);
  drv.Prefill({{1, 0}, {1, 0}});
  // The delimiter is sampled: OnToken alone does not close the sentence; its
  // hidden row (the forward feeding it) does.
  hooks->OnToken(10, ".");
  EXPECT_TRUE(hooks->tracker().sentences().empty());
  EXPECT_EQ(hooks->tracker().open_tokens(), 2);
  hooks->BeforeForward({.l_before = 2, .l_after = 3});
  BatchToken row{.token = 10, .gen_pos = 2};
  const float h[2] = {1, 0};
  hooks->OnFinalHidden(std::span<const BatchToken>(&row, 1), h);
  ASSERT_EQ(hooks->tracker().sentences().size(), 1u);
  EXPECT_EQ(hooks->tracker().sentences()[0].e, 2);
}

TEST(SkipkvSentenceHooksTest, NullPenaltyStillComputesT) {
  auto sets = std::make_shared<const SkipkvTokenSets>(HandSets());
  SkipkvConfig c;
  c.sentence_scoring = false;
  auto hooks = MakeSkipkvSentenceHooks(c, sets, nullptr);
  HookDriver drv(hooks.get(), {1}, 0, 2);
  drv.Prefill({{0, 1}});
  for (int rep = 0; rep < 2; ++rep) {
    drv.Step(2, "a", {0, 1}, false);
    drv.Step(10, ".", {0, 1}, false);
  }
  drv.Step(2, "a", {0, 1}, true);
  // [0..2] (prompt token 1 + "a" + ".", ends after the prompt) and [3..4]: identical directions.
  ASSERT_EQ(hooks->redundant().table().size(), 1u);
  EXPECT_FLOAT_EQ(hooks->redundant().table().begin()->second, 1.f);
  EXPECT_EQ(Diag(*hooks, "skipkv.redundant_sentences"), 1);
}

// Observation mode (FullKV rows): no compression step ever comes, yet every
// closed sentence is compared at once; nothing is written anywhere.
TEST(SkipkvSentenceHooksTest, ObservationUpdatesAtEverySentence) {
  auto sets = std::make_shared<const SkipkvTokenSets>(HandSets());
  SkipkvConfig c;
  auto hooks = MakeSkipkvSentenceHooks(c, sets, nullptr, /*observe=*/true);
  HookDriver drv(hooks.get(), {1}, 0, 2);
  drv.Prefill({{0, 1}});
  drv.Step(2, "a", {0, 1}, false);
  drv.Step(10, ".", {0, 1}, false);  // closes [0..2]: nothing before it to compare
  EXPECT_EQ(Diag(*hooks, "skipkv.compared_pairs"), 0);
  drv.Step(2, "a", {1, 0}, false);
  drv.Step(10, ".", {0.6f, 0.8f}, false);  // closes [3..4]: mean (0.8, 0.4)/|.|, PSS with (0, 1) = 0.447
  drv.Step(2, "a", {0, 1}, false);
  drv.Step(10, ".", {0, 1}, false);  // closes [5..6] = (0, 1): PSS 1 with [0..2], 0.447 with [3..4]
  EXPECT_EQ(hooks->pss_updates(), 3);
  ASSERT_EQ(hooks->redundant().table().size(), 1u);  // [0..2], λ = 1
  EXPECT_EQ(hooks->redundant().table().begin()->first, std::make_pair(0, 2));
  EXPECT_EQ(Diag(*hooks, "skipkv.compared_pairs"), 3);  // 0 + 1 + 2
  EXPECT_EQ(Diag(*hooks, "skipkv.similar_pairs"), 1);
  EXPECT_EQ(Diag(*hooks, "skipkv.redundant_sentences"), 1);
}

}  // namespace
}  // namespace skipkv
