// FullKV ("full"): no eviction; the cache grows with the sequence
// (SequenceKvCache::kUnbounded). The reference point for every other policy:
// evicting nothing must give logits identical to this.
#include "kv/kv_policy.h"

namespace skipkv::policies {
namespace {

class FullPolicy final : public KvPolicy {
 public:
  explicit FullPolicy(const KvPolicyConfig& c) : KvPolicy(c) {}
  std::string_view name() const override { return "full"; }
  bool evicts() const override { return false; }
  int64_t recent_window() const override { return 0; }
  int64_t max_pad_len() const override { return INT64_MAX; }
  int64_t CacheCapacity(int64_t) const override { return SequenceKvCache::kUnbounded; }
  // Never called by the compressor (evicts() is false); keeps every slot.
  void SelectKeep(const KvLayerInput& in, KvScratch&, KeepSets& keep) const override {
    keep.assign(in.n_kv_heads, {});
    for (auto& k : keep)
      for (int64_t i = 0; i < in.n_slots; ++i) k.push_back(static_cast<int32_t>(i));
  }
};

}  // namespace

// Uses none of budget/window/interval/..., so none of them is validated.
StatusOr<std::unique_ptr<KvPolicy>> MakeFull(const KvPolicyConfig& config) {
  return std::unique_ptr<KvPolicy>(std::make_unique<FullPolicy>(config));
}

}  // namespace skipkv::policies
