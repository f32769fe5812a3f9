// Named methods for sweeps (issue 11 item 3): each preset is a MethodConfig
// (skipkv/method.h) plus the sweep-side batch grouping of the paper's §4.3.
//   fullkv                  the full cache (runs once, budget 0)
//   streaming, h2o, snapkv  the baselines as R-KV implements them (spec §3.1)
//   rkv                     R-KV (λ = 0.1, α = 8, Δt = 128, kernel 7)
//   rkv+sentence            SkipKV's sentence-level redundancy scoring on R-KV
//                           (policy skipkv, τ = 0.95), without batch grouping
//   rkv+sentence+steering   rkv+sentence with SkipKV's adaptive steering
//                           (α = α0 + γ·N_o, spec §6.9); needs a vector
//   skipkv                  rkv+sentence+steering with batch grouping (prompts
//                           sorted by length before batching; matters in
//                           padded mode) — the paper's full SkipKV. Without a
//                           vector it runs without steering (the row's
//                           method_config then has no steer fields).
//   seal                    FullKV + SEAL steering: fixed strength α = coef on
//                           SPLIT tokens inside <think> (spec §4.2); needs a vector
// Table 2's rows are rkv, rkv+sentence, rkv+sentence+steering, skipkv.
// A method spec is PRESET or LABEL=PRESET (a second configuration of a preset
// under its own label, e.g. rkv-l07=rkv with --set rkv-l07.mix_lambda=0.07).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "skipkv/method.h"
#include "util/status.h"

namespace skipkv::eval {

struct MethodPreset {
  std::string preset;   // the preset it came from
  MethodConfig method;  // name = the label rows are keyed by
  bool grouping = false;
  bool full() const { return method.kv.policy == "full"; }
};

std::vector<std::string> KnownPresets();

// The preset for `spec` at `budget` (ignored for fullkv), with overrides
// applied: "FIELD=VALUE" applies to every method, "LABEL.FIELD=VALUE" to the
// method with that label. Fields: the method parameters declared with
// kArgSet in skipkv/method_args.h (window, interval, mix_lambda, ...,
// steer_layer, steer_coef for fixed strength, steer_alpha0/gamma/alpha_max
// for the adaptive one), parsed by ParseArgValue, plus the preset's grouping.
// An unknown preset, field or a bad value is an InvalidArgument naming it; a
// field the method does not use is refused when scoped (LABEL.FIELD) and
// skipped when shared.
// `vector` is the steering given on the command line (enabled = a --steer
// FILE was given; file, layer, coef, α0, γ, α_max, cadence, assume_think);
// the presets that steer copy it and set `adaptive` themselves, the others
// ignore it. A preset that needs a vector without one is an InvalidArgument.
// The result is validated (ValidateMethod; the vector file itself is loaded
// and checked against the model when the engine first runs the method).
StatusOr<MethodPreset> MakePreset(const std::string& spec, int64_t budget,
                                  const std::vector<std::string>& overrides,
                                  const SteeringConfig& vector = {});

// The provenance of a method as JSON (MethodJson plus preset and grouping).
std::string PresetJson(const MethodPreset& p);

}  // namespace skipkv::eval
