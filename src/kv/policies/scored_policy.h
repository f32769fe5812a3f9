// ScoredPolicy: the shared skeleton of every score-based policy (rkv,
// snapkv, h2o_rkv, h2o_acc; SkipKV later). Per KV head it asks the subclass
// for one score per candidate slot [0, N − R) (R = recent_window()), applies
// the score adjusters and the padded-mode +inf for pads (FinishScores), and
// keeps the top B − R candidates plus the last R slots (SelectTopKPlusRecent:
// ties to the lower gen_pos, result ascending).
#pragma once

#include <span>

#include "kv/kv_policy.h"

namespace skipkv::policies {

class ScoredPolicy : public KvPolicy {
 public:
  void SelectKeep(const KvLayerInput& in, KvScratch& scratch, KeepSets& keep) const final;

 protected:
  using KvPolicy::KvPolicy;
  // Writes score[n] for the candidates n in [0, score.size()) of KV head h
  // (higher = keep). May use every scratch buffer except `score`.
  virtual void ScoreHead(const KvLayerInput& in, int h, KvScratch& scratch, std::span<float> score) const = 0;

  // Helpers for subclasses. Pointer to KV head h's keys [n_slots][head_dim].
  static const float* HeadKeys(const KvLayerInput& in, int h) {
    return in.keys + static_cast<size_t>(h) * in.n_slots * in.head_dim;
  }
  // Pointer to the query rows of KV head h's group: [G][n_queries][head_dim].
  static const float* GroupQueries(const KvLayerInput& in, int h) {
    const int group = in.n_heads / in.n_kv_heads;
    return in.queries + static_cast<size_t>(h) * group * in.n_queries * in.head_dim;
  }
};

}  // namespace skipkv::policies
