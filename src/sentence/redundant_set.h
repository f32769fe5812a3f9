// RedundantSentenceSet: SkipKV's pairwise sentence similarity (PSS) and the
// redundant-sentence table T (spec Eq. 1, 3, 7; §6.7; A7).
//
// Sentences that take part in the PSS are pushed in order with their unit
// embeddings (Eq. 2). Update() (called at each scheduled compression step,
// §6.5 step 7) compares every sentence pushed since the previous Update, in
// order, with the at most K = max_sentences participating sentences that
// precede it: PSS(i, j) = v_i · v_j (Eq. 1, unit vectors), computed as one
// f32 matrix-vector product over the stored embeddings per new sentence. An
// earlier sentence i with PSS(i, j) > τ is redundant (Eq. 3) and enters T as
// its span (b_i, e_i) ↦ λ_i, λ_i = the largest such PSS seen so far (A7: max,
// so T does not depend on the comparison order), or with SkipkvLambdaRule::kLast
// the PSS of the last qualifying pair (the latest later sentence j; the
// SkipKV authors' code, issue 38 row 10). T never shrinks.
//
// Memory: the embeddings of the last K compared sentences plus those pushed
// since the last Update; older ones are discarded (they can never be
// compared again).
//
// Pair statistics (paper Fig. 14): of the pairs (i, j) compared — each
// sentence j with the at most K participating sentences before it — how
// many have PSS(i, j) >= 0.95 (kFig14Threshold, independent of τ). Pairs()
// also counts the pairs of sentences still queued (computed there, without
// changing the set), so the figure covers every pushed sentence whether or
// not an Update followed it.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "kv/score_adjust.h"
#include "sentence/sentence_tracker.h"
#include "util/thread_pool.h"

namespace skipkv {

class RedundantSentenceSet {
 public:
  static constexpr float kFig14Threshold = 0.95f;
  struct PairCounts {
    int64_t similar = 0;   // pairs with PSS >= kFig14Threshold
    int64_t compared = 0;  // pairs compared
  };

  // d > 0, tau in (0, 1], max_sentences >= 1 (see ValidateSkipkvConfig).
  RedundantSentenceSet(int d, float tau, int64_t max_sentences,
                       SkipkvLambdaRule rule = SkipkvLambdaRule::kMax);

  void Reset();

  // Queues sentence `s` with its unit embedding unit_emb[d] (copied).
  void Push(const Sentence& s, const float* unit_emb);

  // Compares the queued sentences (see the file comment) and records the
  // redundant ones in T and, when `penalty` is not null, through
  // penalty->Add(b_i, e_i, λ_i). Returns the number of sentences that entered T.
  int64_t Update(GenPosRangePenalty* penalty);

  // T: (b, e) ↦ λ, inclusive gen_pos spans.
  const std::map<std::pair<int32_t, int32_t>, float>& table() const { return table_; }
  int64_t pending() const { return static_cast<int64_t>(spans_.size()) - compared_; }
  int64_t stored() const { return static_cast<int64_t>(spans_.size()); }  // embeddings held
  int64_t comparisons() const { return comparisons_; }                    // dot products computed so far
  int64_t pushed() const { return pushed_; }
  // The pair statistics over every pushed sentence (see the file comment).
  PairCounts Pairs() const;

 private:
  int d_;
  float tau_;
  int64_t k_;
  SkipkvLambdaRule rule_;
  std::vector<std::pair<int32_t, int32_t>> spans_;  // of the stored embeddings, oldest first
  std::vector<float> emb_;                          // [spans_.size()][d], unit rows
  int64_t compared_ = 0;                            // leading stored entries already compared
  std::map<std::pair<int32_t, int32_t>, float> table_;
  std::vector<float> sims_;
  int64_t comparisons_ = 0, pushed_ = 0;
  int64_t similar_pairs_ = 0;  // of the comparisons_ so far, those with PSS >= kFig14Threshold
  // Sims of sentence j (stored index) against the at most K stored before it
  // into sims[0, m); returns m.
  int64_t SimsBefore(int64_t j, std::vector<float>* sims) const;
  mutable ThreadPool pool_{1};  // MatVec's single-threaded pool (runs on the caller)
};

}  // namespace skipkv
