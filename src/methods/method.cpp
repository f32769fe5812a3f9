// Method labels, validation and provenance (see skipkv/method.h).
#include "skipkv/method.h"
#include "skipkv/method_args.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

#include "kv/kv_policy.h"  // KvPolicyEvicts, KvPolicyUsesSentences

namespace skipkv {
namespace {

std::string Num(int64_t v) { return std::to_string(v); }
// Floats with 6 significant digits: 0.1f prints as 0.1, not 0.100000001.
std::string Num(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", static_cast<double>(v));
  return buf;
}

// JSON string literal: ArgValueJson (skipkv/method_args.h), the provenance's one quoting rule.
std::string Quote(const std::string& s) { return ArgValueJson(s); }

// Fields whose value is JSON text already (numbers, booleans, arrays).
bool IsBare(const std::string& name) {
  return name != "name" && name != "policy" && name != "pad_policy" && name != "steer.file" &&
         name != "steer.mode" && name != "steer.cadence";
}

// The steering fields (when enabled): file, layer, mode and its strength.
void AddSteerFields(const SteeringConfig& s, std::vector<std::pair<std::string, std::string>>* f) {
  if (!s.enabled) return;
  f->push_back({"steer.file", s.file});
  f->push_back({"steer.layer", Num(int64_t{s.layer})});
  f->push_back({"steer.mode", s.adaptive ? "adaptive" : "fixed"});
  if (s.adaptive) {
    f->push_back({"steer.alpha0", Num(s.alpha0)});
    f->push_back({"steer.gamma", Num(s.gamma)});
    if (std::isfinite(s.alpha_max)) f->push_back({"steer.alpha_max", Num(s.alpha_max)});
    f->push_back({"steer.cadence", SteerCadenceName(s.cadence)});
  } else {
    f->push_back({"steer.coef", Num(s.coef)});
  }
  f->push_back({"steer.assume_think", s.assume_think ? "true" : "false"});
  if (s.authors_form) f->push_back({"steer.authors_form", "true"});  // only when set (issue 38)
}

}  // namespace

std::string MethodLabel(const MethodConfig& m) { return m.name.empty() ? m.kv.policy : m.name; }

Status ValidateMethod(const MethodConfig& m) {
  Status st = ValidateKvPolicyConfig(m.kv);
  if (st.ok()) st = ValidateSteeringConfig(m.steer);
  if (st.ok() && m.steer.enabled && m.steer.adaptive && !KvPolicyUsesSentences(m.kv)) {
    st = InvalidField("policy", "steering: the adaptive strength needs N_o, which only a policy that tracks sentences "
                         "(skipkv) has; policy '" + m.kv.policy + "' can steer with a fixed coef");
  }
  if (!st.ok()) return st.WithContext("method '" + MethodLabel(m) + "'");
  return Status::Ok();
}

std::vector<std::pair<std::string, std::string>> MethodFields(const MethodConfig& m) {
  const KvPolicyConfig& kv = m.kv;
  std::vector<std::pair<std::string, std::string>> f = {
      {"name", MethodLabel(m)},
      {"policy", kv.policy},
      {"pad_policy", kv.pad_policy == PadPolicy::kPadded ? "padded" : "ragged"},
  };
  // Fields by policy property: the eviction fields when it evicts, the
  // sentence fields when it uses sentences (every field of an invalid config).
  const bool valid = ValidateKvPolicyConfig(kv).ok();
  if (valid && !KvPolicyEvicts(kv)) {
    AddSteerFields(m.steer, &f);
    return f;
  }
  f.push_back({"budget", Num(kv.budget)});
  f.push_back({"window", Num(int64_t{kv.window})});
  f.push_back({"interval", Num(kv.interval)});
  f.push_back({"mix_lambda", Num(kv.mix_lambda)});
  f.push_back({"pool_kernel", Num(int64_t{kv.pool_kernel})});
  f.push_back({"h2o_heavy", Num(kv.h2o_heavy)});
  f.push_back({"h2o_recent", Num(kv.h2o_recent)});
  f.push_back({"streaming_sinks", Num(int64_t{kv.streaming_sinks})});
  // Parity switches (issue 38): listed only when set, so that the
  // provenance of the project's defaults stays as it was.
  if (kv.pad_mask_seen_tokens) f.push_back({"pad_mask_seen_tokens", "true"});
  if (!valid || KvPolicyUsesSentences(kv)) {
    const SkipkvConfig& s = kv.skipkv;
    f.push_back({"skipkv.sim_threshold", Num(s.sim_threshold)});
    f.push_back({"skipkv.min_sentence_tokens", Num(int64_t{s.min_sentence_tokens})});
    f.push_back({"skipkv.pss_include_prompt", s.pss_include_prompt ? "true" : "false"});
    f.push_back({"skipkv.max_sentences", Num(s.max_sentences)});
    std::string delims = "[";
    for (size_t i = 0; i < s.delimiters.size(); ++i) delims += (i ? "," : "") + Quote(s.delimiters[i]);
    f.push_back({"skipkv.delimiters", delims + "]"});
    f.push_back({"skipkv.sentence_scoring", s.sentence_scoring ? "true" : "false"});
    if (s.nonexec_keywords != DefaultNonExecKeywords()) {
      std::string words = "[";
      for (size_t i = 0; i < s.nonexec_keywords.size(); ++i)
        words += (i ? "," : "") + Quote(s.nonexec_keywords[i]);
      f.push_back({"skipkv.nonexec_keywords", words + "]"});
    }
    if (s.range_min_slots != 1) f.push_back({"skipkv.range_min_slots", Num(int64_t{s.range_min_slots})});
    if (s.lambda_last) f.push_back({"skipkv.pss_lambda_last", "true"});
  }
  AddSteerFields(m.steer, &f);
  return f;
}

std::string MethodJson(const MethodConfig& m) {
  std::string out = "{";
  bool first = true;
  for (const auto& [name, value] : MethodFields(m)) {
    out += (first ? "" : ",") + Quote(name) + ":" + (IsBare(name) ? value : Quote(value));
    first = false;
  }
  return out + "}";
}

MethodTraits TraitsOf(const KvPolicyConfig& kv) {
  // The policy of that name with default fields answers, so an invalid
  // budget or τ does not hide what the policy is.
  KvPolicyConfig by_name;
  by_name.policy = kv.policy;
  MethodTraits t;
  t.evicts = KvPolicyEvicts(by_name);
  t.uses_sentences = KvPolicyUsesSentences(by_name);
  return t;
}

MethodTraits TraitsOf(const MethodConfig& method) {
  MethodTraits t = TraitsOf(method.kv);
  t.steers = method.steer.enabled;
  t.adaptive_steering = method.steer.enabled && method.steer.adaptive;
  return t;
}

}  // namespace skipkv
