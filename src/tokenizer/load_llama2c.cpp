// Tokenizer from a llama2.c tokenizer.bin, and from a ModelSource.
//
// tokenizer.bin (little-endian): uint32 max_token_length, then per token
// float32 score, int32 byte length, the bytes. The token count is not stored:
// entries run to the end of the file. llama2.c's conventions are fixed: id 0
// <unk>, 1 BOS, 2 EOS, byte pieces "<0xNN>", pieces store spaces as ' '
// (converted here to U+2581, SentencePiece's form, as the GGUF importer does).
#include <cstdint>
#include <cstring>
#include <string>

#include "io/model_source.h"
#include "tokenizer/tokenizer.h"
#include "util/mapped_file.h"

namespace skipkv {

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromLlama2c(std::string_view bytes, const std::string& name) {
  auto fail = [&](const std::string& msg) { return CorruptData(name + ": llama2.c tokenizer: " + msg); };
  if (bytes.size() < 4) return fail("file of " + std::to_string(bytes.size()) + " bytes has no header");
  uint32_t max_len;
  std::memcpy(&max_len, bytes.data(), 4);
  TokenizerSpec spec;
  spec.name = name;
  spec.model = TokenizerModel::kSentencePiece;
  size_t off = 4;
  while (off < bytes.size()) {
    const size_t id = spec.pieces.size();
    if (bytes.size() - off < 8)
      return fail("token " + std::to_string(id) + " header truncated at offset " + std::to_string(off));
    float score;
    int32_t len;
    std::memcpy(&score, bytes.data() + off, 4);
    std::memcpy(&len, bytes.data() + off + 4, 4);
    off += 8;
    if (len < 0 || static_cast<size_t>(len) > bytes.size() - off) {
      return fail("token " + std::to_string(id) + " has length " + std::to_string(len) + " but " +
                  std::to_string(bytes.size() - off) + " bytes remain");
    }
    if (static_cast<uint32_t>(len) > max_len) {
      return fail("token " + std::to_string(id) + " is " + std::to_string(len) +
                  " bytes, over max_token_length " + std::to_string(max_len));
    }
    std::string piece;
    for (char c : bytes.substr(off, len)) {
      if (c == ' ') {
        piece.append("\xE2\x96\x81");
      } else {
        piece.push_back(c);
      }
    }
    off += len;
    TokenType type = TokenType::kNormal;
    if (id == 0) {
      type = TokenType::kUnknown;
    } else if (id == 1 || id == 2) {
      type = TokenType::kControl;
    } else if (piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && piece[5] == '>') {
      type = TokenType::kByte;
    }
    spec.pieces.push_back(std::move(piece));
    spec.scores.push_back(score);
    spec.types.push_back(type);
  }
  if (spec.pieces.size() < 3)
    return fail("only " + std::to_string(spec.pieces.size()) + " tokens (need <unk>, BOS, EOS)");
  spec.unk = 0;
  spec.bos = 1;
  spec.eos = 2;
  spec.add_bos = true;
  spec.add_space_prefix = true;
  return Create(std::move(spec));
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromLlama2cFile(const std::string& path) {
  SKIPKV_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  return FromLlama2c(bytes, path);
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromModelSource(const ModelSource& src) {
  if (!src.tokenizer_json_path.empty()) {
    return FromHfJsonFile(src.tokenizer_json_path, src.tokenizer_config_path);
  }
  if (!src.metadata.Has("tokenizer.ggml.model")) {
    return NotFound(src.path +
                    ": the model has no tokenizer (no tokenizer.json and no tokenizer.ggml.* metadata)");
  }
  SKIPKV_ASSIGN_OR_RETURN(auto tok, FromGguf(src.metadata, src.path));
  // R1-Distill-Qwen GGUFs carry their own specials; nothing more to do. A
  // Qwen2 vocabulary whose metadata names the R1 pre-tokenizer but lacks the
  // chat tokens gets them installed.
  auto pre = src.metadata.GetStringOr("tokenizer.ggml.pre", "");
  if (pre.ok() && *pre == "deepseek-r1-qwen" && !tok->IsR1Distill() && tok->vocab_size() >= 151643) {
    SKIPKV_RETURN_IF_ERROR(tok->ApplyR1DistillQwenSpecials());
  }
  return tok;
}

}  // namespace skipkv
