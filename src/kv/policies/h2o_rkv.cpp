// H2O as R-KV intends it ("h2o" / "h2o_rkv"): "H2O: Heavy-Hitter Oracle for
// Efficient Generative Inference of LLMs" (Zhang et al., 2023), in the form
// of Zefan-Cai/R-KV `rkv/compression/h2o.py` (docs/spec.md §3.1): window forced to
// 1, only the latest query, GQA max on logits, softmax over the keys except
// the newest:
//   score = softmax_{n < N−1}( max_g q_{g,last}·k_n / √d )
//   keep  = top_{B−1}(score), sorted by position, ∪ the newest slot.
// Not cumulative: closer to a one-query SnapKV than to H2O (h2o_acc is the
// real one). Deviations: the reference crashes once triggered (a 3-D index
// expand in R-KV, a wrong slice in the SkipKV prototype, docs/spec.md §3.1); this is
// the evident intent. No max-pooling (the reference has none). Pads masked
// (padded mode: never evicted), f32, ties to the lower gen_pos, position order.
#include <algorithm>

#include "kv/policies/scored_policy.h"
#include "kv/scores.h"

namespace skipkv::policies {
namespace {

class H2oRkvPolicy final : public ScoredPolicy {
 public:
  explicit H2oRkvPolicy(const KvPolicyConfig& c) : ScoredPolicy(c) {}
  std::string_view name() const override { return "h2o_rkv"; }
  bool needs_keys() const override { return true; }
  bool needs_queries() const override { return true; }
  int64_t recent_window() const override { return 1; }

 protected:
  void ScoreHead(const KvLayerInput& in, int h, KvScratch& scratch, std::span<float> score) const override {
    const int group = in.n_heads / in.n_kv_heads, d = in.head_dim;
    // Gather the latest query of each head of the group: [G][1][d].
    if (scratch.q.size() < static_cast<size_t>(group) * d) scratch.q.resize(static_cast<size_t>(group) * d);
    const float* q = GroupQueries(in, h);
    for (int g = 0; g < group; ++g) {
      const float* row = q + (static_cast<size_t>(g) * in.n_queries + (in.n_queries - 1)) * d;
      std::copy(row, row + d, scratch.q.data() + static_cast<size_t>(g) * d);
    }
    kvscore::AttentionImportance(scratch.q.data(), group, 1, HeadKeys(in, h),
                                 static_cast<int64_t>(score.size()), d, in.valid[h], score.data(), scratch);
  }
};

}  // namespace

StatusOr<std::unique_ptr<KvPolicy>> MakeH2oRkv(const KvPolicyConfig& config) {
  SKIPKV_RETURN_IF_ERROR(ValidateEvictionConfig(config));
  return std::unique_ptr<KvPolicy>(std::make_unique<H2oRkvPolicy>(config));
}

}  // namespace skipkv::policies
