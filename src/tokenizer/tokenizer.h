// Tokenizer: text <-> token ids for the models skipkv runs.
//
// Two algorithms, selected by the vocabulary:
//   * byte-level BPE (GPT-2, Llama-3, Qwen2 / DeepSeek-R1-Distill-Qwen): text is
//     optionally NFC-normalised, split by a pre-tokenizer regex (PCRE2), every
//     pre-token's bytes are mapped through GPT-2's byte->unicode table and merged
//     by merge rank (tokenizer/bpe.h);
//   * SentencePiece-style BPE (Llama-2, llama2.c): a space prefix, ' ' -> U+2581,
//     one symbol per code point, merges by highest piece score, byte fallback to
//     <0xNN> pieces (tokenizer/spm.h) — llama.cpp's `llm_tokenizer_spm` semantics.
//
// Loaders (GGUF metadata, Hugging Face tokenizer.json, llama2.c tokenizer.bin,
// ModelSource) fill a TokenizerSpec; Tokenizer::Create validates it and builds
// the lookup tables. A Tokenizer is immutable after loading except for the
// explicit special-token installers, and Encode/Decode are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/status.h"

namespace skipkv {

class GgufMetadata;
struct ModelSource;

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

// Token kinds, numbered as GGUF's tokenizer.ggml.token_type (llama.cpp).
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // special tokens: BOS, EOS, <|im_start|>, <｜User｜>; skippable in Decode
  kUserDefined = 4,  // added tokens that are text (<think>); never skipped
  kUnused = 5,
  kByte = 6,  // SPM byte-fallback pieces <0x00>..<0xFF>
};

enum class TokenizerModel { kByteLevelBpe, kSentencePiece };

// Known pre-tokenizer regexes of byte-level BPE vocabularies. kCustom means
// the regex came verbatim from a tokenizer.json we did not recognise.
enum class PreTokenizerKind { kGpt2, kLlama3, kQwen2, kCustom };
const char* PreTokenizerKindName(PreTokenizerKind k);
// The Hugging Face regex of a known kind (kCustom: empty).
const char* PreTokenizerRegex(PreTokenizerKind k);

// Everything that defines a tokenizer, as a loader produces it.
struct TokenizerSpec {
  TokenizerModel model = TokenizerModel::kByteLevelBpe;
  // Byte-level BPE only.
  PreTokenizerKind pre = PreTokenizerKind::kGpt2;
  std::string pre_regex;       // empty: PreTokenizerRegex(pre)
  bool nfc = false;            // NFC-normalise text before pre-tokenizing
  bool ignore_merges = false;  // emit a pre-token directly if it is a whole vocab piece
  std::vector<std::pair<std::string, std::string>> merges;  // by rank, pieces in byte-level space
  // SentencePiece only.
  bool add_space_prefix = true;
  std::vector<float> scores;  // one per token (higher merges first)
  // Both. Pieces: byte-level BPE in GPT-2's mapped alphabet ("Ġthe"), SPM with
  // U+2581 for spaces ("▁the"), control / user-defined tokens as raw text.
  std::vector<std::string> pieces;
  std::vector<TokenType> types;  // empty: all kNormal
  TokenId bos = kNoToken, eos = kNoToken, unk = kNoToken, pad = kNoToken, eot = kNoToken;
  bool add_bos = false;
  bool add_eos = false;
  std::string name;  // provenance for messages, e.g. the file path
};

struct EncodeOptions {
  bool add_special = true;     // add BOS / EOS where the tokenizer asks for them
  bool parse_special = false;  // recognise control / user-defined token text
};

struct DecodeOptions {
  bool skip_special = false;       // drop kControl tokens (BOS, EOS, <｜User｜>, ...)
  bool strip_space_prefix = true;  // SPM: drop the space the encoder prefixed
};

class BpeModel;
class SpmModel;
class PreTokenizer;
class SpecialTokenMatcher;

