// Reading and writing the declared method parameters (skipkv/method_args.h):
// which methods use a field, text -> field (--set, serve's "kv"), field ->
// JSON (provenance), and the sentence-delimiter list syntax.
#include "skipkv/method_args.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "kv/kv_policy.h"  // KvPolicyReadsFields, KvPolicyEvicts, KvPolicyUsesSentences

namespace skipkv {
namespace {

std::string Show(const ArgInfo& info, const std::string& text) { return std::string(info.key) + "=" + text; }

StatusOr<double> ParseNumber(const ArgInfo& info, const std::string& text) {
  char* end = nullptr;
  const double d = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || std::isnan(d))
    return InvalidField(info.key, Show(info, text) + ": not a number");
  return d;
}

StatusOr<int64_t> ParseInteger(const ArgInfo& info, const std::string& text, int64_t lo, int64_t hi) {
  SKIPKV_ASSIGN_OR_RETURN(double d, ParseNumber(info, text));
  if (!std::isfinite(d) || d != std::floor(d)) return InvalidField(info.key, Show(info, text) + ": not an integer");
  if (d < static_cast<double>(lo) || d > static_cast<double>(hi))
    return InvalidField(info.key, Show(info, text) + ": out of range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                           "]");
  return static_cast<int64_t>(d);
}

// JSON string literal of `s` (RFC 8259 escapes; bytes >= 0x80 pass through as UTF-8).
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

}  // namespace

bool MethodUsesArg(ArgScope scope, const MethodConfig& m) {
  const std::string& p = m.kv.policy;
  const SteeringConfig& s = m.steer;
  // Whether a field applies depends on the policy, not on the values being
  // set: a policy of the same name with default fields answers, so that an
  // invalid budget or window is reported as such, not as "no such field".
  KvPolicyConfig by_name;
  by_name.policy = p;
  switch (scope) {
    case ArgScope::kAny: return true;
    case ArgScope::kEvicts: return KvPolicyEvicts(by_name);
    // The two fields only some evicting policies read (their factories say
    // which; kv/policies/).
    case ArgScope::kMixLambda: return KvPolicyReadsFields(p, kReadsMixLambda);
    case ArgScope::kStreaming: return KvPolicyReadsFields(p, kReadsSinks);
    case ArgScope::kH2oAcc: return KvPolicyReadsFields(p, kReadsH2oSplit);
    case ArgScope::kSentences: return KvPolicyUsesSentences(by_name);
    case ArgScope::kSteer: return s.enabled;
    case ArgScope::kSteerFixed: return s.enabled && !s.adaptive;
    case ArgScope::kSteerAdaptive: return s.enabled && s.adaptive;
  }
  return false;
}

std::string ArgScopeDescription(ArgScope scope) {
  switch (scope) {
    case ArgScope::kAny: return "every method";
    case ArgScope::kEvicts: return "a policy that evicts (not full)";
    case ArgScope::kMixLambda: return "the policies rkv and skipkv";
    case ArgScope::kStreaming: return "the policy streaming";
    case ArgScope::kH2oAcc: return "the policy h2o_acc";
    case ArgScope::kSentences: return "a policy that uses sentences (--kv-policy skipkv)";
    case ArgScope::kSteer: return "a method that steers (--steer FILE)";
    case ArgScope::kSteerFixed: return "a method that steers with a fixed strength";
    case ArgScope::kSteerAdaptive: return "a method that steers with SkipKV's adaptive strength";
  }
  return "";
}

Status ParseArgValue(std::string& field, const ArgInfo&, const std::string& text) {
  field = text;
  return Status::Ok();
}

Status ParseArgValue(int& field, const ArgInfo& info, const std::string& text) {
  SKIPKV_ASSIGN_OR_RETURN(int64_t v, ParseInteger(info, text, std::numeric_limits<int>::min(),
                                                  std::numeric_limits<int>::max()));
  field = static_cast<int>(v);
  return Status::Ok();
}

Status ParseArgValue(int64_t& field, const ArgInfo& info, const std::string& text) {
  // ±2^53: every integer a double (and a JSON number) holds exactly.
  constexpr int64_t kExact = int64_t{1} << 53;
  SKIPKV_ASSIGN_OR_RETURN(field, ParseInteger(info, text, -kExact, kExact));
  return Status::Ok();
}

