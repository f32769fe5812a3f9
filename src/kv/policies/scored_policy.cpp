// ScoredPolicy::SelectKeep (see scored_policy.h).
#include "kv/policies/scored_policy.h"

#include "kv/scores.h"
#include "util/check.h"

namespace skipkv::policies {

void ScoredPolicy::SelectKeep(const KvLayerInput& in, KvScratch& scratch, KeepSets& keep) const {
  const int64_t n = in.n_slots, r = recent_window(), b = budget();
  SKIPKV_CHECK(n >= b && b > r);
  const int64_t n_cand = n - r;
  keep.resize(in.n_kv_heads);
  if (scratch.score.size() < static_cast<size_t>(n_cand)) scratch.score.resize(n_cand);
  std::span<float> score(scratch.score.data(), n_cand);
  for (int h = 0; h < in.n_kv_heads; ++h) {
    ScoreHead(in, h, scratch, score);
    kvscore::FinishScores(in.adjusters, in.layer, h, std::span<const int32_t>(in.gen_pos[h], n), in.valid[h],
                          in.padded, score);
    kvscore::SelectTopKPlusRecent(score, n, r, b, &keep[h], scratch);
  }
}

}  // namespace skipkv::policies
