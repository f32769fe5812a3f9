// Decoding: UTF-8 helpers, the byte-level map, exact decode round trips and
// the streaming detokenizer (never a partial or invalid UTF-8 sequence out).
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace skipkv::testing {
namespace {

TEST(TokenizerUtf8, DecodeClassifiesSequences) {
  uint32_t cp;
  size_t len;
  EXPECT_EQ(utf8::Decode("\xE4\xBD\xA0", 3, &cp, &len), utf8::DecodeResult::kOk);
  EXPECT_EQ(cp, 0x4F60u);
  EXPECT_EQ(len, 3u);
  EXPECT_EQ(utf8::Decode("\xE4\xBD", 2, &cp, &len), utf8::DecodeResult::kIncomplete);
  EXPECT_EQ(utf8::Decode("\xC0\x80", 2, &cp, &len), utf8::DecodeResult::kInvalid);          // overlong
  EXPECT_EQ(utf8::Decode("\xED\xA0\x80", 3, &cp, &len), utf8::DecodeResult::kInvalid);      // surrogate
  EXPECT_EQ(utf8::Decode("\xF4\x90\x80\x80", 4, &cp, &len), utf8::DecodeResult::kInvalid);  // > U+10FFFF
  EXPECT_EQ(utf8::Decode("\x80", 1, &cp, &len), utf8::DecodeResult::kInvalid);
  EXPECT_TRUE(utf8::IsValid("héllo 你好 🙂"));
  EXPECT_FALSE(utf8::IsValid("a\xE4\xBD"));
}

TEST(TokenizerUtf8, IncompleteTailAndSanitize) {
  EXPECT_EQ(utf8::IncompleteTail("ab\xF0\x9F\x99"), 3u);
  EXPECT_EQ(utf8::IncompleteTail("ab\xF0\x9F\x99\x82"), 0u);
  EXPECT_EQ(utf8::IncompleteTail("ab\xE4"), 1u);
  EXPECT_EQ(utf8::IncompleteTail("ab\x80"), 0u);  // invalid, not pending
  EXPECT_EQ(utf8::Sanitize("a\xE4\xBD"), "a\xEF\xBF\xBD");
  EXPECT_EQ(utf8::Sanitize("\xE4\xBDz"), "\xEF\xBF\xBDz");  // one U+FFFD per maximal subpart
  EXPECT_EQ(utf8::Sanitize("\xFF\xFE"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8::Sanitize("ok 你好"), "ok 你好");
}

TEST(TokenizerByteLevel, MapIsABijectionOverBytes) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string mapped;
  byte_level::Encode(all, &mapped);
  EXPECT_EQ(byte_level::ByteToUtf8(' '), "Ġ");
  EXPECT_EQ(byte_level::ByteToUtf8('\n'), "Ċ");
  EXPECT_EQ(byte_level::ByteToUtf8('A'), "A");
  EXPECT_TRUE(utf8::IsValid(mapped));
  std::string back;
  ASSERT_TRUE(byte_level::Decode(mapped, &back));
  EXPECT_EQ(back, all);
  std::string junk;
  EXPECT_FALSE(byte_level::Decode("你", &junk));  // not a mapped code point
}

// Concatenates what the streaming detokenizer emits, checking each piece.
std::string StreamAll(const Tokenizer& tok, const std::vector<TokenId>& ids, DecodeOptions opts = {}) {
  StreamingDetokenizer d(tok, opts);
  std::string all;
  for (TokenId id : ids) {
    std::string piece = d.Push(id);
    EXPECT_TRUE(utf8::IsValid(piece)) << "invalid UTF-8 emitted after id " << id;
    all += piece;
  }
  std::string tail = d.Flush();
  EXPECT_TRUE(utf8::IsValid(tail));
  return all + tail;
}

TEST(TokenizerStreaming, MultiByteCharactersSplitOverByteTokens) {
  SKIPKV_NPM_TOKENIZER_OR_SKIP(tok, "tokenizer-qwen3");
  const std::string text = "猫🐱é, naïve 数学 ∑ x² 🙂!";
  // Feed one single-byte token per byte: every multi-byte character arrives
  // in pieces, and nothing may come out until it is complete.
  std::vector<TokenId> ids;
  for (char c : text) {
    const TokenId id = tok->PieceToId(byte_level::ByteToUtf8(static_cast<uint8_t>(c)));
    ASSERT_NE(id, kNoToken);
    ids.push_back(id);
  }
  StreamingDetokenizer d(*tok);
  std::string all;
  int emitted_empty = 0;
  for (TokenId id : ids) {
    std::string piece = d.Push(id);
    EXPECT_TRUE(utf8::IsValid(piece));
    emitted_empty += piece.empty();
    all += piece;
  }
  all += d.Flush();
  EXPECT_EQ(all, text);
  EXPECT_GT(emitted_empty, 10);  // the held-back bytes of 猫 🐱 é ï 数 学 ∑ ² 🙂
  // The real encoding (rare characters split into byte pieces) streams back too.
  EXPECT_EQ(StreamAll(*tok, tok->Encode(text)), text);
}

TEST(TokenizerStreaming, TruncatedAndInvalidBytesBecomeReplacementChars) {
  SKIPKV_NPM_TOKENIZER_OR_SKIP(tok, "tokenizer-qwen3");
  auto byte_id = [&](uint8_t b) { return tok->PieceToId(byte_level::ByteToUtf8(b)); };
  StreamingDetokenizer d(*tok);
  EXPECT_EQ(d.Push(byte_id(0xE4)), "");
  EXPECT_EQ(d.Push(byte_id(0xBD)), "");
  EXPECT_EQ(d.Push(byte_id('a')),
            "\xEF\xBF\xBD"
            "a");  // E4 BD cannot be completed by 'a'
  EXPECT_EQ(d.Push(byte_id(0xF0)), "");
  EXPECT_EQ(d.Flush(), "\xEF\xBF\xBD");  // truncated at the end
  EXPECT_EQ(d.Push(kNoToken), "");       // unknown ids are ignored
  EXPECT_EQ(d.Push(tok->vocab_size()), "");
}

TEST(TokenizerStreaming, RandomIdsNeverYieldInvalidUtf8) {
  SKIPKV_NPM_TOKENIZER_OR_SKIP(tok, "tokenizer-qwen3");
  std::mt19937 rng(1234);
  std::uniform_int_distribution<TokenId> any(0, tok->vocab_size() - 1);
  std::uniform_int_distribution<TokenId> bytes(0, 255);  // Qwen2's first 256 ids are byte pieces
  std::vector<TokenId> ids;
  for (int i = 0; i < 3000; ++i) ids.push_back(i % 3 == 0 ? any(rng) : bytes(rng));
  const std::string out = StreamAll(*tok, ids);
  EXPECT_TRUE(utf8::IsValid(out));
  // Decode (not streaming) returns the exact bytes; sanitised they equal the stream.
  auto exact = tok->Decode(ids);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(utf8::Sanitize(*exact), out);
}

TEST(TokenizerStreaming, SpmStripsOnlyTheFirstSpace) {
  auto tok = Tokenizer::FromLlama2cFile(std::string(SKIPKV_DATA_DIR) + "/models/stories260K/tok512.bin");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const std::vector<TokenId> ids = (*tok)->Encode("Once upon a time, 猫.");
  EXPECT_EQ(StreamAll(**tok, ids, {.skip_special = true}), "Once upon a time, 猫.");
}

TEST(TokenizerDecode, RoundTripOnAllVectorStrings) {
  SKIPKV_NPM_TOKENIZER_OR_SKIP(qwen, "tokenizer-qwen3");
  SKIPKV_NPM_TOKENIZER_OR_SKIP(llama3, "tokenizer-llama3_1");
  for (const char* base : {"ggml-vocab-qwen2.gguf", "ggml-vocab-llama-bpe.gguf", "ggml-vocab-gpt-2.gguf"}) {
    for (const auto& [text, ids] : ReadVectors(base)) {
      for (const Tokenizer* t : {qwen, llama3}) {
        const auto enc = t->Encode(text, {.add_special = false});
        EXPECT_EQ(*t->Decode(enc), text);
        EXPECT_EQ(StreamAll(*t, enc), text);
      }
    }
  }
}

TEST(TokenizerDecode, OutOfRangeIdIsAnError) {
  SKIPKV_NPM_TOKENIZER_OR_SKIP(tok, "tokenizer-qwen3");
  const std::vector<TokenId> ids = {9707, tok->vocab_size() + 5};
  auto r = tok->Decode(ids);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("position 1"), std::string::npos);
  // Special tokens can be skipped.
  const std::vector<TokenId> with_special = {151644, 9707, 151645};
  EXPECT_EQ(*tok->Decode(with_special), "<|im_start|>Hello<|im_end|>");
  EXPECT_EQ(*tok->Decode(with_special, {.skip_special = true}), "Hello");
}

}  // namespace
}  // namespace skipkv::testing
