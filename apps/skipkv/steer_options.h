// The steering options shared by `run` and `bench` (docs/steering.md):
//   --steer PATH           control-vector GGUF, or a directory with SEAL's three category files
//   --steer-layer L        direction index (added at the input of layer L + 1)
//   --steer-coef c         SEAL: fixed strength (the default method `seal`; with
//                          --kv-policy skipkv it replaces the adaptive strength)
//   --steer-alpha0 / --steer-gamma / --steer-alpha-max / --steer-cadence
//                          SkipKV's adaptive strength α = min(α0 + γ·N_o, α_max)
//                          (--kv-policy skipkv only: N_o is its sentence count)
//   --no-steering          the ablation: the vector is ignored
//   --no-assume-think      without <think> in sight, do not steer (spec A13)
//   --method seal          FullKV + SEAL steering (needs --steer, --kv-policy full)
// Finish() turns them into the method's SteeringConfig and refuses options
// that would be silently ignored.
// `skipkv eval` adds the same options without --method and --no-steering
// (Add(app, false)) and takes the vector with Vector(): the eval presets
// decide per method whether it steers and with which strength.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "skipkv/method.h"
#include "skipkv/steering.h"
#include "util/status.h"

namespace skipkv::cli {

class SteerOptions {
 public:
  // run_options: also --no-steering and --method (run and bench).
  void Add(CLI::App& app, bool run_options = true) {
    file_ = app.add_option("--steer", cfg_.file,
                           "Steering vector: a llama.cpp control-vector GGUF or a directory with SEAL's "
                           "*_avg_vector.gguf files (docs/steering.md)");
    layer_ = app.add_option("--steer-layer", cfg_.layer,
                            "Direction index l of the vector (llama.cpp/EasySteer numbering: added to the output "
                            "of layer l, the input of layer l+1)")
                 ->capture_default_str();
    coef_ = app.add_option("--steer-coef", cfg_.coef, "SEAL: fixed strength c (adds c*V)")->capture_default_str();
    adaptive_.push_back(app.add_option("--steer-alpha0", cfg_.alpha0, "SkipKV: alpha0 of alpha = alpha0 + gamma*N_o")
                            ->capture_default_str());
    adaptive_.push_back(
        app.add_option("--steer-gamma", cfg_.gamma, "SkipKV: gamma of alpha = alpha0 + gamma*N_o")->capture_default_str());
    adaptive_.push_back(app.add_option("--steer-alpha-max", cfg_.alpha_max, "SkipKV: clamp alpha (default: none)"));
    adaptive_.push_back(app.add_option("--steer-cadence", cadence_,
                                       "SkipKV: update alpha at 'compression' steps (the authors' code) or at "
                                       "every 'sentence' close")
                            ->capture_default_str());
    no_assume_ = app.add_flag("--no-assume-think", no_assume_flag_, "Steer only after a <think> token (spec A13)");
    if (!run_options) return;
    no_steering_ = app.add_flag("--no-steering", no_steering_flag_, "Ignore --steer (ablation)");
    method_ = app.add_option("--method", method_name_, "Method preset: seal (FullKV + SEAL steering)");
  }

  // The vector and strengths as given (enabled = --steer FILE given; adaptive
  // left false: the caller decides). Options that need --steer without it
  // are refused.
  StatusOr<SteeringConfig> Vector() {
    if (file_->count() == 0) {
      for (CLI::Option* o : Extra()) {
        if (o->count()) return InvalidArgument(o->get_name() + " needs --steer FILE");
      }
      return SteeringConfig{};
    }
    SKIPKV_ASSIGN_OR_RETURN(cfg_.cadence, ParseSteerCadence(cadence_));
    cfg_.enabled = true;
    cfg_.assume_think = no_assume_->count() == 0;
    return cfg_;
  }

  // Fills method->steer (and, for --method seal, its name) from the options;
  // method->kv.policy must already be set.
  Status Finish(MethodConfig* method) {
    MethodConfig& m = *method;
    const bool given = file_->count() > 0;
    const bool skipkv = m.kv.policy == "skipkv";
    if (!method_name_.empty()) {
      if (method_name_ != "seal") return InvalidArgument("--method '" + method_name_ + "' (known: seal)");
      if (!given) return InvalidArgument("--method seal needs --steer FILE");
      if (m.kv.policy != "full") {
        return InvalidArgument("--method seal is FullKV + SEAL: drop --kv-policy " + m.kv.policy +
                               " (or use --kv-policy skipkv --steer FILE)");
      }
      m.name = "seal";
    }
    auto named = [](CLI::Option* o) { return o->get_name(); };
    if (!given) {
      for (CLI::Option* o : Extra()) {
        if (o->count()) return InvalidArgument(named(o) + " needs --steer FILE");
      }
      return Status::Ok();
    }
    if (no_steering_->count()) return Status::Ok();  // the ablation: steer stays disabled
    SKIPKV_ASSIGN_OR_RETURN(cfg_.cadence, ParseSteerCadence(cadence_));
    cfg_.enabled = true;
    cfg_.assume_think = no_assume_->count() == 0;
    cfg_.adaptive = skipkv && coef_->count() == 0;
    if (!cfg_.adaptive) {
      for (CLI::Option* o : adaptive_) {
        if (o->count()) {
          return InvalidArgument(named(o) + " is SkipKV's adaptive strength: it needs --kv-policy skipkv and no "
                                 "--steer-coef");
        }
      }
    }
    SKIPKV_RETURN_IF_ERROR(ValidateSteeringConfig(cfg_));
    m.steer = cfg_;
    return Status::Ok();
  }

 private:
  std::vector<CLI::Option*> Extra() const {
    std::vector<CLI::Option*> v = adaptive_;
    v.insert(v.end(), {layer_, coef_, no_assume_});
    if (no_steering_ != nullptr) v.push_back(no_steering_);  // run and bench only
    return v;
  }

  SteeringConfig cfg_;
  std::string cadence_ = "compression";
  std::string method_name_;
  bool no_steering_flag_ = false, no_assume_flag_ = false;
  CLI::Option *file_ = nullptr, *layer_ = nullptr, *coef_ = nullptr, *no_steering_ = nullptr, *no_assume_ = nullptr,
              *method_ = nullptr;
  std::vector<CLI::Option*> adaptive_;
};

}  // namespace skipkv::cli