Status ParseArgValue(float& field, const ArgInfo& info, const std::string& text) {
  SKIPKV_ASSIGN_OR_RETURN(double v, ParseNumber(info, text));
  field = static_cast<float>(v);
  return Status::Ok();
}

Status ParseArgValue(bool& field, const ArgInfo& info, const std::string& text) {
  if (text == "true" || text == "1") {
    field = true;
  } else if (text == "false" || text == "0") {
    field = false;
  } else {
    return InvalidField(info.key, Show(info, text) + ": must be true or false");
  }
  return Status::Ok();
}

Status ParseArgValue(PadPolicy& field, const ArgInfo& info, const std::string& text) {
  if (text == "ragged") {
    field = PadPolicy::kRagged;
  } else if (text == "padded") {
    field = PadPolicy::kPadded;
  } else {
    return InvalidField(info.key, Show(info, text) + ": unknown pad policy '" + text + "' (expected ragged or padded)");
  }
  return Status::Ok();
}

Status ParseArgValue(SteerCadence& field, const ArgInfo& info, const std::string& text) {
  StatusOr<SteerCadence> c = ParseSteerCadence(text);
  if (!c.ok()) return InvalidField(info.key, Show(info, text) + ": " + c.status().message());
  field = *c;
  return Status::Ok();
}

Status ParseArgValue(std::vector<std::string>& field, const ArgInfo& info, const std::string& text) {
  StatusOr<std::vector<std::string>> items = ParseDelimiterList(text);
  if (!items.ok()) return InvalidField(info.key, std::string(info.key) + ": " + items.status().message());
  field = std::move(items).value();
  return Status::Ok();
}

Status ParseArgValue(std::vector<int>& field, const ArgInfo& info, const std::string& text) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    int v = 0;
    SKIPKV_RETURN_IF_ERROR(ParseArgValue(v, info, item));
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  field = std::move(out);
  return Status::Ok();
}

std::string ArgValueJson(const std::string& v) { return Quote(v); }
std::string ArgValueJson(int v) { return std::to_string(v); }
std::string ArgValueJson(int64_t v) { return std::to_string(v); }
std::string ArgValueJson(float v) {
  if (!std::isfinite(v)) return "null";  // alpha_max: no clamp
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", static_cast<double>(v));  // 0.1f -> 0.1
  return buf;
}
std::string ArgValueJson(bool v) { return v ? "true" : "false"; }
std::string ArgValueJson(PadPolicy v) { return Quote(v == PadPolicy::kPadded ? "padded" : "ragged"); }
std::string ArgValueJson(SteerCadence v) { return Quote(SteerCadenceName(v)); }
std::string ArgValueJson(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + Quote(v[i]);
  return out + "]";
}
std::string ArgValueJson(const std::vector<int>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}

std::string MethodArgsJson(const MethodConfig& method) {
  MethodConfig m = method;  // the visitor takes fields by reference
  std::string out = "{";
  ForEachMethodArg(m, [&](auto& value, const ArgInfo& info) {
    out += (out.size() > 1 ? "," : "") + Quote(info.key) + ":" + ArgValueJson(value);
  });
  return out + "}";
}

StatusOr<std::vector<std::string>> ParseDelimiterList(const std::string& s) {
  std::vector<std::string> out(1);
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == ',') {
      out.emplace_back();
    } else if (c == '\\') {
      if (i + 1 == s.size()) return InvalidArgument("'" + s + "' ends in a lone backslash");
      const char e = s[++i];
      switch (e) {
        case 'n': out.back() += '\n'; break;
        case 't': out.back() += '\t'; break;
        case 'r': out.back() += '\r'; break;
        case '\\': out.back() += '\\'; break;
        case ',': out.back() += ','; break;
        default:
          return InvalidArgument(std::string("unknown escape '\\") + e + "' in '" + s +
                                 "' (use \\n, \\t, \\r, \\\\ or \\,)");
      }
    } else {
      out.back() += c;
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].empty()) {
      return InvalidArgument("item " + std::to_string(i + 1) + " of '" + s + "' is empty (items are comma-separated)");
    }
  }
  return out;
}

std::string FormatDelimiterList(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    for (char c : items[i]) {
      if (c == '\n') out += "\\n";
      else if (c == '\t') out += "\\t";
      else if (c == '\r') out += "\\r";
      else if (c == '\\') out += "\\\\";
      else if (c == ',') out += "\\,";
      else out += c;
    }
  }
  return out;
}

}  // namespace skipkv
