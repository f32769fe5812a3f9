// RkvPolicy: the R-KV scoring (see rkv.cpp for the formula and the
// deliberate deviations from the reference code). Exposed so that SkipKV
// (skipkv.cpp), whose Eq. 6 is R-KV's score minus a per-sequence sentence
// penalty, reuses it instead of copying it.
#pragma once

#include "kv/policies/scored_policy.h"

namespace skipkv::policies {

class RkvPolicy : public ScoredPolicy {
 public:
  explicit RkvPolicy(const KvPolicyConfig& c) : ScoredPolicy(c) {}
  std::string_view name() const override { return "rkv"; }
  bool needs_keys() const override { return true; }
  bool needs_queries() const override { return true; }
  int64_t recent_window() const override { return config().window; }

 protected:
  // score = λ·maxpool(importance) − (1−λ)·redundancy over the candidates (λ = mix_lambda).
  void ScoreHead(const KvLayerInput& in, int h, KvScratch& scratch, std::span<float> score) const override;
};

}  // namespace skipkv::policies
