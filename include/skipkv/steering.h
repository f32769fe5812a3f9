// SteeringConfig: SEAL's fixed-strength steering and SkipKV's adaptive
// steering (spec §4.2, §6.9), one per request method.
//
// Conventions (docs/steering.md has the evidence):
//  - `layer` is the control-vector direction index l, as llama.cpp
//    (--control-vector-layer-range) and EasySteer (target_layers) number it:
//    direction.l is added to the output of decoder layer l, i.e. at the input
//    of layer l + 1. SEAL's own code adds its layer-L_s vector at the input of
//    layer L_s, which is direction index L_s - 1 here.
//  - Sign: the vector is V = H_E - H_O (execution minus non-execution, what
//    skipkv steer-extract and the combined SEAL category files give) and the
//    hook adds +α·V. A vector in SEAL's convention (H_O - H_E) needs a
//    negative coefficient.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "skipkv/status.h"

namespace skipkv {

enum class SteerCadence {
  kCompression,    // α updated before each compressing forward (the authors' code; default)
  kSentenceClose,  // α updated before every forward, i.e. as soon as a sentence closes
};

struct SteeringConfig {
  bool enabled = false;
  std::string file;   // control-vector GGUF, or a directory with the three SEAL category files
  int layer = 20;     // direction index l (added at the input of layer l + 1)
  bool adaptive = false;  // false: α = coef (SEAL); true: α = α0 + γ·N_o (SkipKV)
  float coef = 1.0f;      // SEAL's fixed strength
  float alpha0 = 1.0f;    // SkipKV α0
  float gamma = 0.02f;    // SkipKV γ
  float alpha_max = std::numeric_limits<float>::infinity();  // optional clamp (none by default)
  SteerCadence cadence = SteerCadence::kCompression;
  bool assume_think = true;  // spec A13: no <think> seen = inside the thought until </think>
  // The file is in the SkipKV authors' / SEAL's form v = H_O − H_E (used there
  // with a negative coefficient): the direction is negated at load, so
  // α = −coef gives the same residual edit (issue 38, row 5; docs/steering.md).
  bool authors_form = false;
};

const char* SteerCadenceName(SteerCadence c);
// "compression" | "sentence"; InvalidArgument naming the value otherwise.
StatusOr<SteerCadence> ParseSteerCadence(const std::string& name);
// Field checks (file set when enabled, finite coefficients, γ >= 0,
// alpha_max >= alpha0); errors name the field and the value.
Status ValidateSteeringConfig(const SteeringConfig& config);
// Loads the vector at `path` as the engine will (a control-vector GGUF or a
// SEAL directory) and checks direction `layer` against a model of
// `n_layers` layers of width `d_model`, so an app can refuse a bad vector
// before any work starts. Errors name the path and both shapes.
Status CheckSteeringVectorFile(const std::string& path, int layer, int64_t n_layers, int64_t d_model);

}  // namespace skipkv
