// R-KV: "R-KV: Redundancy-aware KV Cache Compression for Reasoning Models"
// (Cai et al., 2025), reference code Zefan-Cai/R-KV `R1KV.update_kv`
// (docs/spec.md §2.2). For one (sequence, layer, KV head) with N slots, window α:
//   imp = maxpool_k( mean_w softmax_{n < N−α}( max_g q_{g,w}·k_n / √d ) )
//   red = softmax_n( (1/N) Σ_a S'[a][n] ),  S' = Kn Knᵀ, zero diagonal,
//         retain-last edit per row (largest c with S > 0.5, else column 0)
//   score = λ·imp − (1−λ)·red  over the candidates n < N − α  (λ = mix_lambda)
//   keep  = top_{B−α}(score), sorted by position, ∪ the last α slots.
// Deviations from the reference code, all deliberate (docs/spec.md §2.3, §6.6):
//   * redundancy is computed per sequence (the reference scores every batch
//     row with row 0's keys — R-KV issue #20);
//   * invalid (pad) slots are masked: −inf logits in the importance, zeroed
//     keys in the redundancy; in padded mode they score +inf (never evicted);
//   * scores are f32 (the reference runs bf16 outside the softmax), ties go
//     to the lower gen_pos, and kept slots stay in position order (the
//     reference returns them in score order).
#include "kv/policies/rkv.h"

#include "kv/scores.h"

namespace skipkv::policies {

void RkvPolicy::ScoreHead(const KvLayerInput& in, int h, KvScratch& scratch, std::span<float> score) const {
  const int64_t n = in.n_slots, n_cand = static_cast<int64_t>(score.size());
  const float* k = HeadKeys(in, h);
  const uint8_t* valid = in.valid[h];
  if (scratch.imp.size() < static_cast<size_t>(n_cand)) scratch.imp.resize(n_cand);
  if (scratch.red.size() < static_cast<size_t>(n)) scratch.red.resize(n);
  // Raw importance into score, pooled into imp.
  kvscore::AttentionImportance(GroupQueries(in, h), in.n_heads / in.n_kv_heads, in.n_queries, k, n_cand,
                               in.head_dim, valid, score.data(), scratch);
  kvscore::MaxPool1d(score.data(), n_cand, config().pool_kernel, scratch.imp.data());
  kvscore::Redundancy(k, n, in.head_dim, valid, scratch.red.data(), scratch);
  kvscore::MixScores(scratch.imp.data(), scratch.red.data(), n_cand, config().mix_lambda, score.data());
}

StatusOr<std::unique_ptr<KvPolicy>> MakeRkv(const KvPolicyConfig& config) {
  SKIPKV_RETURN_IF_ERROR(ValidateEvictionConfig(config));
  return std::unique_ptr<KvPolicy>(std::make_unique<RkvPolicy>(config));
}

}  // namespace skipkv::policies
