// The method registry (public API; implemented in src/methods/presets.cpp):
// every named method, as `eval`, `demo`, `bench`, `serve`'s "kv" object and
// the CLI look it up. Each preset is a MethodConfig (skipkv/method.h) plus
// the sweep-side batch grouping of the paper's §4.3; errors name the field
// at fault (Status::field(): "method", a parameter key, "steer_file").
//   fullkv                  the full cache (runs once, budget 0)
//   streaming, h2o, snapkv  the baselines as R-KV implements them (docs/spec.md §3.1)
//   rkv                     R-KV (λ = 0.1, α = 8, Δt = 128, kernel 7)
//   rkv+sentence            SkipKV's sentence-level redundancy scoring on R-KV
//                           (policy skipkv, τ = 0.95), without batch grouping
//   rkv+sentence+steering   rkv+sentence with SkipKV's adaptive steering
//                           (α = α0 + γ·N_o, docs/spec.md §6.9); needs a vector
//   skipkv                  rkv+sentence+steering with batch grouping (prompts
//                           sorted by length before batching; matters in
//                           padded mode) — the paper's full SkipKV. Without a
//                           vector it runs without steering (the row's
//                           method_config then has no steer fields).
//   seal                    FullKV + SEAL steering: fixed strength α = coef on
//                           SPLIT tokens inside <think> (docs/spec.md §4.2); needs a vector
//   fullkv-authors, rkv-authors, skipkv-authors
//                           the SkipKV authors' runs (GitHub TTTTTTris/SkipKV at
//                           4492840, scripts/run.sh): the preset plus the
//                           settings of their code where the project's
//                           defaults differ (issue 38; docs/kv-policies.md,
//                           "Parity with the authors' code"): batch grouping
//                           for all three, and --max-gen counting the prompt
//                           (max_length_counts_prompt), by default their
//                           dataset's total (max_length); the raw R-KV prompt
//                           for fullkv and rkv, the SEAL instruction in the
//                           chat template for skipkv (eval, without --prompt);
//                           for rkv and skipkv their pad mask; for skipkv τ
//                           from their table per (model, dataset, B)
//                           (AuthorsRuns; 0.95 elsewhere), prompt sentences
//                           in the PSS, 1-token sentences, "?\n\n" among the
//                           delimiters, the 3 bare keywords, ranges penalised
//                           from 2 cached slots, λ of the last pair, and
//                           steering α0 = −coef, γ = 0.02 when a vector is given.
// Table 2's rows are rkv, rkv+sentence, rkv+sentence+steering, skipkv.
// A method spec is PRESET or LABEL=PRESET (a second configuration of a preset
// under its own label, e.g. rkv-l07=rkv with --set rkv-l07.mix_lambda=0.07).
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "skipkv/method.h"
#include "skipkv/status.h"

