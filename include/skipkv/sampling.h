// SamplingParams: how one request picks its next token from the logits.
// Part of the public API (include it through skipkv/engine.h). The defaults
// decode greedily, which is what the paper's evaluation protocol uses.
#pragma once

#include <cstdint>

#include "skipkv/status.h"

namespace skipkv {

// Semantics follow Hugging Face `generate` (logits processors, then warpers):
//   1. repetition penalty over the last `repeat_last_n` tokens of the
//      sequence (prompt included): a logit l of a token seen in that window
//      becomes l / penalty if l > 0, l * penalty otherwise (each distinct
//      token once; llama.cpp / HF `RepetitionPenaltyLogitsProcessor`);
//   2. temperature == 0 -> greedy argmax (lowest id wins ties), done;
//   3. logits / temperature;
//   4. top-k (keep the k largest; 0 = off);
//   5. top-p (keep the smallest prefix, by descending probability, whose
//      mass reaches top_p; 1 = off; at least one token always survives);
//   6. min-p (drop tokens whose probability is below min_p * max prob;
//      0 = off);
//   7. draw from the renormalised distribution with the request's own
//      std::mt19937_64 seeded by `seed`.
struct SamplingParams {
  float temperature = 0.f;     // >= 0; 0 means greedy
  int top_k = 0;               // >= 0; 0 disables
  float top_p = 1.f;           // in (0, 1]
  float min_p = 0.f;           // in [0, 1]
  float repeat_penalty = 1.f;  // > 0; 1 disables
  int repeat_last_n = 64;      // window of the penalty; -1 = whole sequence, 0 = off
  uint64_t seed = 0x5eed;      // per request; identical seeds give identical draws
};

// OK, or InvalidArgument naming the offending field and its value
// (temperature < 0 or not finite, top_k < 0, top_p outside (0, 1],
// min_p outside [0, 1], repeat_penalty <= 0 or not finite,
// repeat_last_n < -1).
Status ValidateSamplingParams(const SamplingParams& params);

}  // namespace skipkv
