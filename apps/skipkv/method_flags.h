// The CLI flags of a method's parameters, generated from their one
// declaration (skipkv/method_args.h): `run`, `bench`, `eval` and `serve`
// each call Add() with their ArgWhere bit, so a parameter's flag, help text
// and default are written once for all of them.
//
// After parsing, FinishKv() converts the text-valued flags (--pad-policy,
// --sentence-delimiters) and refuses a KV flag the chosen policy does not
// use (except the eviction fields, which `full` ignores). The steering flags
// (run, eval) keep their cross-field rules in FinishSteer() / Vector():
//   --steer PATH needs to be given for any other steering flag;
//   --steer-coef = SEAL's fixed strength; without it, --kv-policy skipkv
//   steers with the adaptive strength (--steer-alpha0/-gamma/-alpha-max/
//   -cadence), which other policies refuse;
//   run only: --no-steering (the ablation) and --method PRESET (any preset of
//   the registry, skipkv/presets.h, with the flags given on top: FinishRun()).
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "skipkv/method_args.h"
#include "skipkv/presets.h"

namespace skipkv::cli {

class MethodFlags {
 public:
  // Adds the flags of the parameters accepted `where` (kArgRun, kArgBench,
  // kArgEval or kArgServe), writing into *method (which must outlive the
  // parse). `run_extras`: also --no-steering and --method (run).
  void Add(CLI::App& app, MethodConfig* method, ArgWhere where, bool run_extras = false) {
    method_ = method;
    ForEachKvArg(method->kv, [&](auto& field, const ArgInfo& info) {
      if (info.where & where) kv_.push_back(Bind(app, field, info));
    });
    ForEachSteerArg(method->steer, [&](auto& field, const ArgInfo& info) {
      if (info.where & where) steer_.push_back(Bind(app, field, info));
    });
    if (!run_extras) return;
    no_steering_ = app.add_flag("--no-steering", no_steering_flag_, "Ignore --steer (ablation)");
    std::string presets;
    for (const std::string& p : KnownPresets()) presets += (presets.empty() ? "" : ", ") + p;
    method_opt_ = app.add_option(
        "--method", method_name_,
        "Method preset, as eval's --methods: " + presets +
            ", or a preset of --presets FILE. It sets the policy and its settings (drop --kv-policy); "
            "--kv-budget and the other --kv-*, sentence and --steer-* flags given override them; a "
            "preset that steers (seal, "
            "rkv+sentence+steering) needs --steer FILE, skipkv and skipkv-authors steer when it is given. "
            "The sweep-side fields (grouping, prompt, max_length_counts_prompt) are eval's");
  }

  // After parsing: text-valued KV flags into their fields; a KV flag whose
  // field the policy does not use is an InvalidArgument naming the flag.
  Status FinishKv() {
    for (Flag& f : kv_) {
      if (f.opt->count() == 0) continue;
      if (f.info.scope != ArgScope::kEvicts && !MethodUsesArg(f.info.scope, *method_)) {
        return InvalidArgument(f.opt->get_name() + " applies to " + ArgScopeDescription(f.info.scope) +
                               " only; the policy is '" + method_->kv.policy + "'");
      }
      if (f.convert) {
        Status st = f.convert();
        if (!st.ok()) return InvalidArgument(f.opt->get_name() + ": " + st.message());
      }
    }
    return Status::Ok();
  }

  // eval: the vector and strengths as given (enabled = --steer FILE given;
  // adaptive left false: the presets decide). Flags that need --steer
  // without it are refused.
  StatusOr<SteeringConfig> Vector() {
    SKIPKV_RETURN_IF_ERROR(CheckNeedsFile());
    if (!FileGiven()) return SteeringConfig{};
    SKIPKV_RETURN_IF_ERROR(ConvertSteer());
    SteeringConfig s = method_->steer;
    s.enabled = true;
    return s;
  }

  // run: the method from the flags (FinishKv, FinishSteer), or with --method
  // PRESET the registry's preset (MakePreset, with the --steer vector) with
  // every flag given on top of it (FinishPreset); `context`: a --presets
  // file's presets (PresetFileFlag) and the model.
  // After FinishRun: a line for the user about the preset's values ("" when
  // none), e.g. that --method skipkv-authors found no row of the authors' τ table.
  const std::string& note() const { return note_; }

