// The one description of a method's parameters (issue 15 item 3, in the
// spirit of gemma.cpp's ArgsBase::ForEach): every field of KvPolicyConfig
// and of SteeringConfig that a user can set is named ONCE below, with its
// key, its command-line flag, its help text and where it is accepted. The
// visitors that read this list are the only places that turn a parameter
// into something else:
//   - the CLI flags of `skipkv run`, `bench`, `eval` and `serve`, and their
//     --help (apps/skipkv/method_flags.h; defaults are the fields' initial
//     values, shown by CLI11);
//   - the refusal of a flag the chosen policy does not use (MethodUsesArg);
//   - `--set FIELD=VALUE` of eval / bench throughput and the JSON "kv" object
//     of `skipkv serve` (eval::MakePreset, through ParseArgValue);
//   - the provenance ("config") of `skipkv run --json` (ArgValueJson): every
//     declared field appears there under its key.
// Value checks (ranges, budget > window, ...) stay with the configurations
// (ValidateKvPolicyConfig, ValidateSteeringConfig), which every path calls.
//
// Adding a parameter: add the field to its struct, add one visitor line here
// (key, flag, help, where, scope); method_args_test and the CLI coupling test
// (tests/e2e/method_args_e2e_test.cpp) then require it in --help, in
// `run --json` and (with kArgSet) to parse back through --set.
#pragma once

#include <string>
#include <vector>

#include "skipkv/method.h"  // MethodConfig, KvPolicyConfig, SteeringConfig
#include "skipkv/status.h"

