// Bad input gives a clear Status (never a crash): corrupt tokenizer.json,
// missing merges, wrong metadata types, truncated tokenizer.bin. Also the BPE
// and special-token mechanics on small hand-built vocabularies.
#include <gtest/gtest.h>

#include "io/gguf.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace skipkv {
namespace {

// 256 byte pieces (id = byte), then the merge results, then extra tokens.
TokenizerSpec TinyBpe(const std::vector<std::pair<std::string, std::string>>& merges) {
  TokenizerSpec s;
  s.model = TokenizerModel::kByteLevelBpe;
  s.pre = PreTokenizerKind::kGpt2;
  s.name = "tiny";
  for (int b = 0; b < 256; ++b) s.pieces.push_back(byte_level::ByteToUtf8(static_cast<uint8_t>(b)));
  for (const auto& [a, b] : merges) {
    s.pieces.push_back(a + b);
    s.merges.push_back({a, b});
  }
  return s;
}

void ExpectError(const Status& st, StatusCode code, const std::string& fragment) {
  EXPECT_EQ(st.code(), code) << st.ToString();
  EXPECT_NE(st.message().find(fragment), std::string::npos) << "message: " << st.message();
}

TEST(TokenizerBpe, MergesByRankLeftmostFirst) {
  // Ranks: "a a" first, then "aa a".
  auto tok = Tokenizer::Create(TinyBpe({{"a", "a"}, {"aa", "a"}}));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  // "aaa": leftmost "a a" merges first -> "aa" + "a" -> "aaa".
  EXPECT_EQ((*tok)->Encode("aaa"), (std::vector<TokenId>{257}));
  // "aaaa": "a a" at 0 and at 2 -> "aa" "aa"; "aa a" does not apply.
  EXPECT_EQ((*tok)->Encode("aaaa"), (std::vector<TokenId>{256, 256}));
  EXPECT_EQ((*tok)->Encode("aaaaa"), (std::vector<TokenId>{256, 257}));
  // Pre-tokens never merge across: " aa" is 'Ġ' + "aa".
  EXPECT_EQ((*tok)->Encode("a aa"), (std::vector<TokenId>{'a', ' ', 256}));
}

TEST(TokenizerBpe, LongPreTokenIsNotQuadratic) {
  auto tok = Tokenizer::Create(TinyBpe({{"=", "="}, {"==", "=="}}));
  ASSERT_TRUE(tok.ok());
  // One 2 MB pre-token (punctuation run): the heap-based merge handles it.
  const std::string run(2 << 20, '=');
  const auto ids = (*tok)->Encode(run);
  EXPECT_EQ(ids.size(), run.size() / 4);
  EXPECT_EQ(ids.front(), 257);
}

TEST(TokenizerBpe, SpecialTokensLeftmostLongest) {
  TokenizerSpec s = TinyBpe({});
  s.pieces.push_back("<a>");   // 256
  s.pieces.push_back("<a>b");  // 257
  s.types.assign(s.pieces.size(), TokenType::kNormal);
  s.types[256] = TokenType::kControl;
  s.types[257] = TokenType::kUserDefined;
  auto tok = Tokenizer::Create(s);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ((*tok)->Encode("x<a>by<a>", {.parse_special = true}), (std::vector<TokenId>{'x', 257, 'y', 256}));
  EXPECT_EQ((*tok)->Encode("<a>", {.parse_special = false}), (std::vector<TokenId>{'<', 'a', '>'}));
}

TEST(TokenizerErrors, CreateValidatesTheSpec) {
  TokenizerSpec empty;
  ExpectError(Tokenizer::Create(empty).status(), StatusCode::kCorruptData, "empty");

  TokenizerSpec bad_merge = TinyBpe({{"a", "b"}});
  bad_merge.merges.push_back({"x", "yz"});
  ExpectError(Tokenizer::Create(bad_merge).status(), StatusCode::kCorruptData, "merge #1 'x yz'");

  TokenizerSpec bad_types = TinyBpe({});
  bad_types.types.assign(3, TokenType::kNormal);
  ExpectError(Tokenizer::Create(bad_types).status(), StatusCode::kCorruptData, "token types");

  TokenizerSpec bad_bos = TinyBpe({});
  bad_bos.bos = 999;
  ExpectError(Tokenizer::Create(bad_bos).status(), StatusCode::kCorruptData, "bos token id 999");

  TokenizerSpec bad_regex = TinyBpe({});
  bad_regex.pre = PreTokenizerKind::kCustom;
  bad_regex.pre_regex = "([unclosed";
  ExpectError(Tokenizer::Create(bad_regex).status(), StatusCode::kUnsupported, "PCRE2");
}

TEST(TokenizerErrors, CorruptTokenizerJson) {
  ExpectError(Tokenizer::FromHfJson("{ not json", "", "t.json").status(), StatusCode::kCorruptData, "t.json");
  ExpectError(Tokenizer::FromHfJson("[1,2]", "", "t.json").status(), StatusCode::kCorruptData, "JSON object");
  ExpectError(Tokenizer::FromHfJson(R"({"model": {"type": "Unigram"}})", "", "t.json").status(),
              StatusCode::kUnsupported, "Unigram");
  const std::string head =
      R"({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
          "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2})";
  // Missing merges.
  ExpectError(Tokenizer::FromHfJson(head + "}}", "", "t.json").status(), StatusCode::kCorruptData,
              "model.merges");
  // Merges of the wrong shape / type.
  ExpectError(Tokenizer::FromHfJson(head + R"(, "merges": [42]}})", "", "t.json").status(),
              StatusCode::kCorruptData, "merges[0]");
  ExpectError(Tokenizer::FromHfJson(head + R"(, "merges": ["ab"]}})", "", "t.json").status(),
              StatusCode::kCorruptData, "'ab'");
  // A vocab id of the wrong type.
  ExpectError(
      Tokenizer::FromHfJson(R"({"decoder": {"type": "ByteLevel"}, "pre_tokenizer": {"type": "ByteLevel"},
                                       "model": {"type": "BPE", "vocab": {"a": "zero"}, "merges": []}})",
                            "", "t.json")
          .status(),
      StatusCode::kCorruptData, "not an integer id");
  // Wrong JSON type deep inside (pattern not an object) is caught, not thrown.
  ExpectError(
      Tokenizer::FromHfJson(R"({"pre_tokenizer": {"type": "Split", "pattern": 5}, "model": {"type": "BPE"}})",
                            "", "t.json")
          .status(),
      StatusCode::kCorruptData, "t.json");
  // A config naming a token that does not exist.
  ExpectError(Tokenizer::FromHfJson(head + R"(, "merges": ["a b"]}})", R"({"eos_token": "<nope>"})", "t.json")
                  .status(),
              StatusCode::kCorruptData, "<nope>");
  // The well-formed file loads; bytes without a piece (and no unk) are dropped.
  auto ok = Tokenizer::FromHfJson(head + R"(, "merges": ["a b"]}})", "", "t.json");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)->Encode("ab"), (std::vector<TokenId>{2}));
  EXPECT_EQ((*ok)->Encode("abc"), (std::vector<TokenId>{2}));
}

