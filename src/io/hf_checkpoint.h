// Hugging Face checkpoint directories: config.json + model.safetensors or
// shards listed in model.safetensors.index.json. Loading maps the config to
// GGUF-style metadata and the tensor names to GGUF names:
//
//   general.architecture            "llama" (LlamaForCausalLM) | "qwen2" (Qwen2ForCausalLM)
//   <arch>.block_count              num_hidden_layers
//   <arch>.embedding_length         hidden_size
//   <arch>.feed_forward_length      intermediate_size
//   <arch>.attention.head_count     num_attention_heads
//   <arch>.attention.head_count_kv  num_key_value_heads (default: num_attention_heads)
//   <arch>.attention.key_length / value_length   head_dim (only when config.json gives it)
//   <arch>.rope.freq_base           rope_theta (default 10000)
//   <arch>.attention.layer_norm_rms_epsilon      rms_norm_eps (default 1e-6)
//   <arch>.context_length           max_position_embeddings
//   <arch>.vocab_size               vocab_size
//   <arch>.rope.scaling.type        "llama3" | "linear" (from rope_scaling.rope_type / .type)
//   <arch>.rope.scaling.factor      rope_scaling.factor
//   <arch>.rope.scaling.low_freq_factor / high_freq_factor   (llama3 only)
//   <arch>.rope.scaling.original_context_length  rope_scaling.original_max_position_embeddings
//   skipkv.tie_word_embeddings      tie_word_embeddings (default false)
//   skipkv.rope_layout              "rotate_half" (HF keeps the rotate-half q/k layout)
//   tokenizer.ggml.bos_token_id / eos_token_id   from config.json when integers
//
// Tensors: F32/F16/BF16 only (others are Unsupported); mmapped in place,
// copied only when a safetensors offset leaves the data misaligned for its
// element type. rotary_emb.inv_freq buffers are skipped; names not in the
// table below keep their Hugging Face name.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "io/model_source.h"

namespace skipkv {

// "model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight"; "" if unknown.
std::string HfTensorNameToGguf(const std::string& hf_name);

// Fills metadata from a parsed config.json (see the table above). Integers
// are read as 64 bits and must lie in the ranges of io/model_limits.h (the
// same as GGUF metadata); a value out of range or of the wrong type is an
// error quoting the key and the value as written, never narrowed.
Status HfConfigToMetadata(const nlohmann::json& config, const std::string& config_path, GgufMetadata* md);

// `load`: how each *.safetensors file reaches memory (util/mapped_file.h).
StatusOr<std::unique_ptr<ModelSource>> OpenHfCheckpoint(const std::string& dir, FileLoad load = FileLoad::kMap);

}  // namespace skipkv
