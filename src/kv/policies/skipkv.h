// SkipKV's KV policy ("skipkv"): the R-KV score minus a per-sequence sentence
// penalty (SkipKV Eq. 6, docs/spec.md §6.6 (c)), selection by plain top-k:
//   score(t) = σ·imp(t) − (1−σ)·red(t) − λ_i   if gen_pos(t) lies in redundant sentence i
//   score(t) = σ·imp(t) − (1−σ)·red(t)         otherwise
// σ = KvPolicyConfig::mix_lambda (0.1), imp/red exactly R-KV's (rkv.h). The
// redundant set T = {[b_i, e_i] (gen space) ↦ λ_i} (Eq. 7) is owned by the
// sequence's SkipkvSequenceState; the sentence hooks (src/steer) fill it at
// scheduled compression steps. Range monitoring (Eq. 8–11) is the gen_pos
// mapping of GenPosRangePenalty: per (layer, KV head) the cache range of
// [b, e] is [lower_bound(gen_pos, b), upper_bound(gen_pos, e) − 1] (spec
// §6.1; tests/unit/kv_skipkv_test.cpp proves it equal to literal Eq. 9–11).
// Back-fill: redundant slots are not force-evicted; since λ ≥ τ ≫ |R-KV
// score|, they go first, and when fewer than B − α unpenalised candidates
// exist the best-scoring redundant ones fill the cache to exactly B
// (docs/spec.md §6.8, the reference's R2KV_SLOW).
#pragma once

#include <memory>

#include "kv/kv_policy.h"
#include "kv/score_adjust.h"

namespace skipkv {

class SkipkvSequenceState : public KvSequenceState {
 public:
  // sentence_scoring = false is the ablation: T is still kept (diagnostics)
  // but not applied, so the policy selects exactly what rkv selects.
  // range_min_slots: GenPosRangePenalty's min_slots (issue 38 row 9).
  explicit SkipkvSequenceState(bool sentence_scoring, int range_min_slots = 1)
      : penalty(range_min_slots), sentence_scoring_(sentence_scoring) {}
  const SlotScoreAdjuster* adjuster() const override { return sentence_scoring_ ? &penalty : nullptr; }
  bool sentence_scoring() const { return sentence_scoring_; }

  // T in generation space (Eq. 7): written by the sentence hooks before a
  // compressing forward, read (const) by the compression.
  GenPosRangePenalty penalty;

 private:
  bool sentence_scoring_;
};

}  // namespace skipkv