TEST(TokenizerErrors, GgufMetadataProblems) {
  GgufMetadata md;
  ExpectError(Tokenizer::FromGguf(md, "m.gguf").status(), StatusCode::kNotFound, "tokenizer.ggml.model");
  md.Set("tokenizer.ggml.model", GgufValue::U32(3));
  ExpectError(Tokenizer::FromGguf(md, "m.gguf").status(), StatusCode::kCorruptData, "tokenizer.ggml.model");
  md.Set("tokenizer.ggml.model", GgufValue::Str("bert"));
  ExpectError(Tokenizer::FromGguf(md, "m.gguf").status(), StatusCode::kUnsupported, "bert");
  md.Set("tokenizer.ggml.model", GgufValue::Str("gpt2"));
  md.Set("tokenizer.ggml.tokens", GgufValue::F32Arr({1.0f, 2.0f}));
  ExpectError(Tokenizer::FromGguf(md, "m.gguf").status(), StatusCode::kCorruptData, "tokenizer.ggml.tokens");
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.push_back(byte_level::ByteToUtf8(static_cast<uint8_t>(b)));
  md.Set("tokenizer.ggml.tokens", GgufValue::StrArr(pieces));
  // Missing merges.
  ExpectError(Tokenizer::FromGguf(md, "m.gguf").status(), StatusCode::kNotFound, "tokenizer.ggml.merges");
  md.Set("tokenizer.ggml.merges", GgufValue::StrArr({"ab"}));
  ExpectError(Tokenizer::FromGguf(md, "m.gguf").status(), StatusCode::kCorruptData, "merges[0]");
  md.Set("tokenizer.ggml.merges", GgufValue::StrArr({}));
  md.Set("tokenizer.ggml.pre", GgufValue::Str("mystery"));
  ExpectError(Tokenizer::FromGguf(md, "m.gguf").status(), StatusCode::kUnsupported, "mystery");
  md.Set("tokenizer.ggml.pre", GgufValue::Str("qwen2"));
  md.Set("tokenizer.ggml.token_type", GgufValue::I32Arr({1, 1}));
  ExpectError(Tokenizer::FromGguf(md, "m.gguf").status(), StatusCode::kCorruptData, "token_type");
  md.Set("tokenizer.ggml.token_type", GgufValue::I32Arr(std::vector<int32_t>(256, 9)));
  ExpectError(Tokenizer::FromGguf(md, "m.gguf").status(), StatusCode::kCorruptData, "expected 0..6");
  md.Set("tokenizer.ggml.token_type", GgufValue::I32Arr(std::vector<int32_t>(256, 1)));
  md.Set("tokenizer.ggml.bos_token_id", GgufValue::U32(70000));
  ExpectError(Tokenizer::FromGguf(md, "m.gguf").status(), StatusCode::kCorruptData, "bos_token_id");
  md.Set("tokenizer.ggml.bos_token_id", GgufValue::Str("1"));
  ExpectError(Tokenizer::FromGguf(md, "m.gguf").status(), StatusCode::kCorruptData, "bos_token_id");
  md.Set("tokenizer.ggml.bos_token_id", GgufValue::U32(65));
  auto ok = Tokenizer::FromGguf(md, "m.gguf");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)->Encode("hi"), (std::vector<TokenId>{'h', 'i'}));
}

TEST(TokenizerErrors, TruncatedLlama2cTokenizer) {
  ExpectError(Tokenizer::FromLlama2c(std::string_view("\x07\x00", 2), "tok.bin").status(),
              StatusCode::kCorruptData, "no header");
  std::string img("\x07\x00\x00\x00", 4);
  const float score = 0.f;
  const int32_t len = 100;  // more bytes than remain
  img.append(reinterpret_cast<const char*>(&score), 4);
  img.append(reinterpret_cast<const char*>(&len), 4);
  img.append("abc");
  ExpectError(Tokenizer::FromLlama2c(img, "tok.bin").status(), StatusCode::kCorruptData,
              "token 0 has length 100");
  ExpectError(Tokenizer::FromLlama2cFile("/nonexistent/tok.bin").status(), StatusCode::kIoError,
              "/nonexistent");
}

}  // namespace
}  // namespace skipkv