namespace skipkv {

// The prompt a sweep sends (eval --prompt; the texts: src/eval/prompt.h):
// R-KV's instruction in the chat template (chat) or raw with BOS (raw), the
// SkipKV authors' SEAL instruction in the chat template (seal-chat), or the
// problem text alone (plain).
enum class PromptStyle { kChat, kRaw, kPlain, kSealChat };
// "chat" / "raw" / "plain" / "seal-chat"; another name is an InvalidArgument listing them.
StatusOr<PromptStyle> ParsePromptStyle(const std::string& s);
const char* PromptStyleName(PromptStyle s);

struct MethodPreset {
  std::string preset;   // the preset it came from
  MethodConfig method;  // name = the label rows are keyed by
  bool grouping = false;
  // Sweep side, like grouping (eval only; issue 38 rows 2 and 3):
  // `prompt`: the style of the preset's rows when the user gives no --prompt
  // (unset: the sweep's); `max_length_counts_prompt`: --max-gen bounds the
  // prompt plus the generated tokens, as the authors' generate(max_length);
  // `max_length`: the preset's --max-gen when none is given (0: the
  // sweep's; the *-authors presets: AuthorsMaxLength of the dataset).
  std::optional<PromptStyle> prompt;
  bool max_length_counts_prompt = false;
  int64_t max_length = 0;
  // The authors' run whose τ / steering strength an *-authors preset took
  // ("DeepSeek-R1-Distill-Qwen-7B/aime24/1536"); empty when none matched.
  std::string authors_run;
  // The preset takes τ and the steering strength from the authors' table
  // (skipkv-authors); with authors_run empty no row matched, and it runs
  // with the preset's own values (τ 0.95) unless the user sets them.
  bool authors_table = false;
  // The preset steers when a vector is given and runs unsteered otherwise
  // (skipkv, skipkv-authors): callers may say so when none was given.
  bool steers_if_given = false;
  // A preset from a preset file (--presets FILE): the built-in it extends
  // and the file it came from; both empty for a built-in preset.
  std::string base;
  std::string preset_file;
  bool full() const { return !TraitsOf(method).evicts; }  // keeps every slot (fullkv, seal, fullkv-authors)
};

// The registered preset names, in the registry's order (aliases not included).
std::vector<std::string> KnownPresets();

// The registered name of `name`: itself, or the preset an alias stands for
// ("full" -> "fullkv", the policy's name for the FullKV method); `name`
// unchanged when it is neither (MakePreset then reports it).
std::string CanonicalPresetName(const std::string& name);

// One SkipKV run of the authors' scripts/run.sh (all of them, commented-out
// lines included): τ (S_threshold) and the SEAL steering they used, for
// (model, dataset, B). coef is theirs (negative, on an H_O − H_E vector);
// layer is the decoder layer whose input they steer.
struct AuthorsRun {
  const char* model;    // Hugging Face name without the org, e.g. "DeepSeek-R1-Distill-Qwen-7B"
  const char* dataset;  // their data file: math (MATH-500), aime24, gsm8k
  int64_t budget;
  float tau;
  float coef;
  int layer;
};
std::span<const AuthorsRun> AuthorsRuns();

// The run for a model (a path or name that contains the run's model name,
// case-insensitively; the longest match wins), a dataset (math500 or math,
// aime24, gsm8k) and a budget; nullptr if the authors have none.
const AuthorsRun* FindAuthorsRun(const std::string& model, const std::string& dataset, int64_t budget);

// Their generate(max_length) per dataset (run_math.py's dataset2max_length:
// math500 or math 8192, aime24 16384, gsm8k 8192); 0 for another dataset.
int64_t AuthorsMaxLength(const std::string& dataset);

// A preset defined in a preset file (`--presets FILE`, written by `skipkv
// calibrate`; format in docs/calibration.md): a built-in `base` preset plus
// FIELD=VALUE `settings` (the --set fields, unscoped), applied after the
// base's own settings and before the user's --set. A setting whose field the
// base method does not use is an error, except the steering strength
// (steer_*) of a preset that runs unsteered without a vector.
struct PresetFileEntry {
  std::string name;  // [A-Za-z0-9+_-]+, not a built-in name or alias
  std::string base;  // a built-in preset (file presets do not chain)
  std::vector<std::string> settings;
  std::string description;      // one line
  std::string provenance_json;  // a JSON object (how the values were chosen), "{}" if none
  std::string source;           // the file it was read from (for messages and provenance)
};

// Parses a preset file's text (`source` names it in errors: "FILE: field
// 'presets[1].base': ..."); every entry is checked as ValidatePresetFileEntry
// does. LoadPresetFile reads the file first (NotFound naming it).
StatusOr<std::vector<PresetFileEntry>> ParsePresetFile(const std::string& text, const std::string& source);
StatusOr<std::vector<PresetFileEntry>> LoadPresetFile(const std::string& path);
// The file's JSON for `entries` (what ParsePresetFile reads back).
std::string PresetFileJson(std::span<const PresetFileEntry> entries);
// The base exists and every setting applies to it (values parsed and the
// method validated, steering fields included).
Status ValidatePresetFileEntry(const PresetFileEntry& entry);

// What a sweep knows about its runs, for the *-authors presets' table, and
// the presets a preset file adds.
struct PresetContext {
  std::string model;    // path or name
  std::string dataset;  // dataset name
  std::span<const PresetFileEntry> file_presets = {};
};

// The preset for `spec` at `budget` (ignored for fullkv), with overrides
// applied: "FIELD=VALUE" applies to every method, "LABEL.FIELD=VALUE" to the
// method with that label. Fields: the method parameters declared with
// kArgSet in skipkv/method_args.h (window, interval, mix_lambda, ...,
// steer_layer, steer_coef for fixed strength, steer_alpha0/gamma/alpha_max
// for the adaptive one), parsed by ParseArgValue, plus the preset's grouping,
// prompt (a PromptStyle name), max_length and max_length_counts_prompt.
// An unknown preset, field or a bad value is an InvalidArgument naming it; a
// field the method does not use is refused when scoped (LABEL.FIELD) and
// skipped when shared.
// `vector` is the steering given on the command line (enabled = a --steer
// FILE was given; file, layer, coef, α0, γ, α_max, cadence, assume_think);
// the presets that steer copy it and set `adaptive` themselves, the others
// ignore it. A preset that needs a vector without one is an InvalidArgument.
// The result is validated (ValidateMethod; the vector file itself is loaded
// and checked against the model when the engine first runs the method).
// `context`: the model and dataset for the *-authors presets' table, and the
// presets of a preset file (looked up after the built-ins).
StatusOr<MethodPreset> MakePreset(const std::string& spec, int64_t budget,
                                  const std::vector<std::string>& overrides,
                                  const SteeringConfig& vector = {}, const PresetContext& context = {});

// The provenance of a method as JSON (MethodJson plus preset and grouping).
std::string PresetJson(const MethodPreset& p);

}  // namespace skipkv
