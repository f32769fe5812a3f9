// Byte-level BPE over token ids: a pre-token's bytes start as the ids of their
// single-byte pieces and adjacent pairs are merged by lowest merge rank (the
// leftmost pair wins ties), as Hugging Face tokenizers and llama.cpp do. Merge
// candidates live in a heap over a linked list, so a pre-token of n bytes
// costs O(n log n) whatever its length. Results for short pre-tokens are
// cached (natural text repeats its words).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace skipkv {

class BpeModel {
 public:
  // `piece_to_id` maps stored pieces to ids and must outlive the model. Merges
  // whose parts or result are not vocabulary pieces are CorruptData.
  static StatusOr<std::unique_ptr<BpeModel>> Create(
      const TokenizerSpec& spec, const std::unordered_map<std::string, TokenId>* piece_to_id);

  // Appends the ids of one pre-token given as raw bytes. A byte without a
  // piece becomes spec.unk (or is dropped if there is none).
  void EncodeWord(std::string_view bytes, std::vector<TokenId>* out) const;

  size_t num_merges() const { return merges_.size(); }

 private:
  struct Merge {
    int32_t rank;
    TokenId merged;
  };
  static uint64_t Key(TokenId a, TokenId b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void Merge_(std::string_view bytes, std::vector<TokenId>* out) const;

  const TokenizerSpec* spec_ = nullptr;
  const std::unordered_map<std::string, TokenId>* piece_to_id_ = nullptr;
  std::array<TokenId, 256> byte_token_{};
  std::unordered_map<uint64_t, Merge> merges_;
  bool ignore_merges_ = false;
  TokenId unk_ = kNoToken;

  // Word cache: pre-token bytes -> ids. Bounded; cleared when full.
  static constexpr size_t kMaxCachedWordBytes = 128;
  static constexpr size_t kMaxCacheEntries = 1 << 17;
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<TokenId>> cache_;
};

}  // namespace skipkv
