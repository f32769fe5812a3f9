// Model: a ModelSource's tensors bound by GGUF name to a transformer's weight
// slots, with every shape checked against the ModelConfig. Immutable after
// Load(), so one Model can serve several ForwardPass objects (forward.h).
// Matrices stay as TensorViews into the source (any dtype the kernels
// support); norm weights and biases are converted to f32 at load.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/model_source.h"
#include "kv/kv_cache.h"
#include "model/model_config.h"
#include "tensor/tensor_view.h"
#include "util/status.h"

namespace skipkv {

struct LayerWeights {
  std::vector<float> attn_norm;   // blk.N.attn_norm.weight    [D]
  TensorView wq;                  // blk.N.attn_q.weight       ne {D, q_dim}
  TensorView wk;                  // blk.N.attn_k.weight       ne {D, kv_dim}
  TensorView wv;                  // blk.N.attn_v.weight       ne {D, kv_dim}
  std::vector<float> bq, bk, bv;  // blk.N.attn_{q,k,v}.bias   [q_dim], [kv_dim]; empty without qkv_bias
  TensorView wo;                  // blk.N.attn_output.weight  ne {q_dim, D}
  std::vector<float> ffn_norm;    // blk.N.ffn_norm.weight     [D]
  TensorView w_gate;              // blk.N.ffn_gate.weight     ne {D, F}
  TensorView w_up;                // blk.N.ffn_up.weight       ne {D, F}
  TensorView w_down;              // blk.N.ffn_down.weight     ne {F, D}
};

struct ModelWeights {
  TensorView token_embd;  // token_embd.weight         ne {D, vocab}
  std::vector<LayerWeights> layers;
  std::vector<float> output_norm;  // output_norm.weight        [D]
  TensorView output;               // output.weight             ne {D, vocab} (= token_embd when tied)
};

class Model {
 public:
  // Reads the config and binds every weight. The Model keeps `source` alive
  // (its TensorViews point into it). Errors name the tensor and the expected
  // vs actual shape or type.
  static StatusOr<std::unique_ptr<Model>> Load(std::shared_ptr<const ModelSource> source);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const ModelSource& source() const { return *source_; }

  // The KV cache shape that matches this model.
  KvCacheShape KvShape(KvDType dtype = KvDType::kF16, int query_window = 8,
                       bool track_attention = false) const;

 private:
  Model() = default;
  std::shared_ptr<const ModelSource> source_;
  ModelConfig config_;
  ModelWeights weights_;
};

// Rewrites the source's Q4_K, Q6_K, Q8_0, F32 and F16 matrices in place into the
// kernels' 16-row interleaved layouts (DType::kQ4_Kx16, kQ6_Kx16, kQ8_0x16,
// kF32x16, kF16x16; tensor/interleaved.h), before Model::Load binds them: each
// type when kernels::InterleavedWeightsWanted(type) and
// the weights were read into memory (FileLoad::kRead). Mapped and embedded
// weights keep the file's layout: rewriting them would turn page-cache pages
// shared with other processes into private copies. Only whole groups of 16
// rows are interleaved; the rest keep their type. Returns how many tensors
// were rewritten; if the memory cannot be made writable, logs why and returns
// 0 (the file layout still computes).
int InterleaveWeights(ModelSource& source);

// Binds the weights of `source` for `config` (used by Model::Load; exposed for tests).
StatusOr<ModelWeights> BindWeights(const ModelSource& source, const ModelConfig& config);

}  // namespace skipkv
