// Policy lookup and creation over the registry (kv/policies/registry.cpp),
// the shared eviction-config checks and the pad-length rule. See kv_policy.h.
#include "kv/kv_policy.h"

#include <algorithm>
#include <string>
#include <utility>

#include "io/model_limits.h"

namespace skipkv {
namespace {

const KvPolicyRegistration* FindPolicy(const std::string& name) {
  for (const auto& e : KvPolicyRegistry())
    if (name == e.name) return &e;
  return nullptr;
}

std::string KnownList() {
  std::string s;
  for (const auto& e : KvPolicyRegistry()) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

std::string ToStr(int64_t v) { return std::to_string(v); }

}  // namespace

bool KvPolicyReadsFields(const std::string& policy, unsigned bits) {
  const KvPolicyRegistration* e = FindPolicy(policy);
  return e != nullptr && (e->reads & bits) == bits;
}

std::vector<std::string> KnownKvPolicyNames() {
  std::vector<std::string> names;
  for (const auto& e : KvPolicyRegistry()) names.emplace_back(e.name);
  return names;
}

Status ValidateEvictionConfig(const KvPolicyConfig& config) {
  const std::string p = "kv policy '" + config.policy + "': ";
  if (config.window < 1) {
    return InvalidField("window", p + "window (" + ToStr(config.window) + ") must be at least 1");
  }
  // No slot count or interval may exceed the largest context a model may have.
  for (const auto& [name, v] : {std::pair<const char*, int64_t>{"budget", config.budget},
                                {"window", config.window}, {"interval", config.interval}}) {
    if (v > model_limits::kMaxContext) {
      return InvalidField(name, p + name + " (" + ToStr(v) + ") exceeds " + ToStr(model_limits::kMaxContext) +
                             ", the largest context length");
    }
  }
  if (config.budget <= config.window) {
    return InvalidField("budget", p + "budget (" + ToStr(config.budget) + ") must be larger than the window (" +
                           ToStr(config.window) + "): the budget counts the window's slots");
  }
  if (config.interval < 1) {
    return InvalidField("interval", p + "interval (" + ToStr(config.interval) + ") must be a positive number of tokens");
  }
  if (!(config.mix_lambda >= 0.f && config.mix_lambda <= 1.f)) {
    return InvalidField("mix_lambda", p + "mix_lambda (" + std::to_string(config.mix_lambda) + ") must be in [0, 1]");
  }
  if (config.pool_kernel < 1 || config.pool_kernel % 2 == 0) {
    return InvalidField("pool_kernel", p + "pool_kernel (" + ToStr(config.pool_kernel) + ") must be a positive odd number");
  }
  return Status::Ok();
}

StatusOr<std::shared_ptr<const KvPolicy>> CreateKvPolicy(const KvPolicyConfig& config) {
  const KvPolicyRegistration* entry = FindPolicy(config.policy);
  if (!entry) {
    return InvalidField("policy", "unknown KV policy '" + config.policy + "' (known: " + KnownList() + ")");
  }
  for (int layer : config.trace_layers) {
    if (layer < 0) {
      return InvalidField("trace_layers", "kv policy '" + config.policy + "': trace layer " + ToStr(layer) + " is negative");
    }
  }
  SKIPKV_ASSIGN_OR_RETURN(std::unique_ptr<KvPolicy> policy, entry->make(config));
  return std::shared_ptr<const KvPolicy>(std::move(policy));
}

Status ValidateKvPolicyConfig(const KvPolicyConfig& config) { return CreateKvPolicy(config).status(); }

bool KvPolicyEvicts(const KvPolicyConfig& config) {
  auto policy = CreateKvPolicy(config);
  return policy.ok() && (*policy)->evicts();
}

bool KvPolicyUsesSentences(const KvPolicyConfig& config) {
  KvPolicyConfig c = config;
  c.skipkv = SkipkvConfig{};
  auto policy = CreateKvPolicy(c);
  return policy.ok() && (*policy)->uses_sentences();
}

Status ValidatePadLens(const KvPolicyConfig& config, std::span<const int64_t> pad_lens) {
  SKIPKV_ASSIGN_OR_RETURN(auto policy, CreateKvPolicy(config));
  int64_t max_pad = 0;
  size_t max_row = 0;
  for (size_t r = 0; r < pad_lens.size(); ++r) {
    if (pad_lens[r] < 0) {
      return InvalidArgument("kv policy: row " + std::to_string(r) + " has a negative pad length (" +
                             ToStr(pad_lens[r]) + ")");
    }
    if (pad_lens[r] > max_pad) max_pad = pad_lens[r], max_row = r;
  }
  if (max_pad == 0) return Status::Ok();
  if (config.pad_policy == PadPolicy::kRagged) {
    return InvalidArgument("kv policy: ragged mode has no pad slots, but row " + std::to_string(max_row) +
                           " has Δpad = " + ToStr(max_pad) + " (use pad_policy padded)");
  }
  if (!policy->evicts()) return Status::Ok();
  if (max_pad > policy->max_pad_len()) {
    return InvalidArgument("kv policy '" + config.policy + "' (padded mode): row " + std::to_string(max_row) +
                           " has Δpad = " + ToStr(max_pad) + " pad slots, but budget " + ToStr(config.budget) +
                           " leaves room for at most " + ToStr(policy->max_pad_len()) +
                           " (budget − window must exceed the largest Δpad); raise the budget or group "
                           "prompts of similar length");
  }
  return Status::Ok();
}

int64_t KvPolicy::CacheCapacity(int64_t prompt_len) const {
  return std::max(prompt_len, config_.budget + config_.interval);
}

void KvPolicy::ConfigureCacheShape(KvCacheShape* shape) const {
  shape->query_window = config_.window;
  shape->track_attention = needs_attention_scores();
}

}  // namespace skipkv
