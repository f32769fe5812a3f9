// Sampler: turns one row of logits into the next token id, following the
// SamplingParams contract (include/skipkv/sampling.h). One Sampler per
// request: it owns that request's RNG, so results never depend on which
// other requests share the batch or on the thread count.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "skipkv/sampling.h"

namespace skipkv::engine {

class Sampler {
 public:
  // `params` must have passed ValidateSamplingParams (CHECKed).
  explicit Sampler(const SamplingParams& params);

  // Picks a token from `logits` [vocab]. `history` is the sequence so far
  // (prompt + generated, oldest first); only its last repeat_last_n tokens
  // feed the repetition penalty. Ids in history outside [0, vocab) are
  // ignored. Does not modify `logits`.
  int32_t Sample(std::span<const float> logits, std::span<const int32_t> history);

  const SamplingParams& params() const { return params_; }

  // The candidate distribution the last Sample() drew from (after all
  // filters, normalised; sorted by descending probability, ties by id, when
  // a top-k/top-p/min-p filter ran, otherwise in id order). Empty after a
  // greedy pick. Exposed for tests and diagnostics.
  struct Candidate {
    int32_t id;
    float prob;
  };
  const std::vector<Candidate>& last_candidates() const { return cand_; }

 private:
  // Uniform double in [0, 1) from 53 random bits (portable across standard
  // libraries, unlike std::uniform_real_distribution).
  double NextUniform();

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<float> work_;      // penalised logits [vocab]
  std::vector<Candidate> cand_;  // scratch, reused across calls
  std::vector<int32_t> seen_;    // distinct ids of the penalty window
};

// Applies the repetition penalty in place: every distinct id of `window`
// inside [0, logits.size()) is penalised once. Exposed for tests.
void ApplyRepetitionPenalty(std::span<float> logits, std::span<const int32_t> window, float penalty,
                            std::vector<int32_t>* scratch);

// Index of the largest value, the lowest index among equals. logits non-empty.
int32_t Argmax(std::span<const float> logits);

}  // namespace skipkv::engine
