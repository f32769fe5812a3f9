// The registry of the built-in KV policies: one factory declaration and one
// table line per name. Nothing self-registers, so the static library never
// drops a policy at link time. Adding a policy: its own file defining its
// factory (validation included), one line in each list below, and its test
// (docs/kv-policies.md, "Adding a policy").
#include "kv/kv_policy.h"

namespace skipkv {
namespace policies {

StatusOr<std::unique_ptr<KvPolicy>> MakeFull(const KvPolicyConfig& config);       // full.cpp
StatusOr<std::unique_ptr<KvPolicy>> MakeStreaming(const KvPolicyConfig& config);  // streaming_llm.cpp
StatusOr<std::unique_ptr<KvPolicy>> MakeH2oRkv(const KvPolicyConfig& config);     // h2o_rkv.cpp
StatusOr<std::unique_ptr<KvPolicy>> MakeH2oAcc(const KvPolicyConfig& config);     // h2o_acc.cpp
StatusOr<std::unique_ptr<KvPolicy>> MakeSnapKv(const KvPolicyConfig& config);     // snapkv.cpp
StatusOr<std::unique_ptr<KvPolicy>> MakeRkv(const KvPolicyConfig& config);        // rkv.cpp
StatusOr<std::unique_ptr<KvPolicy>> MakeSkipkv(const KvPolicyConfig& config);     // skipkv.cpp

}  // namespace policies

namespace {

// "h2o" is an alias of "h2o_rkv": the R-KV code base's H2O baseline in its
// evident intent (latest query only, one recent slot, spec §3.1; the
// reference crashes once triggered, see h2o_rkv.cpp). The cumulative H2O of
// the original paper is "h2o_acc".
// The third column: the optional fields the policy reads (KvPolicyReads).
constexpr KvPolicyRegistration kPolicies[] = {
    {"full", policies::MakeFull},
    {"streaming", policies::MakeStreaming, kReadsSinks},
    {"h2o", policies::MakeH2oRkv},
    {"h2o_rkv", policies::MakeH2oRkv},
    {"h2o_acc", policies::MakeH2oAcc, kReadsH2oSplit},
    {"snapkv", policies::MakeSnapKv},
    {"rkv", policies::MakeRkv, kReadsMixLambda},
    {"skipkv", policies::MakeSkipkv, kReadsMixLambda},
};

}  // namespace

std::span<const KvPolicyRegistration> KvPolicyRegistry() { return kPolicies; }

}  // namespace skipkv
