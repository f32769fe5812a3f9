// RedundantSentenceSet (see redundant_set.h).
#include "sentence/redundant_set.h"

#include <algorithm>

#include "kernels/ops.h"
#include "tensor/tensor_view.h"
#include "util/check.h"

namespace skipkv {

RedundantSentenceSet::RedundantSentenceSet(int d, float tau, int64_t max_sentences, SkipkvLambdaRule rule)
    : d_(d), tau_(tau), k_(max_sentences), rule_(rule) {
  SKIPKV_CHECK(d_ > 0 && tau_ > 0.f && tau_ <= 1.f && k_ >= 1);
}

void RedundantSentenceSet::Reset() {
  spans_.clear();
  emb_.clear();
  compared_ = 0;
  table_.clear();
  comparisons_ = pushed_ = similar_pairs_ = 0;
}

void RedundantSentenceSet::Push(const Sentence& s, const float* unit_emb) {
  spans_.emplace_back(s.b, s.e);
  emb_.insert(emb_.end(), unit_emb, unit_emb + d_);
  ++pushed_;
}

int64_t RedundantSentenceSet::SimsBefore(int64_t j, std::vector<float>* sims) const {
  // Earlier sentences j−m .. j−1, m ≤ K: sims = E[j−m .. j) · v_j.
  const int64_t m = std::min<int64_t>(j, k_);
  if (m == 0) return 0;
  TensorView e;
  e.type = DType::kF32;
  e.n_dims = 2;
  e.ne = {d_, m, 1, 1};
  e.data = reinterpret_cast<const uint8_t*>(emb_.data() + (j - m) * d_);
  sims->resize(m);
  kernels::MatVec(e, emb_.data() + j * d_, sims->data(), pool_);
  return m;
}

int64_t RedundantSentenceSet::Update(GenPosRangePenalty* penalty) {
  const int64_t n = static_cast<int64_t>(spans_.size());
  int64_t entered = 0;
  for (int64_t j = compared_; j < n; ++j) {
    const int64_t m = SimsBefore(j, &sims_);
    if (m == 0) continue;
    const int64_t first = j - m;
    comparisons_ += m;
    for (int64_t i = 0; i < m; ++i) {
      const float sim = sims_[i];
      if (sim >= kFig14Threshold) ++similar_pairs_;
      if (!(sim > tau_)) continue;
      const auto span = spans_[first + i];
      auto [it, inserted] = table_.emplace(span, sim);
      if (inserted) {
        ++entered;
      } else if (rule_ == SkipkvLambdaRule::kLast) {
        it->second = sim;  // j ascends, so the last write is the latest later sentence
      } else {
        it->second = std::max(it->second, sim);
      }
      if (!penalty) continue;
      if (rule_ == SkipkvLambdaRule::kLast) {
        penalty->Set(span.first, span.second, it->second);
      } else {
        penalty->Add(span.first, span.second, it->second);
      }
    }
  }
  // Keep only the last K embeddings: nothing older can be compared again.
  if (n > k_) {
    const int64_t drop = n - k_;
    spans_.erase(spans_.begin(), spans_.begin() + drop);
    emb_.erase(emb_.begin(), emb_.begin() + drop * d_);
  }
  compared_ = static_cast<int64_t>(spans_.size());
  return entered;
}

RedundantSentenceSet::PairCounts RedundantSentenceSet::Pairs() const {
  PairCounts c{similar_pairs_, comparisons_};
  std::vector<float> sims;
  for (int64_t j = compared_; j < static_cast<int64_t>(spans_.size()); ++j) {
    const int64_t m = SimsBefore(j, &sims);
    c.compared += m;
    for (int64_t i = 0; i < m; ++i) c.similar += sims[i] >= kFig14Threshold;
  }
  return c;
}

}  // namespace skipkv
