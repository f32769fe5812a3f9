// Pre-tokenization for byte-level BPE: optional NFC normalisation (ICU) and a
// split of the text into pre-tokens by a Hugging Face "Split / Isolated"
// regex, run with PCRE2 in UTF + UCP mode (JIT-compiled where available).
// Matches and the text between matches both become pre-tokens, so the pieces
// always concatenate back to the (normalised) input, for any byte string:
// invalid UTF-8 never matches and ends up in the gaps.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace skipkv {

class PreTokenizer {
 public:
  // `regex` in Hugging Face (fancy-regex) syntax, which PCRE2 accepts for every
  // pre-tokenizer we know. Unsupported if PCRE2 cannot compile it.
  static StatusOr<std::unique_ptr<PreTokenizer>> Create(const std::string& regex, bool nfc);
  ~PreTokenizer();

  // If NFC is on and `text` is not already NFC, writes the normalised text to
  // *out and returns true; otherwise returns false (use `text` as is). Invalid
  // UTF-8 bytes are copied unchanged and the valid runs around them normalised.
  bool Normalize(std::string_view text, std::string* out) const;

  // Appends the pre-tokens of `text` (views into it) to *out.
  void Split(std::string_view text, std::vector<std::string_view>* out) const;

  bool nfc() const { return nfc_; }
  bool jit() const { return jit_; }

 private:
  PreTokenizer() = default;
  void* code_ = nullptr;  // pcre2_code_8*
  bool nfc_ = false;
  bool jit_ = false;
};

}  // namespace skipkv
