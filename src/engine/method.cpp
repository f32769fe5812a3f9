// Method labels, validation and provenance (see skipkv/method.h).
#include "skipkv/method.h"

#include <cstdint>
#include <cstdio>

namespace skipkv {
namespace {

std::string Num(int64_t v) { return std::to_string(v); }
// Floats with 6 significant digits: 0.1f prints as 0.1, not 0.100000001.
std::string Num(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", static_cast<double>(v));
  return buf;
}

// JSON string literal of `s` (RFC 8259 escapes; bytes ≥ 0x80 pass through as UTF-8).
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// Fields whose value is JSON text already (numbers, booleans, arrays).
bool IsBare(const std::string& name) {
  return name != "name" && name != "policy" && name != "pad_policy";
}

}  // namespace

std::string MethodLabel(const MethodConfig& m) { return m.name.empty() ? m.kv.policy : m.name; }

Status ValidateMethod(const MethodConfig& m) {
  Status st = ValidateKvPolicyConfig(m.kv);
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
  if (valid && !KvPolicyEvicts(kv)) return f;
  f.push_back({"budget", Num(kv.budget)});
  f.push_back({"window", Num(int64_t{kv.window})});
  f.push_back({"interval", Num(kv.interval)});
  f.push_back({"mix_lambda", Num(kv.mix_lambda)});
  f.push_back({"pool_kernel", Num(int64_t{kv.pool_kernel})});
  f.push_back({"h2o_heavy", Num(kv.h2o_heavy)});
  f.push_back({"h2o_recent", Num(kv.h2o_recent)});
  f.push_back({"streaming_sinks", Num(int64_t{kv.streaming_sinks})});
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
  }
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

}  // namespace skipkv
