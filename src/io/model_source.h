// ModelSource: one loaded model, whatever file format it came from, seen as
// GGUF-style metadata (general.architecture, <arch>.block_count, ...,
// tokenizer.ggml.*) plus tensors under GGUF names (token_embd.weight,
// blk.N.attn_q.weight, ...). Loaders: a .gguf file, a Hugging Face checkpoint
// directory (config.json + *.safetensors, names and keys mapped on load), and
// a llama2.c checkpoint (+ tokenizer.bin). Tensor data is used in place in the
// file's bytes (mapped, or read into huge-page memory: `weights_load`) where
// the format allows, otherwise owned by the ModelSource.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "tensor/tensor_view.h"
#include "util/status.h"

namespace skipkv {

enum class ModelFormat { kGguf, kHuggingFace, kLlama2c };
const char* ModelFormatName(ModelFormat f);

struct ModelSource {
  std::string path;
  ModelFormat format = ModelFormat::kGguf;
  GgufMetadata metadata;
  std::vector<TensorView> tensors;
  // For Hugging Face directories: the tokenizer.json / tokenizer_config.json
  // paths (empty if absent); the tokenizer layer reads them directly.
  std::string tokenizer_json_path;
  std::string tokenizer_config_path;
  // How the weight file(s) reached memory: kMap or kRead (util/mapped_file.h;
  // kMap for the embedded models, which live in the binary).
  FileLoad weights_load = FileLoad::kMap;
  // Keeps mappings and converted buffers alive for the TensorViews.
  std::vector<std::shared_ptr<const void>> owners;

  const TensorView* FindTensor(const std::string& name) const;
};

// Opens a model by path: a directory is a Hugging Face checkpoint; a file is
// GGUF (by magic) or a llama2.c checkpoint (`tokenizer_path` names its
// tokenizer.bin; if empty, tokenizer.bin / tok*.bin beside it is used when
// present). `weights`: how the weight files reach memory -- mapped, or read
// into huge-page memory (util/mapped_file.h; the engine's default is kAuto).
StatusOr<std::unique_ptr<ModelSource>> OpenModel(const std::string& path, const std::string& tokenizer_path = "",
                                                 FileLoad weights = FileLoad::kMap);

// For logs: "read into memory (huge pages advised)", "mapped" or "embedded in
// the binary", plus ", N tensors interleaved in 16-row groups" when the
// model layer rewrote some (InterleaveWeights).
std::string WeightsLoadDescription(const ModelSource& src);

// Wraps an already opened GGUF file (e.g. the embedded default model).
std::unique_ptr<ModelSource> ModelSourceFromGguf(std::unique_ptr<GgufFile> file);

}  // namespace skipkv
