// StreamingLLM ("streaming"): "Efficient Streaming Language Models with
// Attention Sinks" (Xiao et al., 2023), as R-KV runs it
// (Zefan-Cai/R-KV `rkv/compression/streamingllm.py`, spec §3.1): when a
// layer holds ≥ B slots, keep the first `sinks` (default 4) and the last
// B − sinks. No scores; kept keys keep their original RoPE phases (keys are
// cached after RoPE, slots keep gen_pos).
// Deviations: the original re-assigns positions inside the cache (rolling
// RoPE); like R-KV we do not. Padded mode: every pad slot is kept and the
// sinks are the first `sinks` *valid* slots, so a row keeps Δpad pads +
// sinks + (B − sinks − Δpad) recent slots; in ragged mode this is exactly
// first-`sinks` + last-(B − sinks). Score adjusters do not apply.
#include <algorithm>
#include <string>

#include "kv/kv_policy.h"
#include "util/check.h"

namespace skipkv::policies {
namespace {

class StreamingPolicy final : public KvPolicy {
 public:
  explicit StreamingPolicy(const KvPolicyConfig& c) : KvPolicy(c) {}
  std::string_view name() const override { return "streaming"; }
  // Guaranteed recent slots: B − sinks in ragged mode; in padded mode the
  // pads take some of those, and ValidatePadLens keeps at least α.
  int64_t recent_window() const override {
    return config().pad_policy == PadPolicy::kPadded ? config().window : budget() - config().streaming_sinks;
  }
  int64_t max_pad_len() const override { return budget() - config().streaming_sinks - config().window; }

  void SelectKeep(const KvLayerInput& in, KvScratch& scratch, KeepSets& keep) const override {
    const int64_t n = in.n_slots, b = budget();
    SKIPKV_CHECK(n >= b);
    keep.resize(in.n_kv_heads);
    if (scratch.idx.size() < static_cast<size_t>(n)) scratch.idx.resize(n);
    int32_t* mark = scratch.idx.data();  // 1 = kept
    for (int h = 0; h < in.n_kv_heads; ++h) {
      std::fill(mark, mark + n, 0);
      const uint8_t* valid = in.valid[h];
      int64_t kept = 0;
      // Front: every pad (padded mode), then the first `sinks` other slots.
      if (in.padded) {
        for (int64_t i = 0; i < n; ++i)
          if (!valid[i]) mark[i] = 1, ++kept;
      }
      for (int64_t i = 0, sinks = 0; i < n && sinks < config().streaming_sinks; ++i) {
        if (mark[i]) continue;
        mark[i] = 1, ++kept, ++sinks;
      }
      SKIPKV_CHECK_MSG(kept <= b, "streaming: pads + sinks exceed the budget (see ValidatePadLens)");
      // Back: the most recent unmarked slots until B are kept.
      for (int64_t i = n - 1; i >= 0 && kept < b; --i) {
        if (!mark[i]) mark[i] = 1, ++kept;
      }
      auto& k = keep[h];
      k.clear();
      for (int64_t i = 0; i < n; ++i)
        if (mark[i]) k.push_back(static_cast<int32_t>(i));
    }
  }
};

}  // namespace

StatusOr<std::unique_ptr<KvPolicy>> MakeStreaming(const KvPolicyConfig& config) {
  SKIPKV_RETURN_IF_ERROR(ValidateEvictionConfig(config));
  if (config.streaming_sinks < 0 || config.streaming_sinks + config.window > config.budget) {
    return InvalidField(
        "sinks", "kv policy '" + config.policy + "': streaming_sinks (" + std::to_string(config.streaming_sinks) +
        ") must be in [0, budget − window] = [0, " + std::to_string(config.budget - config.window) + "]");
  }
  return std::unique_ptr<KvPolicy>(std::make_unique<StreamingPolicy>(config));
}

}  // namespace skipkv::policies
