// llama2.c checkpoints ("legacy v0" .bin) and tokenizer.bin files, imported
// as a ModelSource with arch "llama" and GGUF names. The weights keep the
// Meta layout (RoPE on adjacent pairs), so no permutation is needed:
// skipkv.rope_layout = "adjacent_pairs". All tensors are F32 views into the
// image (28-byte header, so every float is 4-byte aligned).
//
// The tokenizer becomes SentencePiece metadata as llama.cpp stores it:
// tokenizer.ggml.model "llama", tokens (' ' -> U+2581), scores, token_type
// (1 normal, 2 unknown for id 0, 3 control for ids 1/2, 6 byte for <0xNN>),
// bos 1, eos 2, unk 0, add_bos_token true, add_space_prefix true.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "io/model_source.h"

namespace skipkv {

struct Llama2cConfig {
  int32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0, seq_len = 0;
  bool shared_classifier = true;  // the header's vocab_size was positive
  // Exact file size the header implies (header + tensors + RoPE tables + classifier if not shared).
  uint64_t ExpectedFileBytes() const;
};

// Reads and validates the 7-int32 header against the image size.
StatusOr<Llama2cConfig> ParseLlama2cHeader(const uint8_t* data, size_t size, const std::string& name);

// Adds tokenizer.ggml.* metadata from a tokenizer.bin image holding
// `vocab_size` entries.
Status AddLlama2cTokenizerMetadata(const uint8_t* data, size_t size, int64_t vocab_size, const std::string& name,
                                   GgufMetadata* md);

// Builds a ModelSource from images that must outlive it (tok may be null/0:
// then no tokenizer metadata).
StatusOr<std::unique_ptr<ModelSource>> Llama2cFromMemory(const uint8_t* model, size_t model_size,
                                                         const uint8_t* tok, size_t tok_size,
                                                         const std::string& name, const std::string& tok_name);

// Opens a checkpoint (loaded as `load` says, util/mapped_file.h) and its
// tokenizer (`tokenizer_path`, or if empty tokenizer.bin / tok*.bin beside it
// when present; always mapped).
StatusOr<std::unique_ptr<ModelSource>> OpenLlama2c(const std::string& path, const std::string& tokenizer_path,
                                                   FileLoad load = FileLoad::kMap);

}  // namespace skipkv
