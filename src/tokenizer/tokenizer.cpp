// Tokenizer core: validation of a TokenizerSpec, the derived tables, Encode /
// Decode, the SkipKV token-id helpers and the streaming detokenizer. Loaders
// live in load_*.cpp, the algorithms in bpe.cpp / spm.cpp.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm.h"
#include "tokenizer/utf8.h"

namespace skipkv {

const char* PreTokenizerKindName(PreTokenizerKind k) {
  switch (k) {
    case PreTokenizerKind::kGpt2:
      return "gpt-2";
    case PreTokenizerKind::kLlama3:
      return "llama3";
    case PreTokenizerKind::kQwen2:
      return "qwen2";
    case PreTokenizerKind::kCustom:
      return "custom";
  }
  return "?";
}

const char* PreTokenizerRegex(PreTokenizerKind k) {
  // The Hugging Face patterns, verbatim (PCRE2 accepts them unchanged).
  switch (k) {
    case PreTokenizerKind::kGpt2:
      return R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
    case PreTokenizerKind::kLlama3:
      return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    case PreTokenizerKind::kQwen2:
      return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    case PreTokenizerKind::kCustom:
      return "";
  }
  return "";
}

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(TokenizerSpec spec) {
  if (spec.name.empty()) spec.name = "tokenizer";
  const size_t n = spec.pieces.size();
  if (n == 0) return CorruptData(spec.name + ": the vocabulary is empty");
  if (n > (1u << 30)) return CorruptData(spec.name + ": implausible vocabulary size " + std::to_string(n));
  if (spec.types.empty()) spec.types.assign(n, TokenType::kNormal);
  if (spec.types.size() != n) {
    return CorruptData(spec.name + ": " + std::to_string(n) + " tokens but " +
                       std::to_string(spec.types.size()) + " token types");
  }
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<uint8_t>(spec.types[i]) > static_cast<uint8_t>(TokenType::kByte)) {
      return CorruptData(spec.name + ": token " + std::to_string(i) + " has invalid type " +
                         std::to_string(static_cast<int>(spec.types[i])) + " (expected 0..6)");
    }
  }
  if (spec.model == TokenizerModel::kSentencePiece && spec.scores.empty()) spec.scores.assign(n, 0.0f);
  if (!spec.scores.empty() && spec.scores.size() != n) {
    return CorruptData(spec.name + ": " + std::to_string(n) + " tokens but " +
                       std::to_string(spec.scores.size()) + " scores");
  }
  const std::pair<const char*, TokenId> ids[] = {
      {"bos", spec.bos}, {"eos", spec.eos}, {"unk", spec.unk}, {"pad", spec.pad}, {"eot", spec.eot}};
  for (const auto& [what, id] : ids) {
    if (id != kNoToken && (id < 0 || id >= static_cast<TokenId>(n))) {
      return CorruptData(spec.name + ": " + what + " token id " + std::to_string(id) +
                         " is outside the vocabulary (0.." + std::to_string(n - 1) + ")");
    }
  }
  if (spec.add_bos && spec.bos == kNoToken) spec.add_bos = false;  // nothing to add
  if (spec.add_eos && spec.eos == kNoToken) spec.add_eos = false;

  auto tok = std::unique_ptr<Tokenizer>(new Tokenizer());
  tok->spec_ = std::move(spec);
  SKIPKV_RETURN_IF_ERROR(tok->Build());
  return tok;
}

Status Tokenizer::Build() {
  const TokenizerSpec& s = spec_;
  const size_t n = s.pieces.size();
  // Piece lookup: unused tokens only fill gaps, so they never shadow a live piece.
  piece_to_id_.clear();
  piece_to_id_.reserve(n * 2);
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < n; ++i) {
      if ((s.types[i] == TokenType::kUnused) != (pass == 1) || s.pieces[i].empty()) continue;
      piece_to_id_.emplace(s.pieces[i], static_cast<TokenId>(i));
    }
  }
  // Decoded surface of every token.
  token_bytes_.assign(n, std::string());
  for (size_t i = 0; i < n; ++i) {
    const std::string& p = s.pieces[i];
    const TokenType t = s.types[i];
    std::string& out = token_bytes_[i];
    if (t == TokenType::kControl || t == TokenType::kUnused) {
      out = p;
    } else if (s.model == TokenizerModel::kByteLevelBpe) {
      if (t == TokenType::kUserDefined || !byte_level::Decode(p, &out)) out = p;
    } else if (t == TokenType::kByte) {
      unsigned v = 0;
      if (p.size() == 6 && std::sscanf(p.c_str(), "<0x%2X>", &v) == 1) {
        out.assign(1, static_cast<char>(v));
      } else {
        out = p;
      }
    } else {
      // SentencePiece: U+2581 is a space.
      for (size_t j = 0; j < p.size(); ++j) {
        if (p.compare(j, 3, "\xE2\x96\x81") == 0) {
          out.push_back(' ');
          j += 2;
        } else {
          out.push_back(p[j]);
        }
      }
    }
  }
  specials_ = std::make_unique<SpecialTokenMatcher>(s);
  if (s.model == TokenizerModel::kByteLevelBpe) {
    if (!pre_) {
      std::string regex = s.pre_regex.empty() ? PreTokenizerRegex(s.pre) : s.pre_regex;
      if (regex.empty()) return InvalidArgument(s.name + ": custom pre-tokenizer without a regex");
      auto pre = PreTokenizer::Create(regex, s.nfc);
      if (!pre.ok()) return pre.status().WithContext(s.name);
      pre_ = std::move(pre).value();
    }
    if (!bpe_) {
      SKIPKV_ASSIGN_OR_RETURN(bpe_, BpeModel::Create(spec_, &piece_to_id_));
    }
  } else {
    SKIPKV_ASSIGN_OR_RETURN(spm_, SpmModel::Create(spec_, &piece_to_id_));
  }
  return Status::Ok();
}