  Status FinishRun(const PresetContext& context = {}) {
    if (method_opt_ != nullptr && method_opt_->count() > 0) return FinishPreset(context);
    SKIPKV_RETURN_IF_ERROR(FinishKv());
    return FinishSteer();
  }

  // run: turns the steering flags into method->steer; method->kv.policy must
  // be final.
  Status FinishSteer() {
    MethodConfig& m = *method_;
    const bool given = FileGiven();
    SKIPKV_RETURN_IF_ERROR(CheckNeedsFile());
    if (!given || (no_steering_ != nullptr && no_steering_->count() > 0)) {
      m.steer.enabled = false;  // none given, or the ablation: steering stays off
      return Status::Ok();
    }
    SKIPKV_RETURN_IF_ERROR(ConvertSteer());
    m.steer.enabled = true;
    const Flag* coef = FindSteer(ArgScope::kSteerFixed);
    m.steer.adaptive = TraitsOf(m.kv).uses_sentences && (coef == nullptr || coef->opt->count() == 0);
    if (!m.steer.adaptive) {
      for (const Flag& f : steer_) {
        if (f.info.scope == ArgScope::kSteerAdaptive && f.opt->count() > 0) {
          return InvalidArgument(f.opt->get_name() +
                                 " is SkipKV's adaptive strength: it needs --kv-policy skipkv and no --steer-coef");
        }
      }
    }
    return ValidateSteeringConfig(m.steer);
  }

 private:
  struct Flag {
    ArgInfo info;
    CLI::Option* opt = nullptr;
    std::function<Status()> convert;  // text-valued flags: text -> field (after parsing)
  };

