// Tokenizer from GGUF-style metadata (tokenizer.ggml.*), the form every model
// source is normalised to (GGUF files, imported llama2.c and HF checkpoints).
#include <string>

#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

namespace skipkv {
namespace {

// tokenizer.ggml.pre values of byte-level BPE vocabularies and the regex each
// selects (llama.cpp's names). Qwen2-family vocabularies also NFC-normalise,
// as their Hugging Face tokenizer.json does.
struct PreName {
  const char* name;
  PreTokenizerKind kind;
  bool ignore_merges;
  bool nfc;
};
constexpr PreName kPreNames[] = {
    {"default", PreTokenizerKind::kGpt2, false, false},
    {"gpt-2", PreTokenizerKind::kGpt2, false, false},
    {"gpt2", PreTokenizerKind::kGpt2, false, false},
    {"llama-bpe", PreTokenizerKind::kLlama3, true, false},
    {"llama3", PreTokenizerKind::kLlama3, true, false},
    {"llama-v3", PreTokenizerKind::kLlama3, true, false},
    {"qwen2", PreTokenizerKind::kQwen2, false, true},
    {"deepseek-r1-qwen", PreTokenizerKind::kQwen2, false, true},
};

StatusOr<TokenId> OptionalId(const GgufMetadata& md, const std::string& key, size_t n) {
  SKIPKV_ASSIGN_OR_RETURN(int64_t v, md.GetIntOr(key, -1));
  if (v < 0) return kNoToken;  // absent, or -1 meaning "none" as some converters write
  if (v >= static_cast<int64_t>(n)) {
    return CorruptData(key + " = " + std::to_string(v) + " is outside the vocabulary of " +
                       std::to_string(n) + " tokens");
  }
  return static_cast<TokenId>(v);
}

StatusOr<TokenizerSpec> SpecFromGguf(const GgufMetadata& md, const std::string& name) {
  TokenizerSpec spec;
  spec.name = name;
  SKIPKV_ASSIGN_OR_RETURN(std::string model, md.GetString("tokenizer.ggml.model"));
  if (model == "gpt2") {
    spec.model = TokenizerModel::kByteLevelBpe;
  } else if (model == "llama") {
    spec.model = TokenizerModel::kSentencePiece;
  } else {
    return Unsupported("tokenizer.ggml.model '" + model +
                       "' (supported: 'gpt2' byte-level BPE, 'llama' SentencePiece)");
  }
  SKIPKV_ASSIGN_OR_RETURN(spec.pieces, md.GetStringArray("tokenizer.ggml.tokens"));
  const size_t n = spec.pieces.size();
  if (n == 0) return CorruptData("tokenizer.ggml.tokens is empty");

  if (md.Has("tokenizer.ggml.token_type")) {
    SKIPKV_ASSIGN_OR_RETURN(std::vector<int64_t> types, md.GetIntArray("tokenizer.ggml.token_type"));
    if (types.size() != n) {
      return CorruptData("tokenizer.ggml.token_type has " + std::to_string(types.size()) + " entries for " +
                         std::to_string(n) + " tokens");
    }
    spec.types.resize(n);
    for (size_t i = 0; i < n; ++i) {
      if (types[i] < 0 || types[i] > 6) {
        return CorruptData("tokenizer.ggml.token_type[" + std::to_string(i) +
                           "] = " + std::to_string(types[i]) + " (expected 0..6)");
      }
      spec.types[i] = static_cast<TokenType>(types[i]);
    }
  }
  if (md.Has("tokenizer.ggml.scores")) {
    SKIPKV_ASSIGN_OR_RETURN(spec.scores, md.GetFloatArray("tokenizer.ggml.scores"));
    if (spec.scores.size() != n) {
      return CorruptData("tokenizer.ggml.scores has " + std::to_string(spec.scores.size()) + " entries for " +
                         std::to_string(n) + " tokens");
    }
  }

  if (spec.model == TokenizerModel::kByteLevelBpe) {
    SKIPKV_ASSIGN_OR_RETURN(std::string pre, md.GetStringOr("tokenizer.ggml.pre", "default"));
    const PreName* found = nullptr;
    for (const PreName& p : kPreNames) {
      if (pre == p.name) found = &p;
    }
    if (found == nullptr) {
      std::string known;
      for (const PreName& p : kPreNames) known += std::string(known.empty() ? "" : ", ") + p.name;
      return Unsupported("tokenizer.ggml.pre '" + pre + "' (known: " + known + ")");
    }
    spec.pre = found->kind;
    spec.ignore_merges = found->ignore_merges;
    spec.nfc = found->nfc;
    if (!md.Has("tokenizer.ggml.merges")) {
      return NotFound("tokenizer.ggml.merges is missing (a byte-level BPE vocabulary needs its merges)");
    }
    SKIPKV_ASSIGN_OR_RETURN(std::vector<std::string> merges, md.GetStringArray("tokenizer.ggml.merges"));
    spec.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      // "a b": the first space separates; pieces themselves hold no raw space.
      const size_t sp = merges[i].find(' ', 1);
      if (sp == std::string::npos || sp + 1 >= merges[i].size()) {
        return CorruptData("tokenizer.ggml.merges[" + std::to_string(i) + "] = '" + merges[i] +
                           "' is not of the form 'left right'");
      }
      spec.merges.emplace_back(merges[i].substr(0, sp), merges[i].substr(sp + 1));
    }
  }

  SKIPKV_ASSIGN_OR_RETURN(spec.bos, OptionalId(md, "tokenizer.ggml.bos_token_id", n));
  SKIPKV_ASSIGN_OR_RETURN(spec.eos, OptionalId(md, "tokenizer.ggml.eos_token_id", n));
  SKIPKV_ASSIGN_OR_RETURN(spec.unk, OptionalId(md, "tokenizer.ggml.unknown_token_id", n));
  SKIPKV_ASSIGN_OR_RETURN(spec.pad, OptionalId(md, "tokenizer.ggml.padding_token_id", n));
  SKIPKV_ASSIGN_OR_RETURN(spec.eot, OptionalId(md, "tokenizer.ggml.eot_token_id", n));
  const bool spm = spec.model == TokenizerModel::kSentencePiece;
  if (spm && spec.unk == kNoToken) {
    for (size_t i = 0; i < n && !spec.types.empty(); ++i) {
      if (spec.types[i] == TokenType::kUnknown) {
        spec.unk = static_cast<TokenId>(i);
        break;
      }
    }
  }
  // llama.cpp defaults: SentencePiece adds BOS and a space prefix, BPE neither.
  SKIPKV_ASSIGN_OR_RETURN(spec.add_bos, md.GetBoolOr("tokenizer.ggml.add_bos_token", spm));
  SKIPKV_ASSIGN_OR_RETURN(spec.add_eos, md.GetBoolOr("tokenizer.ggml.add_eos_token", false));
  SKIPKV_ASSIGN_OR_RETURN(spec.add_space_prefix, md.GetBoolOr("tokenizer.ggml.add_space_prefix", spm));
  // The marker tokens are special even when a converter left them "normal".
  for (TokenId id : {spec.bos, spec.eos, spec.eot}) {
    if (id != kNoToken && !spec.types.empty() && spec.types[id] == TokenType::kNormal) {
      spec.types[id] = TokenType::kControl;
    }
  }
  return spec;
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufMetadata& md, const std::string& name) {
  auto spec = SpecFromGguf(md, name);
  if (!spec.ok()) return spec.status().WithContext(name);
  return Create(std::move(spec).value());
}

}  // namespace skipkv
