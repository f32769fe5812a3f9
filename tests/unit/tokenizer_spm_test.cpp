// SentencePiece-style BPE on stories260K's llama2.c tokenizer (tok512.bin):
// loaded directly and through the io layer's GGUF-style import, both must
// match llama2.c's run.c ("Once upon a time" with BOS -> 1 403 407 261 378).
#include <gtest/gtest.h>

#include "io/model_source.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace skipkv::testing {
namespace {

std::string ModelDir() { return std::string(SKIPKV_DATA_DIR) + "/models/stories260K"; }

std::unique_ptr<Tokenizer> LoadTok512() {
  auto tok = Tokenizer::FromLlama2cFile(ModelDir() + "/tok512.bin");
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

TEST(TokenizerSpm, Tok512OnceUponATime) {
  auto tok = LoadTok512();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->model(), TokenizerModel::kSentencePiece);
  EXPECT_EQ(tok->Encode("Once upon a time"), (std::vector<TokenId>{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok->Encode("Once upon a time", {.add_special = false}),
            (std::vector<TokenId>{403, 407, 261, 378}));
  EXPECT_EQ(tok->Piece(403), "▁Once");
  EXPECT_EQ(tok->TokenBytes(403), " Once");
  EXPECT_EQ(tok->type(1), TokenType::kControl);
  EXPECT_EQ(tok->type(3), TokenType::kByte);
  EXPECT_EQ(tok->TokenBytes(3 + 'A'), "A");
  // Empty text: BOS only (no space prefix for empty input).
  EXPECT_EQ(tok->Encode(""), (std::vector<TokenId>{1}));
  EXPECT_TRUE(tok->Encode("", {.add_special = false}).empty());
}

TEST(TokenizerSpm, Tok512DecodeDropsPrefixSpaceAfterBos) {
  auto tok = LoadTok512();
  ASSERT_NE(tok, nullptr);
  const std::vector<TokenId> ids = {1, 403, 407, 261, 378};
  auto text = tok->Decode(ids, {.skip_special = true});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "Once upon a time");
  // Without the strip the encoder's space prefix shows.
  auto raw = tok->Decode(ids, {.skip_special = true, .strip_space_prefix = false});
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(*raw, " Once upon a time");
}

TEST(TokenizerSpm, Tok512ByteFallbackRoundTrips) {
  auto tok = LoadTok512();
  ASSERT_NE(tok, nullptr);
  // A 512-piece vocabulary has no CJK pieces: those characters go through
  // <0xNN> byte tokens (ids byte + 3) and must come back unchanged.
  const std::string text = "Lily saw 猫 and 🐱!\n\tThe end.";
  const std::vector<TokenId> ids = tok->Encode(text);
  EXPECT_EQ(ids.front(), 1);
  int byte_tokens = 0;
  for (TokenId id : ids) byte_tokens += tok->type(id) == TokenType::kByte;
  EXPECT_GE(byte_tokens, 7);  // 猫 (3 bytes) + 🐱 (4 bytes) at least
  auto back = tok->Decode(ids, {.skip_special = true});
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, text);
  // Invalid UTF-8 is tokenized losslessly too.
  const std::string bad = std::string("a\xff\xfe b\xe4\xbd", 7);
  auto bad_back = tok->Decode(tok->Encode(bad, {.add_special = false}));
  ASSERT_TRUE(bad_back.ok());
  EXPECT_EQ(*bad_back, bad);
}

TEST(TokenizerSpm, Tok512ThroughIoImportMatchesDirectLoad) {
  auto direct = LoadTok512();
  ASSERT_NE(direct, nullptr);
  auto src = OpenModel(ModelDir() + "/stories260K.bin", ModelDir() + "/tok512.bin");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  auto imported = Tokenizer::FromModelSource(**src);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  const Tokenizer& t = **imported;
  ASSERT_EQ(t.vocab_size(), direct->vocab_size());
  for (TokenId id = 0; id < t.vocab_size(); ++id) {
    ASSERT_EQ(t.Piece(id), direct->Piece(id)) << id;
    ASSERT_EQ(t.type(id), direct->type(id)) << id;
    ASSERT_EQ(t.spec().scores[id], direct->spec().scores[id]) << id;
  }
  EXPECT_EQ(t.bos(), 1);
  EXPECT_EQ(t.eos(), 2);
  EXPECT_EQ(t.Encode("Once upon a time"), (std::vector<TokenId>{1, 403, 407, 261, 378}));
  // Greedy ids from the reference run decode identically through both.
  const std::vector<TokenId> greedy = {1,   403, 407, 261, 378, 432, 383, 286, 261,
                                       376, 298, 315, 421, 395, 317, 426, 338};
  EXPECT_EQ(*t.Decode(greedy, {.skip_special = true}), *direct->Decode(greedy, {.skip_special = true}));
}

TEST(TokenizerSpm, SpecialTokensParsedOnlyOnRequest) {
  auto file = GgufFile::Open(TokData("ggml-vocab-llama-spm.gguf"));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto tok = Tokenizer::FromGguf((*file)->metadata());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const Tokenizer& t = **tok;
  // "</s>" as text is tokenized as characters unless parse_special.
  const auto plain = t.Encode("Hi</s>", {.add_special = false});
  const auto parsed = t.Encode("Hi</s>", {.add_special = false, .parse_special = true});
  EXPECT_EQ(parsed.back(), 2);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0);
  EXPECT_GT(plain.size(), parsed.size());
  // After a special token the next text gets the space prefix again (llama.cpp).
  const auto after = t.Encode("<s>Hello", {.add_special = false, .parse_special = true});
  EXPECT_EQ(after, (std::vector<TokenId>{1, 15043}));
}

}  // namespace
}  // namespace skipkv::testing