TokenType Tokenizer::type(TokenId id) const { return IsValid(id) ? spec_.types[id] : TokenType::kUndefined; }

const std::string& Tokenizer::Piece(TokenId id) const {
  static const std::string kEmpty;
  return IsValid(id) ? spec_.pieces[id] : kEmpty;
}

std::string_view Tokenizer::TokenBytes(TokenId id) const {
  return IsValid(id) ? std::string_view(token_bytes_[id]) : std::string_view();
}

TokenId Tokenizer::PieceToId(std::string_view piece) const {
  auto it = piece_to_id_.find(std::string(piece));
  return it == piece_to_id_.end() ? kNoToken : it->second;
}

bool Tokenizer::IsEndOfGeneration(TokenId id) const {
  if (!IsValid(id)) return false;
  if (id == spec_.eos || id == spec_.eot) return true;
  if (spec_.types[id] != TokenType::kControl) return false;
  // Turn terminators of the chat formats we know, whatever the configured EOS.
  static const char* const kEnds[] = {"<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|endoftext|>",
                                      "<｜end▁of▁sentence｜>"};
  for (const char* e : kEnds) {
    if (spec_.pieces[id] == e) return true;
  }
  return false;
}

void Tokenizer::EncodeBpeText(std::string_view text, std::vector<TokenId>* out) const {
  std::string normalized;
  if (pre_->Normalize(text, &normalized)) text = normalized;
  std::vector<std::string_view> words;
  words.reserve(text.size() / 3 + 1);
  pre_->Split(text, &words);
  for (std::string_view w : words) bpe_->EncodeWord(w, out);
}

void Tokenizer::EncodeSpmText(std::string_view text, std::vector<TokenId>* out) const {
  spm_->Encode(EscapeSpmSpaces(text), out);
}

std::vector<TokenId> Tokenizer::Encode(std::string_view text, const EncodeOptions& opts) const {
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  if (opts.add_special && spec_.add_bos) out.push_back(spec_.bos);
  std::vector<SpecialTokenMatcher::Fragment> frags;
  if (opts.parse_special && !specials_->empty()) {
    specials_->Split(text, &frags);
  } else if (!text.empty()) {
    frags.push_back({text, kNoToken});
  }
  if (spec_.model == TokenizerModel::kByteLevelBpe) {
    for (const auto& f : frags) {
      if (f.token != kNoToken) {
        out.push_back(f.token);
      } else {
        EncodeBpeText(f.text, &out);
      }
    }
  } else {
    // llama.cpp: the space prefix goes before the first text and before text
    // that follows a special token.
    bool prev_special = true;
    std::string buf;
    for (const auto& f : frags) {
      if (f.token != kNoToken) {
        out.push_back(f.token);
        prev_special = true;
        continue;
      }
      buf.clear();
      if (spec_.add_space_prefix && prev_special) buf.push_back(' ');
      buf.append(f.text);
      EncodeSpmText(buf, &out);
      prev_special = false;
    }
  }
  if (opts.add_special && spec_.add_eos) out.push_back(spec_.eos);
  return out;
}

StatusOr<std::string> Tokenizer::Decode(std::span<const TokenId> ids, const DecodeOptions& opts) const {
  std::string out;
  bool at_start = true;
  const bool strip =
      opts.strip_space_prefix && spec_.model == TokenizerModel::kSentencePiece && spec_.add_space_prefix;
  for (size_t i = 0; i < ids.size(); ++i) {
    const TokenId id = ids[i];
    if (!IsValid(id)) {
      return InvalidArgument("token id " + std::to_string(id) + " at position " + std::to_string(i) +
                             " is outside the vocabulary (0.." + std::to_string(vocab_size() - 1) + ")");
    }
    const TokenType t = spec_.types[id];
    const bool control = t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUnused;
    if (control && opts.skip_special) continue;
    std::string_view b = token_bytes_[id];
    if (!control && at_start) {
      if (strip && t != TokenType::kByte && !b.empty() && b[0] == ' ') b.remove_prefix(1);
      at_start = false;
    }
    out.append(b);
  }
  return out;
}

