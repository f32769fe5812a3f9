// Cumulative H2O ("h2o_acc"): "H2O: Heavy-Hitter Oracle for Efficient
// Generative Inference of LLMs" (Zhang et al., 2023), reference
// FMInference/H2O `h2o_hf/utils_real_drop/modify_llama.py` (spec §3.3).
// Every slot carries its accumulated attention hh[n] = Σ over the steps it
// was attended, over the rows and over the query heads of its KV head's group
// (SequenceKvCache::AttentionScore, summed by the attention kernel):
//   keep = top_heavy( hh[n], n < N − recent ), sorted, ∪ the last `recent`
// with heavy + recent = B (default heavy = recent = B/2); the accumulator is
// gathered with the slots (Compact), so scores keep accumulating.
// Deviations: the reference evicts at every step once seq_len > B; here the
// common R-KV schedule applies (every Δt; interval = 1 gives the reference
// behaviour). The reference sums over the batch dim (batch 1 only); here
// each sequence has its own accumulator. Per KV head with GQA (the
// reference is MHA). Pads get no attention and, in padded mode, +inf.
#include <string>

#include "kv/policies/scored_policy.h"
#include "util/check.h"

namespace skipkv::policies {
namespace {

class H2oAccPolicy final : public ScoredPolicy {
 public:
  explicit H2oAccPolicy(const KvPolicyConfig& c) : ScoredPolicy(c) {
    SKIPKV_CHECK(c.h2o_heavy > 0 && c.h2o_recent > 0 && c.h2o_heavy + c.h2o_recent == c.budget);
  }
  std::string_view name() const override { return "h2o_acc"; }
  bool needs_attention_scores() const override { return true; }
  int64_t recent_window() const override { return config().h2o_recent; }

 protected:
  void ScoreHead(const KvLayerInput& in, int h, KvScratch&, std::span<float> score) const override {
    SKIPKV_CHECK_MSG(!in.attention.empty() && in.attention[h] != nullptr,
                     "h2o_acc needs a cache with track_attention (ConfigureCacheShape)");
    const float* acc = in.attention[h];
    for (size_t n = 0; n < score.size(); ++n) score[n] = acc[n];
  }
};

}  // namespace

// Resolves h2o_heavy / h2o_recent = -1 (automatic) into concrete sizes:
// recent = B/2 (or B − heavy when only heavy is given), heavy = B − recent.
StatusOr<std::unique_ptr<KvPolicy>> MakeH2oAcc(const KvPolicyConfig& config) {
  SKIPKV_RETURN_IF_ERROR(ValidateEvictionConfig(config));
  KvPolicyConfig c = config;
  if (c.h2o_recent < 0 && c.h2o_heavy < 0) c.h2o_recent = c.budget / 2;
  if (c.h2o_recent < 0) c.h2o_recent = c.budget - c.h2o_heavy;
  if (c.h2o_heavy < 0) c.h2o_heavy = c.budget - c.h2o_recent;
  if (c.h2o_heavy < 1 || c.h2o_recent < 1 || c.h2o_heavy + c.h2o_recent != c.budget) {
    return InvalidField("h2o_heavy", "kv policy '" + config.policy + "': h2o_heavy (" +
                           std::to_string(config.h2o_heavy) + ") and h2o_recent (" +
                           std::to_string(config.h2o_recent) + ") must be ≥ 1 and sum to the budget (" +
                           std::to_string(config.budget) + "); use -1 for automatic (B/2 each)");
  }
  return std::unique_ptr<KvPolicy>(std::make_unique<H2oAccPolicy>(c));
}

}  // namespace skipkv::policies