class Tokenizer {
 public:
  // Validates the spec (sizes, ids in range, merges that name vocab pieces)
  // and builds the tables. Errors are CorruptData naming spec.name.
  static StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerSpec spec);

  // Loaders; each returns a clear Status for a missing or malformed field.
  // GGUF-style metadata: tokenizer.ggml.{model,pre,tokens,token_type,scores,merges,...}.
  static StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufMetadata& md,
                                                       const std::string& name = "gguf");
  // Hugging Face tokenizer.json (+ optional tokenizer_config.json for bos/eos/add_bos).
  static StatusOr<std::unique_ptr<Tokenizer>> FromHfJsonFile(const std::string& tokenizer_json_path,
                                                             const std::string& tokenizer_config_path = "");
  static StatusOr<std::unique_ptr<Tokenizer>> FromHfJson(std::string_view tokenizer_json,
                                                         std::string_view tokenizer_config_json,
                                                         const std::string& name);
  // llama2.c tokenizer.bin (uint32 max_len, then per token: f32 score, i32 len, bytes).
  static StatusOr<std::unique_ptr<Tokenizer>> FromLlama2cFile(const std::string& path);
  static StatusOr<std::unique_ptr<Tokenizer>> FromLlama2c(std::string_view bytes, const std::string& name);
  // A loaded model: its tokenizer.json when it has one, else its metadata.
  static StatusOr<std::unique_ptr<Tokenizer>> FromModelSource(const ModelSource& src);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Text -> ids. Never fails: any byte string is tokenized (invalid UTF-8 goes
  // through byte tokens, or unk where the vocabulary has none).
  std::vector<TokenId> Encode(std::string_view text, const EncodeOptions& opts = {}) const;
  // Ids -> bytes. InvalidArgument for an id outside the vocabulary. The result
  // is the exact bytes of the tokens (it may be invalid UTF-8 for arbitrary ids).
  StatusOr<std::string> Decode(std::span<const TokenId> ids, const DecodeOptions& opts = {}) const;
  // The bytes one token stands for ("Ġthe" -> " the", "<0x0A>" -> "\n",
  // control tokens -> their text). Empty for an out-of-range id.
  std::string_view TokenBytes(TokenId id) const;

  // --- vocabulary ---
  int vocab_size() const { return static_cast<int>(spec_.pieces.size()); }
  TokenizerModel model() const { return spec_.model; }
  PreTokenizerKind pre_tokenizer() const { return spec_.pre; }
  const TokenizerSpec& spec() const { return spec_; }
  TokenId bos() const { return spec_.bos; }
  TokenId eos() const { return spec_.eos; }
  TokenId eot() const { return spec_.eot; }
  TokenId unk() const { return spec_.unk; }
  bool add_bos() const { return spec_.add_bos; }
  bool IsValid(TokenId id) const { return id >= 0 && id < vocab_size(); }
  TokenType type(TokenId id) const;
  // The stored piece (mapped alphabet, see TokenizerSpec::pieces); "" if out of range.
  const std::string& Piece(TokenId id) const;
  // End of generation: EOS, EOT, or any control token a chat template ends a turn with.
  bool IsEndOfGeneration(TokenId id) const;

  // --- helpers for SkipKV and the engine ---
  // Exact piece lookup (stored form, e.g. "Ġthe" or "<think>"); kNoToken if absent.
  TokenId PieceToId(std::string_view piece) const;
  // The id of the last token of Encode(s) (no BOS, special tokens parsed);
  // kNoToken for an empty string.
  TokenId LastTokenId(std::string_view s) const;
  // All ids whose decoded bytes contain `needle` (e.g. "\n\n"), ascending.
  std::vector<TokenId> IdsWhoseTextContains(std::string_view needle) const;

  // --- special tokens ---
  // Installs DeepSeek-R1-Distill-Qwen's special tokens over a Qwen2 BPE:
  // 151643 <｜end▁of▁sentence｜> (EOS), 151644 <｜User｜>, 151645 <｜Assistant｜>,
  // 151646 <｜begin▁of▁sentence｜> (BOS, added), 151647 <|EOT|>, 151648 <think>,
  // 151649 </think>. Other added tokens with the same text stop being matched.
  Status ApplyR1DistillQwenSpecials();
  // True if the vocabulary has DeepSeek-R1-Distill's chat tokens (<｜User｜>, <｜Assistant｜>).
  bool IsR1Distill() const;

 private:
  Tokenizer();
  Status Build();  // (re)builds every derived table from spec_
  void EncodeBpeText(std::string_view text, std::vector<TokenId>* out) const;
  void EncodeSpmText(std::string_view text, std::vector<TokenId>* out) const;

  TokenizerSpec spec_;
  std::unordered_map<std::string, TokenId> piece_to_id_;
  std::vector<std::string> token_bytes_;  // decoded surface of every id
  std::unique_ptr<PreTokenizer> pre_;
  std::unique_ptr<BpeModel> bpe_;
  std::unique_ptr<SpmModel> spm_;
  std::unique_ptr<SpecialTokenMatcher> specials_;
};

// Decodes a token stream incrementally without ever emitting a partial or
// invalid UTF-8 sequence: bytes of an unfinished character are held back
// until the tokens completing it arrive; bytes that can never form a valid
// character become U+FFFD. Flush() emits what is held (an unfinished tail
// becomes U+FFFD). Unknown ids are ignored.
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tok, DecodeOptions opts = {});
  std::string Push(TokenId id);
  std::string Flush();
  void Reset();

 private:
  const Tokenizer& tok_;
  DecodeOptions opts_;
  std::string pending_;
  bool at_start_ = true;  // nothing but control tokens emitted yet (SPM prefix strip)
};

}  // namespace skipkv