TokenId Tokenizer::LastTokenId(std::string_view s) const {
  const std::vector<TokenId> ids = Encode(s, {.add_special = false, .parse_special = true});
  return ids.empty() ? kNoToken : ids.back();
}

std::vector<TokenId> Tokenizer::IdsWhoseTextContains(std::string_view needle) const {
  std::vector<TokenId> ids;
  for (TokenId id = 0; id < vocab_size(); ++id) {
    const TokenType t = spec_.types[id];
    if (t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUnused) continue;
    if (token_bytes_[id].find(needle) != std::string::npos) ids.push_back(id);
  }
  return ids;
}

bool Tokenizer::IsR1Distill() const {
  return PieceToId("<｜User｜>") != kNoToken && PieceToId("<｜Assistant｜>") != kNoToken;
}

Status Tokenizer::ApplyR1DistillQwenSpecials() {
  if (spec_.model != TokenizerModel::kByteLevelBpe) {
    return InvalidArgument(spec_.name + ": R1-Distill-Qwen special tokens need a Qwen2 byte-level BPE");
  }
  struct Special {
    TokenId id;
    const char* text;
    TokenType type;
  };
  // As in DeepSeek-R1-Distill-Qwen's tokenizer.json: <think> / </think> are
  // added but not "special" (they stay in decoded text).
  static const Special kR1[] = {
      {151643, "<｜end▁of▁sentence｜>", TokenType::kControl},
      {151644, "<｜User｜>", TokenType::kControl},
      {151645, "<｜Assistant｜>", TokenType::kControl},
      {151646, "<｜begin▁of▁sentence｜>", TokenType::kControl},
      {151647, "<|EOT|>", TokenType::kControl},
      {151648, "<think>", TokenType::kUserDefined},
      {151649, "</think>", TokenType::kUserDefined},
  };
  if (vocab_size() < 151643) {
    return InvalidArgument(spec_.name + ": vocabulary of " + std::to_string(vocab_size()) +
                           " tokens is too small for the R1-Distill-Qwen special tokens (151643..151649)");
  }
  if (vocab_size() < 151650) {
    spec_.pieces.resize(151650);
    spec_.types.resize(151650, TokenType::kUnused);
    if (!spec_.scores.empty()) spec_.scores.resize(151650, 0.0f);
  }
  for (const Special& s : kR1) {
    if (spec_.types[s.id] == TokenType::kNormal || spec_.types[s.id] == TokenType::kByte) {
      return InvalidArgument(spec_.name + ": token " + std::to_string(s.id) + " ('" + spec_.pieces[s.id] +
                             "') is a regular BPE piece; this is not a Qwen2 vocabulary");
    }
  }
  // Another added token with the same text (Qwen3's <think> at 151667) would
  // shadow ours: retire it.
  for (TokenId id = 0; id < vocab_size(); ++id) {
    if (id >= 151643 && id <= 151649) continue;
    for (const Special& s : kR1) {
      if (spec_.pieces[id] == s.text && spec_.types[id] != TokenType::kNormal)
        spec_.types[id] = TokenType::kUnused;
    }
  }
  for (const Special& s : kR1) {
    spec_.pieces[s.id] = s.text;
    spec_.types[s.id] = s.type;
  }
  spec_.bos = 151646;
  spec_.eos = 151643;
  spec_.add_bos = true;
  spec_.add_eos = false;
  if (spec_.pad != kNoToken && spec_.pad >= 151643 && spec_.pad <= 151649) spec_.pad = 151643;
  spec_.eot = kNoToken;
  // The BPE model keeps pointing at piece_to_id_, which Build refills in place.
  return Build();
}

// ---------------------------------------------------------------------------

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tok, DecodeOptions opts)
    : tok_(tok), opts_(opts) {}

void StreamingDetokenizer::Reset() {
  pending_.clear();
  at_start_ = true;
}

std::string StreamingDetokenizer::Push(TokenId id) {
  if (!tok_.IsValid(id)) return {};
  // Reuse Decode's rules (skip / space-prefix strip) on this one token.
  const TokenType t = tok_.type(id);
  const bool control = t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUnused;
  if (control && opts_.skip_special) return {};
  DecodeOptions o = opts_;
  o.strip_space_prefix = opts_.strip_space_prefix && at_start_;
  auto bytes = tok_.Decode(std::span<const TokenId>(&id, 1), o);
  if (!control) at_start_ = false;
  if (!bytes.ok()) return {};
  pending_ += *bytes;
  const size_t keep = utf8::IncompleteTail(pending_);
  std::string out = utf8::Sanitize(std::string_view(pending_).substr(0, pending_.size() - keep));
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StreamingDetokenizer::Flush() {
  std::string out = utf8::Sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace skipkv
