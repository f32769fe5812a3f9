// SnapKV: "SnapKV: LLM Knows What You are Looking for Before Generation"
// (Li et al., 2024), in the decode-time form R-KV benchmarks it
// (Zefan-Cai/R-KV `rkv/compression/snapkv.py`, docs/spec.md §3.1): the R-KV
// importance alone, re-run at every scheduled compression:
//   score = maxpool_k( mean_w softmax_{n < N−α}( max_g q_{g,w}·k_n / √d ) )
//   keep  = top_{B−α}(score), sorted by position, ∪ the last α slots.
// Deviations: from the original SnapKV (docs/spec.md §3.2) — it runs during decoding,
// not only after the prefill; the softmax covers the non-window keys only;
// mean (not sum) over the window; max-pool kernel 7 (not avg-pool 5); GQA by
// max over the group's logits, so the cache keeps n_kv_heads heads. From the
// R-KV code — pad slots masked (padded mode: never evicted), f32 scores,
// ties to the lower gen_pos, kept slots in position order.
#include "kv/policies/scored_policy.h"
#include "kv/scores.h"

namespace skipkv::policies {
namespace {

class SnapKvPolicy final : public ScoredPolicy {
 public:
  explicit SnapKvPolicy(const KvPolicyConfig& c) : ScoredPolicy(c) {}
  std::string_view name() const override { return "snapkv"; }
  bool needs_keys() const override { return true; }
  bool needs_queries() const override { return true; }
  int64_t recent_window() const override { return config().window; }

 protected:
  void ScoreHead(const KvLayerInput& in, int h, KvScratch& scratch, std::span<float> score) const override {
    const int64_t n_cand = static_cast<int64_t>(score.size());
    if (scratch.imp.size() < static_cast<size_t>(n_cand)) scratch.imp.resize(n_cand);
    kvscore::AttentionImportance(GroupQueries(in, h), in.n_heads / in.n_kv_heads, in.n_queries,
                                 HeadKeys(in, h), n_cand, in.head_dim, in.valid[h], scratch.imp.data(),
                                 scratch);
    kvscore::MaxPool1d(scratch.imp.data(), n_cand, config().pool_kernel, score.data());
  }
};

}  // namespace

StatusOr<std::unique_ptr<KvPolicy>> MakeSnapKv(const KvPolicyConfig& config) {
  SKIPKV_RETURN_IF_ERROR(ValidateEvictionConfig(config));
  return std::unique_ptr<KvPolicy>(std::make_unique<SnapKvPolicy>(config));
}

}  // namespace skipkv::policies
