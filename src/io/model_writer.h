// Writing models as GGUF: the per-tensor storage-type rule shared by
// `skipkv convert` and `skipkv make-model`, and a streaming writer that
// converts a ModelSource tensor by tensor (never holding the model twice).
//
// Storage rule for a target type T (ChooseTensorType):
//   * 1-D tensors (norms, biases) stay F32.
//   * Other tensors get T; for "q4_k_m" T is Q4_K except, as in llama.cpp's
//     LLAMA_FTYPE_MOSTLY_Q4_K_M mix: output.weight -> Q6_K; token_embd.weight
//     -> Q6_K when the model has no output.weight (tied classifier);
//     blk.i.attn_v.weight and blk.i.ffn_down.weight -> Q6_K when
//     UseMoreBits(i, n_layers): i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2.
//   * If ne[0] is not a multiple of T's block size: Q8_0 when ne[0] % 32 == 0
//     (T quantised), else F16 (T quantised or F16/BF16), else F32.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "io/gguf.h"
#include "io/model_source.h"

namespace skipkv {

// What `--type` names: a plain DType or the q4_k_m mix.
struct WeightTypeSpec {
  DType base = DType::kF16;
  bool q4_k_m = false;
  std::string name;  // as given, for messages and general.file_type
};
// Parses f32|f16|bf16|q8_0|q4_0|q4_k|q6_k|q4_k_m (case-insensitive).
StatusOr<WeightTypeSpec> ParseWeightType(const std::string& s);
// llama.cpp's general.file_type (llama_ftype) for the spec.
uint32_t LlamaFileType(const WeightTypeSpec& spec);

bool UseMoreBits(int layer, int n_layers);
DType ChooseTensorType(const WeightTypeSpec& spec, const std::string& name, int n_dims, int64_t ne0,
                       int n_layers, bool has_output);

// Options for WriteModelAsGguf.
struct GgufExportOptions {
  std::optional<WeightTypeSpec> type;  // nullopt: keep every tensor's type (exact copy)
  int threads = 0;                     // 0: hardware concurrency; see ResolveThreadCount
  // Called as tensors are written with (elements done, elements in all
  // tensors, current tensor name); may be empty.
  std::function<void(size_t, size_t, const std::string&)> progress;
};

// Writes `src` (metadata as is, plus general.file_type when a type is set)
// to a GGUF v3 file, converting each tensor with DequantizeRow/QuantizeRow.
// A "llama" source with skipkv.rope_layout = "rotate_half" (a Hugging Face
// checkpoint) has its attn_q / attn_k rows (and biases) permuted to the
// adjacent-pair layout llama.cpp expects for llama GGUFs, as its
// convert_hf_to_gguf.py does; the key is then written as "adjacent_pairs".
// (qwen2 GGUFs use rotate-half natively, so they are written unpermuted.)
Status WriteModelAsGguf(const ModelSource& src, const std::string& out_path, const GgufExportOptions& opts);

}  // namespace skipkv
