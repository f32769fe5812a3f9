// ModelConfig: the hyperparameters of a decoder-only transformer (Llama and
// Qwen2 families), read from one table of GGUF metadata keys. Every loader
// (GGUF, Hugging Face config.json, llama2.c) maps its format onto these keys,
// so this is the only place that interprets them. Values are validated here;
// a bad or missing one is a Status naming the key and the value.
#pragma once

#include <cstdint>
#include <string>

#include "io/model_source.h"
#include "kernels/ops.h"
#include "util/status.h"

namespace skipkv {

enum class Architecture { kLlama, kQwen2 };
const char* ArchitectureName(Architecture a);  // "llama", "qwen2"

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  int n_layers = 0;            // <arch>.block_count
  int d_model = 0;             // <arch>.embedding_length (D)
  int n_heads = 0;             // <arch>.attention.head_count (query heads)
  int n_kv_heads = 0;          // <arch>.attention.head_count_kv (default n_heads)
  int head_dim = 0;            // <arch>.attention.key_length (default D / n_heads)
  int ffn_dim = 0;             // <arch>.feed_forward_length
  int vocab_size = 0;          // rows of token_embd.weight (<arch>.vocab_size must agree if present)
  int64_t context_length = 0;  // <arch>.context_length: positions must be < this
  float rms_eps = 1e-5f;       // <arch>.attention.layer_norm_rms_epsilon
  // RoPE: theta from <arch>.rope.freq_base; style from skipkv.rope_layout or
  // the architecture; scaling from <arch>.rope.scaling.*; rot_dim from
  // <arch>.rope.dimension_count (default head_dim).
  kernels::RopeParams rope;
  bool qkv_bias = false;         // blk.N.attn_{q,k,v}.bias present (Qwen2)
  bool tied_embeddings = false;  // no output.weight: the LM head is token_embd.weight

  int q_dim() const { return n_heads * head_dim; }      // width of Q and of the attention output
  int kv_dim() const { return n_kv_heads * head_dim; }  // width of K and V
  int gqa_group() const { return n_heads / n_kv_heads; }
  std::string ToString() const;  // one line for logs and `skipkv inspect`
};

// Metadata keys (besides the <arch>.* ones above).
inline constexpr const char* kKeyArchitecture = "general.architecture";
inline constexpr const char* kKeyRopeLayout = "skipkv.rope_layout";  // "rotate_half" | "adjacent_pairs"
inline constexpr const char* kKeyTieEmbeddings = "skipkv.tie_word_embeddings";  // bool (HF importer)

// Reads and validates the configuration of `source`: metadata plus the tensor
// facts that metadata does not carry (vocabulary size, q/k/v biases, tied
// embeddings). Errors: Unsupported for an unknown architecture or RoPE
// scaling type; NotFound for a missing required key or tensor;
// InvalidArgument for an out-of-range or inconsistent value.
StatusOr<ModelConfig> ModelConfigFromSource(const ModelSource& source);

}  // namespace skipkv
