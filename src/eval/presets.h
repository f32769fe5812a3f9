// Named methods for sweeps (issue 11 item 3): each preset is a MethodConfig
// (skipkv/method.h) plus the sweep-side batch grouping of the paper's §4.3.
//   fullkv                  the full cache (runs once, budget 0)
//   streaming, h2o, snapkv  the baselines as R-KV implements them (spec §3.1)
//   rkv                     R-KV (λ = 0.1, α = 8, Δt = 128, kernel 7)
//   rkv+sentence            SkipKV's sentence-level redundancy scoring on R-KV
//                           (policy skipkv, τ = 0.95), without batch grouping
//   skipkv                  rkv+sentence with batch grouping (prompts sorted by
//                           length before batching; matters in padded mode).
//                           Steering (the paper's full SkipKV) and the presets
//                           `seal` and `+steering` come with the steering issue.
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
// method with that label. Fields: window, interval, mix_lambda, pool_kernel,
// sinks, h2o_heavy, h2o_recent, sim_threshold, min_sentence_tokens,
// pss_include_prompt, max_sentences, sentence_scoring, grouping. An unknown
// preset, field or a bad value is an InvalidArgument naming it; a field the
// method's policy does not use is refused (fullkv ignores the shared ones).
// The result is validated (ValidateMethod).
StatusOr<MethodPreset> MakePreset(const std::string& spec, int64_t budget,
                                  const std::vector<std::string>& overrides);

// The provenance of a method as JSON (MethodJson plus preset and grouping).
std::string PresetJson(const MethodPreset& p);

}  // namespace skipkv::eval
