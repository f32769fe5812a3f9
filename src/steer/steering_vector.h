// Steering vectors on disk: llama.cpp control-vector GGUF files.
//
// A control vector holds one f32 tensor `direction.<l>` of shape [n_embd] per
// decoder layer l. In the convention shared by llama.cpp (llama_adapter_cvec
// adds direction.l to the output of decoder layer l, after its FFN residual
// add) and EasySteer (its hidden states and its steering both sit at the
// output of decoder layer l), direction.l lives on the residual stream AFTER
// layer l, i.e. at the INPUT of layer l + 1. skipkv steers at the input of a
// layer (SequenceHooks::OnResidual), so direction.l maps to engine layer
// l + 1 (EngineLayerForDirection). docs/steering.md has the evidence.
//
// llama.cpp's loader rejects a tensor named direction.0 (its buffer has no
// slot for layer 0), so WriteControlVector never writes it; EasySteer's files
// do contain direction.0 and load here.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "util/status.h"

namespace skipkv {

struct ControlVector {
  int64_t width = 0;                              // n_embd of every direction
  std::map<int, std::vector<float>> directions;  // direction index l -> [width]
  std::string model_hint;                         // controlvector.model_hint ("" if absent)
  double num_vectors_averaged = 0;                // controlvector.num_vectors_averaged (0 if absent)
  int64_t layer_count = 0;                        // controlvector.layer_count (0 if absent)

  // The model depth the file was made for: layer_count + 1 for llama.cpp's
  // layout (no direction.0; cvector-generator writes n_layer - 1 directions
  // and layer_count = n_layer - 1), layer_count for EasySteer's (direction.0
  // .. n_layer - 1), max index + 1 when layer_count is absent.
  int64_t ModelDepth() const;
  std::string ShapeString() const;  // "28 layers (direction.0..27) of width 1536"
};

// Loads a control-vector GGUF. Errors (naming the file) for: not a GGUF, no
// direction.* tensor, a tensor that is not f32 1-D, widths that differ, a
// malformed index, non-finite values.
StatusOr<ControlVector> LoadControlVector(const std::string& path);

// Writes `cv` as a llama.cpp control-vector GGUF: general.architecture =
// "controlvector", controlvector.model_hint, controlvector.layer_count =
// model_depth - 1 (as cvector-generator), direction.l for every l >= 1 in
// cv.directions (direction.0 is skipped, llama.cpp rejects it), plus
// controlvector.num_vectors_averaged when it is > 0.
Status WriteControlVector(const std::string& path, const ControlVector& cv, int64_t model_depth);

// The SkipKV-convention difference vector from SEAL's per-category means
// (docs/spec.md §6.2, §6.9): V_l = execution_l - (n_r * reflection_l + n_t *
// transition_l) / (n_r + n_t), the counts taken from each file's
// controlvector.num_vectors_averaged (EasySteer sums the count over layers,
// which scales n_r and n_t alike and leaves the weights unchanged). Every
// direction present in all three is combined. Errors name the file whose count
// is missing or whose shape differs.
StatusOr<ControlVector> CombineSealCategories(const ControlVector& execution, const ControlVector& reflection,
                                              const ControlVector& transition);

// Loads a steering vector from `path`: a control-vector GGUF file, or a
// directory holding the three SEAL category files (*execution_avg_vector.gguf,
// *reflection_avg_vector.gguf, *transition_avg_vector.gguf), combined by
// CombineSealCategories.
StatusOr<ControlVector> LoadSteeringVector(const std::string& path);

// Checks that `cv` was made for a model of `n_layers` layers of width
// `d_model` (error naming both shapes) and that `direction` is present and
// steerable: skipkv adds direction.l at the input of layer l + 1, so l must be
// in [0, n_layers - 1] (n_layers - 1: the last layer's output, before the
// final norm).
Status ValidateControlVectorForModel(const ControlVector& cv, const std::string& path, int direction,
                                     int64_t n_layers, int64_t d_model);

// The engine layer (input of) where direction.l is added: l + 1 (n_layers
// for the last direction: the residual after the last layer).
inline int EngineLayerForDirection(int direction) { return direction + 1; }

// The direction the engine adds (times α) for `layer`: cv.directions.at(layer),
// negated when the file is in the authors' form v = H_O − H_E
// (SteeringConfig::authors_form), so that α·result = coef·v with α = −coef.
std::vector<float> SteeringDirection(const ControlVector& cv, int layer, bool authors_form);

}  // namespace skipkv
