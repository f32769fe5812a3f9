// SkipkvSentenceHooks: the per-sequence sentence side of SkipKV, as
// SequenceHooks (docs/spec.md §6.4–6.7).
//
//   OnFinalHidden: each real row (gen_pos order) goes through the
//     SentenceTracker with its final normed hidden state; prompt rows come
//     from the prefill, a generated token's row from the forward that feeds
//     it, one step after it was sampled (§6.5 note), so a sentence closes one
//     step after its delimiter was sampled. A closed sentence that takes part
//     in the PSS (a generated one, or any with pss_include_prompt, A3) is
//     queued in the RedundantSentenceSet; a NONEXEC one counts in N_o under
//     the same rule.
//   OnToken: keeps the sampled token's text for the text fallback of A6 (it
//     is fed, and its hidden row arrives, in the next forward).
//   BeforeForward with step.compresses: the PSS / T update (§6.5 step 7,
//     §6.7), then T goes into `penalty` (GenPosRangePenalty::Add) when it is
//     not null. With sentence_scoring off the caller passes nullptr and T is
//     still computed for the diagnostics.
//   Observation mode (`observe`, FullKV with EngineOptions::observe_sentences):
//     no compressions come, so the PSS / T update runs after every closed
//     sentence that takes part; the hooks only count (penalty is nullptr).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kv/score_adjust.h"
#include "kv/sequence_hooks.h"
#include "skipkv/kv_config.h"
#include "sentence/redundant_set.h"
#include "sentence/sentence_tracker.h"
#include "sentence/token_sets.h"

namespace skipkv {

class SkipkvSentenceHooks : public SequenceHooks {
 public:
  // `config` must be valid (ValidateSkipkvConfig); `sets` not null; `penalty`
  // (may be null) must outlive the hooks.
  SkipkvSentenceHooks(const SkipkvConfig& config, std::shared_ptr<const SkipkvTokenSets> sets,
                      GenPosRangePenalty* penalty, bool observe = false);

  void OnStart(const SequenceStart& start) override;
  void BeforeForward(const SequenceStep& step) override;
  bool WantsFinalHidden() const override { return true; }
  void OnFinalHidden(std::span<const BatchToken> rows, const float* hidden) override;
  void OnToken(int32_t token, std::string_view text) override;
  // skipkv.sentences (all closed sentences), skipkv.prompt_sentences,
  // skipkv.pss_sentences (taking part in the PSS), skipkv.redundant_sentences
  // (|T|), skipkv.nonexec_sentences (N_o), skipkv.pss_updates,
  // skipkv.pss_comparisons (dot products), skipkv.similar_pairs and
  // skipkv.compared_pairs (RedundantSentenceSet::Pairs: pairs within the PSS
  // window with PSS >= 0.95, of all such pairs — paper Fig. 14),
  // skipkv.sentence_ms (time spent in these hooks: bookkeeping + PSS).
  std::vector<std::pair<std::string, double>> Diagnostics() const override;

  // N_o: completed NONEXEC sentences so far (prompt ones only with
  // pss_include_prompt, A3), for adaptive steering (§6.9).
  int64_t nonexec_count() const { return nonexec_; }
  const SentenceTracker& tracker() const { return *tracker_; }
  const RedundantSentenceSet& redundant() const { return *redundant_; }
  int64_t pss_updates() const { return updates_; }

 private:
  SkipkvConfig config_;
  std::shared_ptr<const SkipkvTokenSets> sets_;
  GenPosRangePenalty* penalty_;
  bool observe_;
  std::optional<SentenceTracker> tracker_;
  std::optional<RedundantSentenceSet> redundant_;
  PendingTokenText pending_;  // text of the sampled token not yet fed
  int64_t nonexec_ = 0;
  int64_t pss_sentences_ = 0;
  int64_t updates_ = 0;
  std::chrono::steady_clock::duration busy_{};
};

std::unique_ptr<SkipkvSentenceHooks> MakeSkipkvSentenceHooks(const SkipkvConfig& config,
                                                             std::shared_ptr<const SkipkvTokenSets> sets,
                                                             GenPosRangePenalty* penalty,
                                                             bool observe = false);

}  // namespace skipkv
