// SteeringHooks: SEAL's steering (spec §4.2) with a fixed strength, or
// SkipKV's adaptive strength α = α0 + γ·N_o (spec §6.9), as per-request
// SequenceHooks.
//
// State machine (per request): in_think starts as assume_think (A13) and is
// replayed over the prompt tokens but the last: <think> sets it, </think>
// clears it (so a prompt ending inside "<think>\n" is in the thought, one
// with a closed "<think>...</think>" is not). Then, for the last new token x
// of each forward (the one whose logits are sampled; at prefill the last
// prompt position, in the forward that completes the prefill):
//   in_think |= (x == <think>); in_think &= (x != </think>);
//   steer = in_think && x ∈ SPLIT (every token whose text contains "\n\n").
// A steered row gets hidden[x] += α·V at the input of engine layer
// `engine_layer` (= direction index + 1, see steering_vector.h); the K/V of
// that position in later layers are computed from the steered state.
//
// α: fixed config.coef when !config.adaptive. Adaptive: α starts at α0 and is
// set to min(α0 + γ·N_o, alpha_max) in BeforeForward, before a compressing
// forward (cadence kCompression, the authors' code) or before every forward
// (kSentenceClose: N_o only changes when a sentence closes, so this is α
// updated at sentence close). N_o comes from `nonexec_count` (the SkipKV
// sentence tracker); install the sentence hooks before these in a composite
// so N_o is current.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kv/sequence_hooks.h"
#include "skipkv/steering.h"
#include "sentence/token_sets.h"

namespace skipkv {

class SteeringHooks : public SequenceHooks {
 public:
  // `vector` is V ([d_model], unscaled); `nonexec_count` is required when
  // config.adaptive (CHECKed), ignored otherwise.
  SteeringHooks(const SteeringConfig& config, std::shared_ptr<const std::vector<float>> vector, int engine_layer,
                std::shared_ptr<const SkipkvTokenSets> tokens, std::function<int64_t()> nonexec_count = nullptr);

  void OnStart(const SequenceStart& start) override;
  void BeforeForward(const SequenceStep& step) override;
  bool WantsResidual(int layer) const override { return layer == layer_; }
  void OnResidual(int layer, std::span<const BatchToken> rows, float* hidden) override;
  // steer.events (rows steered), steer.alpha (current α), steer.nonexec
  // (N_o as last read; adaptive only), steer.layer (direction index).
  std::vector<std::pair<std::string, double>> Diagnostics() const override;

  float alpha() const { return alpha_; }
  int64_t events() const { return events_; }
  bool in_think() const { return in_think_; }
  // The gen positions of the steered rows, in order (for tests and traces).
  const std::vector<int32_t>& steered_positions() const { return steered_; }

 private:
  void UpdateThink(int32_t token);

  SteeringConfig config_;
  std::shared_ptr<const std::vector<float>> vector_;
  int layer_;
  std::shared_ptr<const SkipkvTokenSets> tokens_;
  std::function<int64_t()> nonexec_count_;
  float alpha_;
  int64_t nonexec_ = 0;
  bool in_think_ = false;
  bool partial_prefill_ = false;
  int64_t events_ = 0;
  std::vector<int32_t> steered_;
};

}  // namespace skipkv
