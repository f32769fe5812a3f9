// Byte-level BPE vocabularies from a Hugging Face tokenizer.json, written as
// the GGUF tokenizer metadata llama.cpp's converter produces
// (tokenizer.ggml.model "gpt2", pre, tokens, token_type, merges, special ids).
// Token types: 1 normal (model.vocab), 3 control (added tokens that are
// special or look special: <|...|> or <｜...｜>), 4 user-defined (other added
// tokens), 5 unused ([PAD{id}] fillers for ids with no token, up to vocab_size).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf.h"

namespace skipkv {

struct AddedTokenOverride {
  int64_t id;
  std::string content;
  bool special;
};

struct Gpt2VocabOptions {
  std::string pre = "qwen2";       // tokenizer.ggml.pre
  int64_t vocab_size = 0;          // pad with [PAD{id}] up to this many tokens (0: no padding)
  int64_t max_added_id = -1;       // drop added tokens with a larger id (-1: keep all)
  std::vector<AddedTokenOverride> overrides;  // replace / add added tokens by id
  std::optional<uint32_t> bos, eos, pad;
  bool add_bos = false;
};

// The DeepSeek-R1-Distill-Qwen vocabulary built from the Qwen2 BPE
// (tokenizer.json of Qwen2/2.5/3): ids 151643..151649 become R1's specials
// (<｜end▁of▁sentence｜> EOS/pad, <｜User｜>, <｜Assistant｜>,
// <｜begin▁of▁sentence｜> BOS, <|EOT|>, <think>, </think>), Qwen3-only added
// tokens (> 151664) are dropped, add_bos_token is true, pre "deepseek-r1-qwen".
Gpt2VocabOptions R1DistillQwenVocabOptions(int64_t vocab_size);

// Reads tokenizer.json from `tokenizer_json_path`. Any malformed or
// wrongly typed field is a CorruptData/Unsupported Status naming the file and
// the field, never an exception.
Status AddGpt2TokenizerMetadata(const std::string& tokenizer_json_path, const Gpt2VocabOptions& opts,
                                GgufMetadata* md);
// The same from the file's text; `path` names it in errors.
Status AddGpt2TokenizerMetadataFromJson(std::string_view text, const std::string& path,
                                        const Gpt2VocabOptions& opts, GgufMetadata* md);

}  // namespace skipkv