namespace skipkv {

// Where a parameter is accepted (bit set).
enum ArgWhere : unsigned {
  kArgRun = 1u << 0,    // a flag of `skipkv run`
  kArgBench = 1u << 1,  // a flag of `skipkv bench` (the forward-pass bench)
  kArgEval = 1u << 2,   // a flag of `skipkv eval` (shared by every preset of the sweep)
  kArgServe = 1u << 3,  // a flag of `skipkv serve` (the default method)
  kArgSet = 1u << 4,    // FIELD=VALUE of --set (eval, eval fidelity, bench throughput) and serve's "kv"
};

// Which methods use a parameter. A CLI flag or a scoped --set LABEL.FIELD
// for a method that does not use it is refused, except kEvicts fields given
// as flags: `full` ignores budget/window/interval so that one command line
// can loop over policies (BENCHMARKS.md does).
enum class ArgScope {
  kAny,             // every method
  kEvicts,          // policies that evict (KvPolicyEvicts)
  kMixLambda,       // rkv and skipkv (σ): the importance/redundancy mix
  kStreaming,       // streaming: attention sinks
  kH2oAcc,          // h2o_acc: heavy/recent split
  kSentences,       // policies that use sentences (KvPolicyUsesSentences: skipkv)
  kSteer,           // methods that steer
  kSteerFixed,      // SEAL's fixed strength (steering, not adaptive)
  kSteerAdaptive,   // SkipKV's adaptive strength (steering, adaptive)
};

struct ArgInfo {
  const char* key;   // --set FIELD, serve's "kv" field, the `run --json` config key
  const char* flag;  // the CLI flag ("--kv-window")
  const char* help;  // --help text (the default is appended by the CLI)
  unsigned where;    // ArgWhere bits
  ArgScope scope;
  // A bool shown as "--no-...": giving the flag sets the field to false.
  bool negated = false;
};

// The KV-policy parameters. Visitor: void(T& field, const ArgInfo& info) for
// T in {std::string, int, int64_t, float, bool, PadPolicy,
// std::vector<std::string>, std::vector<int>}.
template <class Visitor>
void ForEachKvArg(KvPolicyConfig& kv, Visitor&& v) {
  constexpr unsigned kRunBenchServe = kArgRun | kArgBench | kArgServe;
  constexpr unsigned kTuning = kArgRun | kArgBench | kArgSet;  // eval/serve tune through --set / "kv"
  v(kv.policy, ArgInfo{"policy", "--kv-policy",
                       "KV eviction policy: full, streaming, h2o (= h2o_rkv), h2o_rkv, h2o_acc, snapkv, rkv, skipkv",
                       kRunBenchServe, ArgScope::kAny});
  v(kv.budget, ArgInfo{"budget", "--kv-budget",
                       "B: slots kept per (layer, KV head) after a compression, window included (> --kv-window)",
                       kRunBenchServe, ArgScope::kEvicts});
  v(kv.window, ArgInfo{"window", "--kv-window", "alpha: observation window of queries and recent slots always kept",
                       kRunBenchServe | kArgSet, ArgScope::kEvicts});
  v(kv.interval, ArgInfo{"interval", "--kv-interval",
                         "Delta-t: compress when the processed length is a multiple of this (R-KV schedule)",
                         kRunBenchServe | kArgSet, ArgScope::kEvicts});
  v(kv.mix_lambda, ArgInfo{"mix_lambda", "--mix-lambda",
                           "rkv, skipkv (sigma): weight of importance vs redundancy, in [0, 1]", kTuning,
                           ArgScope::kMixLambda});
  v(kv.pool_kernel, ArgInfo{"pool_kernel", "--pool-kernel",
                            "Max-pool kernel over the importance scores (odd; 1 = off)", kTuning, ArgScope::kEvicts});
  v(kv.streaming_sinks, ArgInfo{"sinks", "--sinks", "streaming: first tokens always kept (attention sinks)", kTuning,
                                ArgScope::kStreaming});
  v(kv.h2o_heavy, ArgInfo{"h2o_heavy", "--h2o-heavy",
                          "h2o_acc: heavy-hitter slots (-1 = B - recent, or B/2 when neither is given)", kTuning,
                          ArgScope::kH2oAcc});
  v(kv.h2o_recent, ArgInfo{"h2o_recent", "--h2o-recent", "h2o_acc: recent slots (-1 = B - heavy, or B/2)", kTuning,
                           ArgScope::kH2oAcc});
  v(kv.skipkv.sim_threshold,
    ArgInfo{"sim_threshold", "--sim-threshold",
            "skipkv: tau, an earlier sentence whose similarity (PSS) with a later one exceeds it is redundant; in "
            "(0, 1]",
            kTuning, ArgScope::kSentences});
  v(kv.skipkv.min_sentence_tokens, ArgInfo{"min_sentence_tokens", "--min-sentence-tokens",
                                           "skipkv: shorter spans are not sentences (>= 1)", kTuning,
                                           ArgScope::kSentences});
  v(kv.skipkv.pss_include_prompt,
    ArgInfo{"pss_include_prompt", "--pss-include-prompt",
            "skipkv: prompt sentences take part in the PSS (may be evicted as redundant)", kTuning,
            ArgScope::kSentences});
  v(kv.skipkv.max_sentences, ArgInfo{"max_sentences", "--max-sentences",
                                     "skipkv: K, a new sentence is compared with at most the last K (>= 1)", kTuning,
                                     ArgScope::kSentences});
  v(kv.skipkv.delimiters, ArgInfo{"sentence_delimiters", "--sentence-delimiters",
                                  "skipkv: strings that end a sentence, comma-separated, escapes \\n \\t \\r \\\\ \\,",
                                  kTuning, ArgScope::kSentences});
  v(kv.skipkv.nonexec_keywords,
    ArgInfo{"nonexec_keywords", "--nonexec-keywords",
            "skipkv: keywords that make a sentence non-execution (N_o), comma-separated like the delimiters", kTuning,
            ArgScope::kSentences});
  v(kv.skipkv.range_min_slots,
    ArgInfo{"range_min_slots", "--range-min-slots",
            "skipkv: penalise a redundant sentence only when at least this many of its slots are cached (the "
            "authors' code: 2)",
            kTuning, ArgScope::kSentences});
  v(kv.skipkv.lambda_last,
    ArgInfo{"pss_lambda_last", "--pss-lambda-last",
            "skipkv: lambda of a redundant sentence = the PSS of its last qualifying pair, not the largest (the "
            "authors' code)",
            kTuning, ArgScope::kSentences});
  v(kv.skipkv.sentence_scoring,
    ArgInfo{"sentence_scoring", "--no-sentence-scoring",
            "skipkv: track sentences and T but apply no penalty (the R-KV ablation)", kTuning, ArgScope::kSentences,
            /*negated=*/true});
  v(kv.pad_policy, ArgInfo{"pad_policy", "--pad-policy",
                           "ragged (continuous batching, no padding) or padded (paper-faithful left-padded batches; "
                           "pads are kept and count against the budget)",
                           kArgRun | kArgEval, ArgScope::kAny});
  v(kv.pad_mask_seen_tokens,
    ArgInfo{"pad_mask_seen_tokens", "--pad-mask-seen-tokens",
            "padded: score with the authors' pad mask (the last N entries of the padding mask of all tokens seen; "
            "stops marking kept pads after the first eviction) instead of the slots' own flags",
            kTuning | kArgEval, ArgScope::kAny});
  v(kv.trace_path, ArgInfo{"trace", "--kv-trace",
                           "Write the kept positions of every compression (JSONL); with --json each result line also "
                           "carries stream_pieces (the text of every position) for `skipkv eval report --trace`",
                           kArgRun, ArgScope::kAny});
  v(kv.trace_layers, ArgInfo{"trace_layers", "--kv-trace-layers",
                             "Layers the trace records, comma-separated (default: all)", kArgRun, ArgScope::kAny});
}

// The steering parameters (docs/steering.md); same visitor, T in
// {std::string, int, float, bool, SteerCadence}. `enabled` and `adaptive`
// are not parameters: they follow from --steer and the method.
template <class Visitor>
void ForEachSteerArg(SteeringConfig& s, Visitor&& v) {
  constexpr unsigned kFlags = kArgRun | kArgEval | kArgServe;  // serve: the default vector
  v(s.file, ArgInfo{"steer_file", "--steer",
                    "Steering vector: a llama.cpp control-vector GGUF or a directory with SEAL's *_avg_vector.gguf "
                    "files (docs/steering.md)",
                    kFlags, ArgScope::kSteer});
  v(s.layer, ArgInfo{"steer_layer", "--steer-layer",
                     "Direction index l of the vector (llama.cpp/EasySteer numbering: added to the output of layer "
                     "l, the input of layer l+1)",
                     kFlags | kArgSet, ArgScope::kSteer});
  v(s.coef, ArgInfo{"steer_coef", "--steer-coef", "SEAL: fixed strength c (adds c*V)", kFlags | kArgSet,
                    ArgScope::kSteerFixed});
  v(s.alpha0, ArgInfo{"steer_alpha0", "--steer-alpha0", "SkipKV: alpha0 of alpha = alpha0 + gamma*N_o",
                      kFlags | kArgSet, ArgScope::kSteerAdaptive});
  v(s.gamma, ArgInfo{"steer_gamma", "--steer-gamma", "SkipKV: gamma of alpha = alpha0 + gamma*N_o", kFlags | kArgSet,
                     ArgScope::kSteerAdaptive});
  v(s.alpha_max, ArgInfo{"steer_alpha_max", "--steer-alpha-max", "SkipKV: clamp alpha (default: none)",
                         kFlags | kArgSet, ArgScope::kSteerAdaptive});
  v(s.cadence, ArgInfo{"steer_cadence", "--steer-cadence",
                       "SkipKV: update alpha at 'compression' steps (the authors' code) or at every 'sentence' close",
                       kFlags, ArgScope::kSteerAdaptive});
  v(s.assume_think, ArgInfo{"steer_assume_think", "--no-assume-think", "Steer only after a <think> token (spec A13)",
                            kFlags, ArgScope::kSteer, /*negated=*/true});
  v(s.authors_form, ArgInfo{"steer_authors_form", "--steer-authors-form",
                            "The vector is H_O - H_E (SEAL's / the SkipKV authors' form, used with a negative coef): "
                            "negate it, so alpha = -coef",
                            kFlags | kArgSet, ArgScope::kSteer});
}

// Both lists, KV first.
template <class Visitor>
void ForEachMethodArg(MethodConfig& m, Visitor&& v) {
  ForEachKvArg(m.kv, v);
  ForEachSteerArg(m.steer, v);
}

// True when `method` uses a parameter of `scope` (policy properties from the
// registry, not name compares, except the two policy-specific fields).
bool MethodUsesArg(ArgScope scope, const MethodConfig& method);
// "a policy that uses sentences (--kv-policy skipkv)", for error messages.
std::string ArgScopeDescription(ArgScope scope);

// Parses `text` into the field (FIELD=VALUE of --set, a value of serve's
// "kv"): integers (no fraction), finite numbers, true/false/1/0, the enum
// names (ragged/padded, compression/sentence), comma lists (delimiters with
// the escapes of ParseDelimiterList). Errors read "<key>=<text>: not a number"
// etc., naming the key and the value.
Status ParseArgValue(std::string& field, const ArgInfo& info, const std::string& text);
Status ParseArgValue(int& field, const ArgInfo& info, const std::string& text);
Status ParseArgValue(int64_t& field, const ArgInfo& info, const std::string& text);
Status ParseArgValue(float& field, const ArgInfo& info, const std::string& text);
Status ParseArgValue(bool& field, const ArgInfo& info, const std::string& text);
Status ParseArgValue(PadPolicy& field, const ArgInfo& info, const std::string& text);
Status ParseArgValue(SteerCadence& field, const ArgInfo& info, const std::string& text);
Status ParseArgValue(std::vector<std::string>& field, const ArgInfo& info, const std::string& text);
Status ParseArgValue(std::vector<int>& field, const ArgInfo& info, const std::string& text);

// The field as JSON text (numbers with 6 significant digits, an infinite
// alpha_max as null, strings quoted, lists as arrays).
std::string ArgValueJson(const std::string& v);
std::string ArgValueJson(int v);
std::string ArgValueJson(int64_t v);
std::string ArgValueJson(float v);
std::string ArgValueJson(bool v);
std::string ArgValueJson(PadPolicy v);
std::string ArgValueJson(SteerCadence v);
std::string ArgValueJson(const std::vector<std::string>& v);
std::string ArgValueJson(const std::vector<int>& v);

// Every declared parameter of `method` as one JSON object {key: value}, in
// declaration order (the `run --json` provenance).
std::string MethodArgsJson(const MethodConfig& method);

// "\n,.\n,)\n" -> {"\n", ".\n", ")\n"}: comma-separated, with the escapes \n,
// \t, \r, \\ and \, (a literal comma). Empty items and other escapes are an
// InvalidArgument naming the item.
StatusOr<std::vector<std::string>> ParseDelimiterList(const std::string& s);
// The inverse, for help texts: {"\n", ".\n"} -> "\n,.\n" (escaped).
std::string FormatDelimiterList(const std::vector<std::string>& items);

}  // namespace skipkv
