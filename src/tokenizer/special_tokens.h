// Finds special-token text (control, user-defined and unknown pieces such as
// "<|im_start|>", "<think>", "<s>") in input text, so Encode can emit those
// tokens directly and tokenize only the text between them. Matching is
// leftmost-longest, like Hugging Face's added-vocabulary splitter.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace skipkv {

class SpecialTokenMatcher {
 public:
  struct Fragment {
    std::string_view text;     // the raw text when token == kNoToken
    TokenId token = kNoToken;  // a matched special token
  };

  // Registers every non-empty piece whose type is kControl, kUserDefined or
  // kUnknown. When two ids share a piece, the one in `preferred` (if any) or
  // else the lower id wins.
  SpecialTokenMatcher(const TokenizerSpec& spec, const std::vector<TokenId>& preferred = {});

  // Splits `text` into raw fragments and special tokens, in order; raw
  // fragments are never empty.
  void Split(std::string_view text, std::vector<Fragment>* out) const;
  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }

 private:
  struct Entry {
    std::string piece;
    TokenId id;
  };
  // Candidates by first byte, longest piece first.
  std::array<std::vector<Entry>, 256> by_first_byte_;
  size_t count_ = 0;
};

}  // namespace skipkv
