#include "eval/presets.h"

#include <cstdlib>

namespace skipkv::eval {
namespace {

// How a preset steers (spec §4.2 SEAL, §6.9 SkipKV).
enum class Steer {
  kNone,      // never, even when --steer is given
  kFixed,     // SEAL: α = coef; needs a vector
  kAdaptive,  // SkipKV: α = α0 + γ·N_o; needs a vector
  kIfGiven,   // SkipKV: adaptive when a vector is given, otherwise no steering
};

struct PresetDef {
  const char* name;
  const char* policy;
  bool sentence_scoring;
  bool grouping;
  Steer steer;
};

// Table 2 of the paper is cumulative: rkv -> rkv+sentence ->
// rkv+sentence+steering -> skipkv (+grouping).
constexpr PresetDef kPresets[] = {
    {"fullkv", "full", false, false, Steer::kNone},
    {"streaming", "streaming", false, false, Steer::kNone},
    {"h2o", "h2o", false, false, Steer::kNone},
    {"snapkv", "snapkv", false, false, Steer::kNone},
    {"rkv", "rkv", false, false, Steer::kNone},
    {"rkv+sentence", "skipkv", true, false, Steer::kNone},
    {"rkv+sentence+steering", "skipkv", true, false, Steer::kAdaptive},
    {"skipkv", "skipkv", true, true, Steer::kIfGiven},
    {"seal", "full", false, false, Steer::kFixed},
};

StatusOr<double> ParseNumber(const std::string& field, const std::string& v) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size())
    return InvalidArgument("--set " + field + "=" + v + ": not a number");
  return d;
}

StatusOr<bool> ParseBool(const std::string& field, const std::string& v) {
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  return InvalidArgument("--set " + field + "=" + v + ": must be true or false");
}

StatusOr<int64_t> ParseInt(const std::string& field, const std::string& v) {
  SKIPKV_ASSIGN_OR_RETURN(double d, ParseNumber(field, v));
  if (d != static_cast<double>(static_cast<int64_t>(d)))
    return InvalidArgument("--set " + field + "=" + v + ": not an integer");
  return static_cast<int64_t>(d);
}

// Applies FIELD=VALUE to the preset; `scoped` is true when the override names
// this method explicitly (then a field its policy does not use is an error).
Status Apply(MethodPreset& p, const std::string& field, const std::string& value, bool scoped) {
  KvPolicyConfig& kv = p.method.kv;
  const std::string& pol = kv.policy;
  auto unused = [&]() -> Status {
    if (!scoped) return Status::Ok();
    return InvalidArgument("--set " + p.method.name + "." + field + ": method '" + p.method.name +
                           "' (policy " + pol + ") has no field '" + field + "'");
  };
  if (field == "grouping") {
    SKIPKV_ASSIGN_OR_RETURN(p.grouping, ParseBool(field, value));
    return Status::Ok();
  }
  if (field.rfind("steer_", 0) == 0) {
    SteeringConfig& st = p.method.steer;
    const bool fixed_field = field == "steer_coef";
    const bool adaptive_field =
        field == "steer_alpha0" || field == "steer_gamma" || field == "steer_alpha_max";
    if (!fixed_field && !adaptive_field && field != "steer_layer") {
      return InvalidArgument("--set: unknown field '" + field +
                             "' (steering fields: steer_layer, steer_coef, steer_alpha0, steer_gamma, "
                             "steer_alpha_max)");
    }
    if (!st.enabled || (fixed_field && st.adaptive) || (adaptive_field && !st.adaptive)) {
      if (!scoped) return Status::Ok();
      return InvalidArgument("--set " + p.method.name + "." + field + ": method '" + p.method.name +
                             "' (preset " + p.preset + ") " +
                             (!st.enabled   ? "does not steer"
                              : st.adaptive ? "steers with the adaptive strength (steer_alpha0, steer_gamma, "
                                              "steer_alpha_max)"
                                            : "steers with a fixed strength (steer_coef)"));
    }
    if (field == "steer_layer") {
      SKIPKV_ASSIGN_OR_RETURN(int64_t v, ParseInt(field, value));
      if (v < 0 || v > 100000) return InvalidArgument("--set " + field + "=" + value + ": must be >= 0");
      st.layer = static_cast<int>(v);
      return Status::Ok();
    }
    SKIPKV_ASSIGN_OR_RETURN(double v, ParseNumber(field, value));
    (field == "steer_coef"     ? st.coef
     : field == "steer_alpha0" ? st.alpha0
     : field == "steer_gamma"  ? st.gamma
                               : st.alpha_max) = static_cast<float>(v);
    return Status::Ok();
  }
  if (pol == "full") return unused();
  if (field == "window") {
    SKIPKV_ASSIGN_OR_RETURN(int64_t v, ParseInt(field, value));
    kv.window = static_cast<int>(v);
  } else if (field == "interval") {
    SKIPKV_ASSIGN_OR_RETURN(kv.interval, ParseInt(field, value));
  } else if (field == "pool_kernel") {
    SKIPKV_ASSIGN_OR_RETURN(int64_t v, ParseInt(field, value));
    kv.pool_kernel = static_cast<int>(v);
  } else if (field == "mix_lambda") {
    if (pol != "rkv" && pol != "skipkv") return unused();
    SKIPKV_ASSIGN_OR_RETURN(double v, ParseNumber(field, value));
    kv.mix_lambda = static_cast<float>(v);
  } else if (field == "sinks") {
    if (pol != "streaming") return unused();
    SKIPKV_ASSIGN_OR_RETURN(int64_t v, ParseInt(field, value));
    kv.streaming_sinks = static_cast<int>(v);
  } else if (field == "h2o_heavy" || field == "h2o_recent") {
    if (pol != "h2o_acc") return unused();
    SKIPKV_ASSIGN_OR_RETURN(int64_t v, ParseInt(field, value));
    (field == "h2o_heavy" ? kv.h2o_heavy : kv.h2o_recent) = v;
  } else if (field == "sim_threshold" || field == "min_sentence_tokens" || field == "pss_include_prompt" ||
             field == "max_sentences" || field == "sentence_scoring") {
    if (pol != "skipkv") return unused();
    SkipkvConfig& s = kv.skipkv;
    if (field == "sim_threshold") {
      SKIPKV_ASSIGN_OR_RETURN(double v, ParseNumber(field, value));
      s.sim_threshold = static_cast<float>(v);
    } else if (field == "min_sentence_tokens") {
      SKIPKV_ASSIGN_OR_RETURN(int64_t v, ParseInt(field, value));
      s.min_sentence_tokens = static_cast<int>(v);
    } else if (field == "pss_include_prompt") {
      SKIPKV_ASSIGN_OR_RETURN(s.pss_include_prompt, ParseBool(field, value));
    } else if (field == "max_sentences") {
      SKIPKV_ASSIGN_OR_RETURN(s.max_sentences, ParseInt(field, value));
    } else {
      SKIPKV_ASSIGN_OR_RETURN(s.sentence_scoring, ParseBool(field, value));
    }
  } else {
    return InvalidArgument(
        "--set: unknown field '" + field +
        "' (known: window, interval, mix_lambda, pool_kernel, sinks, h2o_heavy, h2o_recent, "
        "sim_threshold, min_sentence_tokens, pss_include_prompt, max_sentences, "
        "sentence_scoring, grouping, steer_layer, steer_coef, steer_alpha0, steer_gamma, steer_alpha_max)");
  }
  return Status::Ok();
}

}  // namespace

