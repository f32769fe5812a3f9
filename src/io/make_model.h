// Random-weight models for tests and benchmarks (`skipkv make-model`):
// architecture presets, deterministic weights (normal, std 0.02; norms 1),
// and complete tokenizer metadata so llama.cpp can load the file too.
//
// Presets (all overridable):
//   r1-qwen-1.5b  qwen2, 28 layers, hidden 1536, 12 heads / 2 kv, ffn 8960,
//                 vocab 151936, context 131072, theta 10000, eps 1e-6,
//                 untied output; R1-Distill-Qwen tokenizer (pre deepseek-r1-qwen)
//   tiny-qwen2    qwen2, 2 layers, hidden 256, 4 heads / 2 kv, ffn 512,
//                 vocab 151936, context 4096, theta 1e6, tied output; Qwen2
//                 tokenizer with R1 specials (pre qwen2)
//   tiny-llama    llama, 2 layers, hidden 256, 4 heads / 2 kv, ffn 512,
//                 vocab 512, context 512, theta 10000, eps 1e-5, untied
//                 output; the embedded stories260K SentencePiece vocab
// Weights are a pure function of (seed, tensor name, row), so the file does
// not depend on the thread count.
#pragma once

#include <functional>
#include <string>

#include "io/model_writer.h"

namespace skipkv {

struct ModelShape {
  std::string arch;  // "qwen2" | "llama"
  int layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0, context = 0;
  float rope_theta = 10000.0f, rms_eps = 1e-6f;
  bool tied_output = false;
  std::string tokenizer_pre;  // gpt2 vocabularies: tokenizer.ggml.pre
};

StatusOr<ModelShape> LookupModelPreset(const std::string& name);  // names above

struct MakeModelOptions {
  std::string preset;
  ModelShape shape;          // the preset with overrides applied
  WeightTypeSpec type;
  uint64_t seed = 0;
  std::string tokenizer_path;  // qwen2: tokenizer.json; llama: tokenizer.bin ("" = embedded tok512)
  std::string chat_template_path;  // optional: stored as tokenizer.chat_template
  std::string output_path;
  int threads = 0;  // 0 = all hardware threads; range checked by ResolveThreadCount
  // Called as rows are written with (elements done, elements in all tensors,
  // current tensor name); may be empty.
  std::function<void(size_t, size_t, const std::string&)> progress;
};

// Checks the shape (positive sizes, heads | hidden, kv_heads | heads, even
// head size) and writes the model, streaming tensor by tensor.
Status MakeRandomModel(const MakeModelOptions& opts);

// The default tokenizer.json for qwen2 presets: relative to the working
// directory, else to the source tree skipkv was built from.
inline constexpr const char* kDefaultQwenTokenizerJson = ".deps/npm/tokenizer-qwen3/models/tokenizer.json";

}  // namespace skipkv
