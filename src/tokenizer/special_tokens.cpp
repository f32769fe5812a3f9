// Finding special-token text in input text; see special_tokens.h.
#include "tokenizer/special_tokens.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace skipkv {

SpecialTokenMatcher::SpecialTokenMatcher(const TokenizerSpec& spec, const std::vector<TokenId>& preferred) {
  std::unordered_map<std::string_view, TokenId> chosen;
  auto is_special = [&](TokenId id) {
    if (spec.types.empty()) return false;
    const TokenType t = spec.types[id];
    return t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown;
  };
  for (TokenId id = 0; id < static_cast<TokenId>(spec.pieces.size()); ++id) {
    if (!is_special(id) || spec.pieces[id].empty()) continue;
    chosen.emplace(spec.pieces[id], id);  // lower id wins by default
  }
  for (TokenId id : preferred) {
    if (id >= 0 && id < static_cast<TokenId>(spec.pieces.size()) && is_special(id) &&
        !spec.pieces[id].empty()) {
      chosen[spec.pieces[id]] = id;
    }
  }
  for (const auto& [piece, id] : chosen) {
    by_first_byte_[static_cast<uint8_t>(piece[0])].push_back({std::string(piece), id});
    ++count_;
  }
  for (auto& v : by_first_byte_) {
    std::sort(v.begin(), v.end(), [](const Entry& a, const Entry& b) {
      return a.piece.size() != b.piece.size() ? a.piece.size() > b.piece.size() : a.id < b.id;
    });
  }
}

void SpecialTokenMatcher::Split(std::string_view text, std::vector<Fragment>* out) const {
  size_t raw_start = 0;
  size_t i = 0;
  while (i < text.size()) {
    const auto& cands = by_first_byte_[static_cast<uint8_t>(text[i])];
    const Entry* hit = nullptr;
    for (const Entry& e : cands) {
      if (e.piece.size() <= text.size() - i &&
          std::memcmp(text.data() + i, e.piece.data(), e.piece.size()) == 0) {
        hit = &e;
        break;
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    if (i > raw_start) out->push_back({text.substr(raw_start, i - raw_start), kNoToken});
    out->push_back({{}, hit->id});
    i += hit->piece.size();
    raw_start = i;
  }
  if (raw_start < text.size()) out->push_back({text.substr(raw_start), kNoToken});
}

}  // namespace skipkv