std::vector<std::string> KnownPresets() {
  std::vector<std::string> v;
  for (const auto& p : kPresets) v.emplace_back(p.name);
  return v;
}

StatusOr<MethodPreset> MakePreset(const std::string& spec, int64_t budget,
                                  const std::vector<std::string>& overrides, const SteeringConfig& vector) {
  std::string label = spec, preset = spec;
  if (const size_t eq = spec.find('='); eq != std::string::npos) {
    label = spec.substr(0, eq);
    preset = spec.substr(eq + 1);
    if (label.empty() || label.find_first_of(".,= ") != std::string::npos)
      return InvalidArgument("method '" + spec +
                             "': the label before '=' must be non-empty without . , = or spaces");
  }
  const PresetDef* def = nullptr;
  for (const auto& p : kPresets)
    if (preset == p.name) def = &p;
  if (def == nullptr) {
    std::string known;
    for (const auto& n : KnownPresets()) known += (known.empty() ? "" : ", ") + n;
    const bool steering = preset == "+steering" || preset == "rkv+steering" || preset == "steering";
    return InvalidArgument("unknown method '" + preset + "' (known: " + known + ")" +
                           (steering ? "; Table 2's +steering row is rkv+sentence+steering" : ""));
  }
  if (vector.enabled && vector.file.empty())
    return InvalidArgument("steering vector: enabled without a file");
  MethodPreset p;
  p.preset = def->name;
  p.method.name = label;
  p.method.kv.policy = def->policy;
  p.grouping = def->grouping;
  if (std::string(def->policy) != "full") p.method.kv.budget = budget;
  if (std::string(def->policy) == "skipkv") p.method.kv.skipkv.sentence_scoring = def->sentence_scoring;
  if (def->steer == Steer::kFixed || def->steer == Steer::kAdaptive) {
    if (!vector.enabled) {
      return InvalidArgument(
          "method '" + label + "' (preset " + def->name +
          ") steers: give a steering vector with --steer FILE (a control-vector GGUF, e.g. "
          "from skipkv steer-extract, or a directory with SEAL's category files) and "
          "--steer-layer L");
    }
  }
  if (def->steer != Steer::kNone && vector.enabled) {
    p.method.steer = vector;
    p.method.steer.adaptive = def->steer != Steer::kFixed;
  }
  for (const std::string& o : overrides) {
    const size_t eq = o.find('=');
    if (eq == std::string::npos || eq == 0)
      return InvalidArgument("--set '" + o + "' must be FIELD=VALUE or METHOD.FIELD=VALUE");
    std::string field = o.substr(0, eq);
    const std::string value = o.substr(eq + 1);
    bool scoped = false;
    if (const size_t dot = field.rfind('.'); dot != std::string::npos) {
      if (field.substr(0, dot) != label) continue;  // another method's override
      field = field.substr(dot + 1);
      scoped = true;
    }
    SKIPKV_RETURN_IF_ERROR(Apply(p, field, value, scoped));
  }
  SKIPKV_RETURN_IF_ERROR(ValidateMethod(p.method));
  return p;
}

std::string PresetJson(const MethodPreset& p) {
  std::string m = MethodJson(p.method);  // "{...}"
  m.pop_back();
  return m + ",\"preset\":\"" + p.preset + "\",\"grouping\":" + (p.grouping ? "true" : "false") + "}";
}

}  // namespace skipkv::eval
