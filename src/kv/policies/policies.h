// Factories of the built-in policies, one per file in this directory. The
// registry (kv_policy.cpp) lists them in a table; nothing self-registers, so
// the static library never drops a policy at link time. Each factory gets a
// validated config whose h2o_heavy/h2o_recent are already resolved.
#pragma once

#include <memory>

#include "kv/kv_policy.h"

namespace skipkv::policies {

std::unique_ptr<KvPolicy> MakeFull(const KvPolicyConfig& config);       // full.cpp
std::unique_ptr<KvPolicy> MakeStreaming(const KvPolicyConfig& config);  // streaming_llm.cpp
std::unique_ptr<KvPolicy> MakeH2oRkv(const KvPolicyConfig& config);     // h2o_rkv.cpp
std::unique_ptr<KvPolicy> MakeH2oAcc(const KvPolicyConfig& config);     // h2o_acc.cpp
std::unique_ptr<KvPolicy> MakeSnapKv(const KvPolicyConfig& config);     // snapkv.cpp
std::unique_ptr<KvPolicy> MakeRkv(const KvPolicyConfig& config);        // rkv.cpp
std::unique_ptr<KvPolicy> MakeSkipkv(const KvPolicyConfig& config);     // skipkv.cpp

}  // namespace skipkv::policies
