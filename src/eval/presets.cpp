// The method presets of sweeps (eval/presets.h) and their --set overrides.
#include "eval/presets.h"

#include <cstdlib>

#include "skipkv/method_args.h"

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

// Applies FIELD=VALUE to the preset; `scoped` is true when the override names
// this method explicitly (then a field its method does not use is an error;
// shared, it is skipped). The fields are the declared method parameters with
// kArgSet (skipkv/method_args.h) plus the preset's own `grouping`.
Status Apply(MethodPreset& p, const std::string& field, const std::string& value, bool scoped) {
  if (field == "grouping") {
    Status st = ParseArgValue(p.grouping, ArgInfo{"grouping", "", "", kArgSet, ArgScope::kAny}, value);
    return st.ok() ? st : InvalidArgument("--set " + st.message());
  }
  bool found = false;
  Status result = Status::Ok();
  std::string known;
  ForEachMethodArg(p.method, [&](auto& target, const ArgInfo& info) {
    if (!(info.where & kArgSet)) return;
    known += (known.empty() ? "" : ", ") + std::string(info.key);
    if (field != info.key) return;
    found = true;
    if (!MethodUsesArg(info.scope, p.method)) {
      if (!scoped) return;
      const SteeringConfig& st = p.method.steer;
      const std::string who = "--set " + p.method.name + "." + field + ": method '" + p.method.name + "' ";
      if (field.rfind("steer_", 0) == 0) {
        result = InvalidArgument(who + "(preset " + p.preset + ") " +
                                 (!st.enabled   ? "does not steer"
                                  : st.adaptive ? "steers with the adaptive strength (steer_alpha0, steer_gamma, "
                                                  "steer_alpha_max)"
                                                : "steers with a fixed strength (steer_coef)"));
      } else {
        result = InvalidArgument(who + "(policy " + p.method.kv.policy + ") has no field '" + field + "'");
      }
      return;
    }
    Status st = ParseArgValue(target, info, value);
    if (!st.ok()) result = InvalidArgument("--set " + st.message());
  });
  if (!found) return InvalidArgument("--set: unknown field '" + field + "' (known: " + known + ", grouping)");
  return result;
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
