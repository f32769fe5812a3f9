// The "skipkv" policy (see skipkv.h): R-KV's scoring and selection
// (RkvPolicy), a SkipkvSequenceState per sequence whose penalty the
// ScoredPolicy skeleton subtracts from the candidate scores before top-k.
#include "kv/policies/skipkv.h"

#include "kv/policies/policies.h"
#include "kv/policies/rkv.h"

namespace skipkv::policies {
namespace {

class SkipkvPolicy final : public RkvPolicy {
 public:
  explicit SkipkvPolicy(const KvPolicyConfig& c) : RkvPolicy(c) {}
  std::string_view name() const override { return "skipkv"; }
  std::unique_ptr<KvSequenceState> NewSequenceState() const override {
    return std::make_unique<SkipkvSequenceState>(config().skipkv.sentence_scoring);
  }
};

}  // namespace

std::unique_ptr<KvPolicy> MakeSkipkv(const KvPolicyConfig& config) {
  return std::make_unique<SkipkvPolicy>(config);
}

}  // namespace skipkv::policies
