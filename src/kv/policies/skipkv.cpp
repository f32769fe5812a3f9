// The "skipkv" policy (see skipkv.h): R-KV's scoring and selection
// (RkvPolicy), a SkipkvSequenceState per sequence whose penalty the
// ScoredPolicy skeleton subtracts from the candidate scores before top-k.
#include "kv/policies/skipkv.h"

#include "kv/policies/rkv.h"

namespace skipkv::policies {
namespace {

class SkipkvPolicy final : public RkvPolicy {
 public:
  explicit SkipkvPolicy(const KvPolicyConfig& c) : RkvPolicy(c) {}
  std::string_view name() const override { return "skipkv"; }
  bool uses_sentences() const override { return true; }
  std::unique_ptr<KvSequenceState> NewSequenceState() const override {
    return std::make_unique<SkipkvSequenceState>(config().skipkv.sentence_scoring, config().skipkv.range_min_slots);
  }
};

}  // namespace

// Validates R-KV's fields, then the sentence fields (docs/spec.md §6.11).
StatusOr<std::unique_ptr<KvPolicy>> MakeSkipkv(const KvPolicyConfig& config) {
  SKIPKV_RETURN_IF_ERROR(ValidateEvictionConfig(config));
  Status st = ValidateSkipkvConfig(config.skipkv);
  if (!st.ok()) return st.WithContext("kv policy 'skipkv'");
  return std::unique_ptr<KvPolicy>(std::make_unique<SkipkvPolicy>(config));
}

}  // namespace skipkv::policies
