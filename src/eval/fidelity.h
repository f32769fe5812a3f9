// Fidelity without a reasoning model (issue 12 item 4): teacher-forced over
// a text, how close each bounded-KV method's next-token distributions stay
// to FullKV's. The text's tokens are split into a prompt (the first
// prompt_tokens, prefilled) and the rest, which every method is forced to
// "generate" (Request::forced_tokens), so its cache fills and compresses on
// the very schedule of free generation. At every step s (the logits after
// the prompt and s forced tokens) we compare the method's distribution Q_s
// with the reference P_s of an uncompressed FullKV run of the same tokens:
//   top-1 agreement = share of steps with argmax Q_s == argmax P_s (first
//                     index on ties), in percent;
//   KL              = mean over steps of KL(P_s || Q_s) in nats, computed
//                     in double from log-softmax of both logit rows.
// All methods and the reference run in one Generate call (one sequence each,
// fed in lockstep), so the distributions of a step are compared as they come.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "skipkv/presets.h"
#include "skipkv/engine.h"
#include "util/status.h"

namespace skipkv::eval {

struct FidelityConfig {
  std::vector<MethodPreset> pairs;  // the methods compared (fullkv may be one of them)
  int64_t prompt_tokens = 1;        // tokens prefilled before teacher forcing (>= 1; BOS counts)
  int64_t max_tokens = 0;           // most text tokens used, prompt included (0 = up to the context)
};

struct FidelityRow {
  std::string method;              // label
  int64_t budget = 0;              // 0 for fullkv
  int64_t steps = 0;               // distributions compared
  double top1_agreement = 0;       // percent
  double kl_mean = 0, kl_max = 0;  // nats
  int64_t compressions = 0;
  int64_t peak_slots = 0;
  nlohmann::json ToJson() const;
};

struct FidelityResult {
  int64_t text_tokens = 0;        // tokens of the whole text (with BOS)
  int64_t used_tokens = 0;        // prompt + forced
  std::vector<FidelityRow> rows;  // in the order of config.pairs
};

// log-softmax of `logits` in double (exposed for tests).
std::vector<double> LogSoftmax(std::span<const float> logits);
// KL(P || Q) = sum_i p_i (log p_i − log q_i) from log-probabilities.
double KlDivergence(std::span<const double> log_p, std::span<const double> log_q);

// Tokenizes `text` (BOS added when the tokenizer uses one), keeps the first
// max_tokens (or the context), and runs the comparison. InvalidArgument when
// prompt_tokens < 1, the text leaves no token to force, or no method is given;
// request errors (a budget the policy refuses) come from the engine.
StatusOr<FidelityResult> RunFidelity(Engine& engine, const std::string& text, const FidelityConfig& config);

}  // namespace skipkv::eval
