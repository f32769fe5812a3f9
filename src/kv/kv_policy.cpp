// The policy registry (a table of factories), configuration validation and
// the capacity rule. See kv_policy.h.
#include "kv/kv_policy.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "io/model_limits.h"
#include "kv/policies/policies.h"

namespace skipkv {
namespace {

struct PolicyEntry {
  const char* name;
  std::unique_ptr<KvPolicy> (*make)(const KvPolicyConfig&);
};

// The registry: name -> factory. "h2o" is the R-KV intended semantics.
constexpr PolicyEntry kPolicies[] = {
    {"full", policies::MakeFull},      {"streaming", policies::MakeStreaming},
    {"h2o", policies::MakeH2oRkv},     {"h2o_rkv", policies::MakeH2oRkv},
    {"h2o_acc", policies::MakeH2oAcc}, {"snapkv", policies::MakeSnapKv},
    {"rkv", policies::MakeRkv},
};

const PolicyEntry* FindPolicy(const std::string& name) {
  for (const auto& e : kPolicies)
    if (name == e.name) return &e;
  return nullptr;
}

std::string KnownList() {
  std::string s;
  for (const auto& e : kPolicies) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

std::string Val(int64_t v) { return std::to_string(v); }

// Resolves h2o_heavy / h2o_recent = -1 (automatic) into concrete sizes.
void ResolveH2oSplit(KvPolicyConfig& c) {
  if (c.h2o_recent < 0 && c.h2o_heavy < 0) c.h2o_recent = c.budget / 2;
  if (c.h2o_recent < 0) c.h2o_recent = c.budget - c.h2o_heavy;
  if (c.h2o_heavy < 0) c.h2o_heavy = c.budget - c.h2o_recent;
}

}  // namespace

std::vector<std::string> KnownKvPolicyNames() {
  std::vector<std::string> names;
  for (const auto& e : kPolicies) names.emplace_back(e.name);
  return names;
}

Status ValidateKvPolicyConfig(const KvPolicyConfig& config) {
  const std::string p = "kv policy '" + config.policy + "': ";
  if (!FindPolicy(config.policy)) {
    return InvalidArgument("unknown KV policy '" + config.policy + "' (known: " + KnownList() + ")");
  }
  for (int layer : config.trace_layers) {
    if (layer < 0) return InvalidArgument(p + "trace layer " + Val(layer) + " is negative");
  }
  if (config.policy == "full") return Status::Ok();  // nothing else is used
  if (config.window < 1) {
    return InvalidArgument(p + "window (" + Val(config.window) + ") must be at least 1");
  }
  // No slot count or interval may exceed the largest context a model may have.
  for (const auto& [name, v] : {std::pair<const char*, int64_t>{"budget", config.budget},
                                {"window", config.window}, {"interval", config.interval}}) {
    if (v > model_limits::kMaxContext) {
      return InvalidArgument(p + name + " (" + Val(v) + ") exceeds " + Val(model_limits::kMaxContext) +
                             ", the largest context length");
    }
  }
  if (config.budget <= config.window) {
    return InvalidArgument(p + "budget (" + Val(config.budget) + ") must be larger than the window (" +
                           Val(config.window) + "): the budget counts the window's slots");
  }
  if (config.interval < 1) {
    return InvalidArgument(p + "interval (" + Val(config.interval) + ") must be a positive number of tokens");
  }
  if (!(config.mix_lambda >= 0.f && config.mix_lambda <= 1.f)) {
    return InvalidArgument(p + "mix_lambda (" + std::to_string(config.mix_lambda) + ") must be in [0, 1]");
  }
  if (config.pool_kernel < 1 || config.pool_kernel % 2 == 0) {
    return InvalidArgument(p + "pool_kernel (" + Val(config.pool_kernel) + ") must be a positive odd number");
  }
  if (config.policy == "streaming") {
    if (config.streaming_sinks < 0 || config.streaming_sinks + config.window > config.budget) {
      return InvalidArgument(p + "streaming_sinks (" + Val(config.streaming_sinks) +
                             ") must be in [0, budget − window] = [0, " + Val(config.budget - config.window) +
                             "]");
    }
  }
  if (config.policy == "h2o_acc") {
    KvPolicyConfig c = config;
    ResolveH2oSplit(c);
    if (c.h2o_heavy < 1 || c.h2o_recent < 1 || c.h2o_heavy + c.h2o_recent != c.budget) {
      return InvalidArgument(p + "h2o_heavy (" + Val(config.h2o_heavy) + ") and h2o_recent (" +
                             Val(config.h2o_recent) + ") must be ≥ 1 and sum to the budget (" +
                             Val(config.budget) + "); use -1 for automatic (B/2 each)");
    }
  }
  return Status::Ok();
}

StatusOr<std::shared_ptr<const KvPolicy>> CreateKvPolicy(const KvPolicyConfig& config) {
  SKIPKV_RETURN_IF_ERROR(ValidateKvPolicyConfig(config));
  KvPolicyConfig c = config;
  if (c.policy == "h2o_acc") ResolveH2oSplit(c);
  return std::shared_ptr<const KvPolicy>(FindPolicy(c.policy)->make(c));
}

Status ValidatePadLens(const KvPolicyConfig& config, std::span<const int64_t> pad_lens) {
  SKIPKV_ASSIGN_OR_RETURN(auto policy, CreateKvPolicy(config));
  int64_t max_pad = 0;
  size_t max_row = 0;
  for (size_t r = 0; r < pad_lens.size(); ++r) {
    if (pad_lens[r] < 0) {
      return InvalidArgument("kv policy: row " + std::to_string(r) + " has a negative pad length (" +
                             Val(pad_lens[r]) + ")");
    }
    if (pad_lens[r] > max_pad) max_pad = pad_lens[r], max_row = r;
  }
  if (max_pad == 0) return Status::Ok();
  if (config.pad_policy == PadPolicy::kRagged) {
    return InvalidArgument("kv policy: ragged mode has no pad slots, but row " + std::to_string(max_row) +
                           " has Δpad = " + Val(max_pad) + " (use pad_policy padded)");
  }
  if (!policy->evicts()) return Status::Ok();
  if (max_pad > policy->max_pad_len()) {
    return InvalidArgument("kv policy '" + config.policy + "' (padded mode): row " + std::to_string(max_row) +
                           " has Δpad = " + Val(max_pad) + " pad slots, but budget " + Val(config.budget) +
                           " leaves room for at most " + Val(policy->max_pad_len()) +
                           " (budget − window must exceed the largest Δpad); raise the budget or group "
                           "prompts of similar length");
  }
  return Status::Ok();
}

int64_t CacheCapacity(const KvPolicyConfig& config, int64_t prompt_len) {
  if (config.policy == "full") return SequenceKvCache::kUnbounded;
  return std::max(prompt_len, config.budget + config.interval);
}

void ConfigureCacheShape(const KvPolicyConfig& config, KvCacheShape* shape) {
  shape->query_window = config.window;
  shape->track_attention = config.policy == "h2o_acc";
}

}  // namespace skipkv
