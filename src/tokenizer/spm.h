// SentencePiece-style BPE with llama.cpp's `llm_tokenizer_spm` semantics (also
// llama2.c's `encode`): the (already space-escaped) text starts as one symbol
// per UTF-8 character; the adjacent pair whose concatenation is a vocabulary
// piece with the highest score is merged first (leftmost on ties), until no
// pair is a piece. A final symbol that is not a piece falls back to its bytes
// as <0xNN> pieces (or the single-byte piece, or unk).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace skipkv {

class SpmModel {
 public:
  // `spec` and `piece_to_id` must outlive the model.
  static StatusOr<std::unique_ptr<SpmModel>> Create(
      const TokenizerSpec& spec, const std::unordered_map<std::string, TokenId>* piece_to_id);

  // Appends the ids of `text`, whose spaces are already U+2581.
  void Encode(std::string_view text, std::vector<TokenId>* out) const;

 private:
  const TokenizerSpec* spec_ = nullptr;
  const std::unordered_map<std::string, TokenId>* piece_to_id_ = nullptr;
  std::array<TokenId, 256> byte_token_{};
};

// Replaces every ' ' with U+2581 ("▁"), SentencePiece's visible space.
std::string EscapeSpmSpaces(std::string_view text);

}  // namespace skipkv