  // One flag for one field, by the field's type.
  template <class T>
  Flag Bind(CLI::App& app, T& field, const ArgInfo& info) {
    Flag f;
    f.info = info;
    if constexpr (std::is_same_v<T, bool>) {
      if (info.negated) {
        f.opt = app.add_flag_callback(info.flag, [&field] { field = false; }, info.help);
      } else {
        f.opt = app.add_flag(info.flag, field, info.help);
      }
    } else if constexpr (std::is_same_v<T, PadPolicy> || std::is_same_v<T, SteerCadence> ||
                         std::is_same_v<T, std::vector<std::string>>) {
      // Parsed after the command line (ParseArgValue), so the syntax and the
      // errors are those of --set.
      auto text = std::make_shared<std::string>();
      f.opt = app.add_option(info.flag, *text, info.help);
      std::string shown = ArgValueJson(field);
      if constexpr (std::is_same_v<T, std::vector<std::string>>) shown = FormatDelimiterList(field);
      if (shown.size() >= 2 && shown.front() == '"') shown = shown.substr(1, shown.size() - 2);
      f.opt->default_str(shown);
      f.convert = [&field, info, text] { return ParseArgValue(field, info, *text); };
      texts_.push_back(text);
    } else if constexpr (std::is_same_v<T, std::vector<int>>) {
      f.opt = app.add_option(info.flag, field, info.help)->delimiter(',');
    } else {
      f.opt = app.add_option(info.flag, field, info.help);
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isfinite(field)) f.opt->capture_default_str();  // alpha_max: "(default: none)" in the help
      } else if constexpr (!std::is_same_v<T, std::string>) {
        f.opt->capture_default_str();
      } else if (!field.empty()) {
        f.opt->capture_default_str();
      }
    }
    return f;
  }

  // --method PRESET: the preset at --kv-budget with the --steer vector
  // (MakePreset refuses a preset that needs one without it), then each flag
  // given copied over the preset's field; a flag the method does not use is
  // refused (the eviction fields excepted, as FinishKv). --no-steering
  // turns the preset's steering off at the end.
  Status FinishPreset(const PresetContext& context) {
    MethodConfig& m = *method_;
    const std::string who = "--method " + method_name_;
    for (const Flag& f : kv_) {
      if (std::string(f.info.key) == "policy" && f.opt->count() > 0)
        return InvalidArgument(who + " sets the KV policy: drop " + f.opt->get_name() + " " + m.kv.policy);
    }
    SKIPKV_RETURN_IF_ERROR(CheckNeedsFile());
    SteeringConfig vector;
    if (FileGiven()) {
      SKIPKV_RETURN_IF_ERROR(ConvertSteer());
      vector = m.steer;
      vector.enabled = true;
    }
    StatusOr<MethodPreset> preset = MakePreset(method_name_, m.kv.budget, {}, vector, context);
    if (!preset.ok()) return InvalidArgument(who + ": " + preset.status().message());
    MethodConfig& pm = preset->method;
    if (vector.enabled && !pm.steer.enabled)
      return InvalidArgument(who + " does not steer: drop --steer (the presets that steer: seal, "
                                   "rkv+sentence+steering, skipkv, skipkv-authors)");
    Status st = Status::Ok();
    for (std::vector<Flag>* flags : {&kv_, &steer_}) {
      for (Flag& f : *flags) {
        if (!st.ok() || f.opt->count() == 0) continue;
        if (f.info.scope != ArgScope::kEvicts && !MethodUsesArg(f.info.scope, pm)) {
          st = InvalidArgument(f.opt->get_name() + " applies to " + ArgScopeDescription(f.info.scope) +
                               " only; " + who + " is policy '" + pm.kv.policy + "'" +
                               (!pm.steer.enabled       ? ""
                                : pm.steer.adaptive ? " with adaptive steering"
                                                    : " with SEAL's fixed steering"));
        } else if (f.convert && flags == &kv_) {
          st = f.convert();  // text -> the field of *method_ (the steering ones: ConvertSteer above)
          if (!st.ok()) st = InvalidArgument(f.opt->get_name() + ": " + st.message());
        }
        if (st.ok()) CopyField(m, pm, f.info.key);
      }
    }
    SKIPKV_RETURN_IF_ERROR(st);
    if (preset->authors_table && preset->authors_run.empty() && !FlagGiven("sim_threshold"))
      note_ = who + ": no row of the authors' τ table (scripts/run.sh) is for this model and a dataset, so " +
              "τ = " + std::to_string(pm.kv.skipkv.sim_threshold).substr(0, 4) +
              " with their default steering strength; --sim-threshold sets τ";
    SKIPKV_RETURN_IF_ERROR(ValidateMethod(pm));
    if (no_steering_ != nullptr && no_steering_->count() > 0) pm.steer.enabled = false;  // the ablation
    m = pm;
    return Status::Ok();
  }

  // to.<key> = from.<key>, for the declared parameter `key`.
  static void CopyField(MethodConfig& from, MethodConfig& to, const char* key) {
    ForEachMethodArg(to, [&](auto& dst, const ArgInfo& info) {
      if (std::string(info.key) != key) return;
      ForEachMethodArg(from, [&](auto& src, const ArgInfo& si) {
        if constexpr (std::is_same_v<std::decay_t<decltype(src)>, std::decay_t<decltype(dst)>>) {
          if (std::string(si.key) == key) dst = src;
        }
      });
    });
  }

  bool FlagGiven(const char* key) const {
    for (const std::vector<Flag>* flags : {&kv_, &steer_})
      for (const Flag& f : *flags)
        if (std::string(f.info.key) == key) return f.opt->count() > 0;
    return false;
  }
  bool FileGiven() const {
    for (const Flag& f : steer_)
      if (std::string(f.info.key) == "steer_file") return f.opt->count() > 0;
    return false;
  }
  const Flag* FindSteer(ArgScope scope) const {
    for (const Flag& f : steer_)
      if (f.info.scope == scope) return &f;
    return nullptr;
  }
  // Every steering flag but --steer (and --no-steering) needs --steer FILE.
  Status CheckNeedsFile() const {
    if (FileGiven()) return Status::Ok();
    for (const Flag& f : steer_) {
      if (std::string(f.info.key) != "steer_file" && f.opt->count() > 0)
        return InvalidArgument(f.opt->get_name() + " needs --steer FILE");
    }
    if (no_steering_ != nullptr && no_steering_->count() > 0) return InvalidArgument("--no-steering needs --steer FILE");
    return Status::Ok();
  }
  Status ConvertSteer() {
    for (Flag& f : steer_) {
      if (f.opt->count() == 0 || !f.convert) continue;
      Status st = f.convert();
      if (!st.ok()) return InvalidArgument(f.opt->get_name() + ": " + st.message());
    }
    return Status::Ok();
  }

  MethodConfig* method_ = nullptr;
  std::vector<Flag> kv_, steer_;
  std::vector<std::shared_ptr<std::string>> texts_;
  CLI::Option *no_steering_ = nullptr, *method_opt_ = nullptr;
  std::string method_name_;
  std::string note_;
  bool no_steering_flag_ = false;
};

}  // namespace skipkv::cli
