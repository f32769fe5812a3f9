// llama.cpp's tokenizer vectors (tests/data/tokenizer/*.inp/.out, generated
// from the reference Hugging Face tokenizers): every string must encode to the
// reference ids (no BOS, special tokens not parsed) and decode back to itself.
#include <thread>

#include "tokenizer_test_util.h"

namespace skipkv::testing {
namespace {

// Encodes every vector string and checks ids and the decode round trip.
// Returns the number of strings that matched.
int CheckVectors(const Tokenizer& tok, const std::string& base) {
  const auto vectors = ReadVectors(base);
  EXPECT_EQ(vectors.size(), 46u) << base;
  int matched = 0;
  for (const auto& [text, expected] : vectors) {
    const std::vector<TokenId> ids = tok.Encode(text, {.add_special = false, .parse_special = false});
    EXPECT_EQ(ids, expected) << base << ": text '" << text << "'\n got:     " << IdsToString(ids)
                             << "\n expected:" << IdsToString(expected);
    if (ids == expected) ++matched;
    auto back = tok.Decode(ids);
    EXPECT_TRUE(back.ok()) << back.status().ToString();
    if (back.ok()) EXPECT_EQ(*back, text) << base << ": decode round trip";
  }
  return matched;
}

TEST(TokenizerVectors, Qwen2FromTokenizerJson) {
  SKIPKV_NPM_TOKENIZER_OR_SKIP(tok, "tokenizer-qwen3");
  EXPECT_EQ(tok->pre_tokenizer(), PreTokenizerKind::kQwen2);
  EXPECT_TRUE(tok->spec().nfc);
  EXPECT_EQ(CheckVectors(*tok, "ggml-vocab-qwen2.gguf"), 46);
}

TEST(TokenizerVectors, DeepseekR1QwenFromTokenizerJson) {
  SKIPKV_NPM_TOKENIZER_OR_SKIP(tok, "tokenizer-qwen3");
  EXPECT_EQ(CheckVectors(*tok, "ggml-vocab-deepseek-r1-qwen.gguf"), 46);
}

TEST(TokenizerVectors, LlamaBpeFromTokenizerJson) {
  SKIPKV_NPM_TOKENIZER_OR_SKIP(tok, "tokenizer-llama3_1");
  EXPECT_EQ(tok->pre_tokenizer(), PreTokenizerKind::kLlama3);
  EXPECT_TRUE(tok->spec().ignore_merges);
  EXPECT_EQ(tok->bos(), 128000);
  EXPECT_TRUE(tok->add_bos());  // from the TemplateProcessing post-processor
  EXPECT_EQ(CheckVectors(*tok, "ggml-vocab-llama-bpe.gguf"), 46);
}

StatusOr<std::unique_ptr<Tokenizer>> FromGgufFile(const std::string& path) {
  SKIPKV_ASSIGN_OR_RETURN(auto file, GgufFile::Open(path));
  return Tokenizer::FromGguf(file->metadata(), path);
}

TEST(TokenizerVectors, Gpt2FromGguf) {
  auto tok = FromGgufFile(TokData("ggml-vocab-gpt-2.gguf"));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->model(), TokenizerModel::kByteLevelBpe);
  EXPECT_EQ((*tok)->pre_tokenizer(), PreTokenizerKind::kGpt2);
  EXPECT_EQ((*tok)->vocab_size(), 50257);
  EXPECT_EQ(CheckVectors(**tok, "ggml-vocab-gpt-2.gguf"), 46);
}

TEST(TokenizerVectors, LlamaSpmFromGguf) {
  auto tok = FromGgufFile(TokData("ggml-vocab-llama-spm.gguf"));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->model(), TokenizerModel::kSentencePiece);
  EXPECT_EQ((*tok)->vocab_size(), 32000);
  EXPECT_EQ((*tok)->bos(), 1);
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_EQ(CheckVectors(**tok, "ggml-vocab-llama-spm.gguf"), 46);
  // With BOS: llama.cpp / HF prepend id 1.
  EXPECT_EQ((*tok)->Encode("Hello world"), (std::vector<TokenId>{1, 15043, 3186}));
  EXPECT_EQ((*tok)->Encode(""), (std::vector<TokenId>{1}));
}

// The Qwen2 tokenizer from tokenizer.json and the same vocabulary rebuilt as
// GGUF-style metadata (what the model converters write) must agree.
TEST(TokenizerVectors, Qwen2GgufMetadataMatchesTokenizerJson) {
  SKIPKV_NPM_TOKENIZER_OR_SKIP(tok, "tokenizer-qwen3");
  const TokenizerSpec& s = tok->spec();
  GgufMetadata md;
  md.Set("tokenizer.ggml.model", GgufValue::Str("gpt2"));
  md.Set("tokenizer.ggml.pre", GgufValue::Str("qwen2"));
  md.Set("tokenizer.ggml.tokens", GgufValue::StrArr(s.pieces));
  std::vector<int32_t> types;
  for (TokenType t : s.types) types.push_back(static_cast<int32_t>(t));
  md.Set("tokenizer.ggml.token_type", GgufValue::I32Arr(types));
  std::vector<std::string> merges;
  for (const auto& [a, b] : s.merges) merges.push_back(a + " " + b);
  md.Set("tokenizer.ggml.merges", GgufValue::StrArr(merges));
  md.Set("tokenizer.ggml.eos_token_id", GgufValue::U32(151645));
  auto g = Tokenizer::FromGguf(md, "qwen2-metadata");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ((*g)->pre_tokenizer(), PreTokenizerKind::kQwen2);
  EXPECT_EQ(CheckVectors(**g, "ggml-vocab-qwen2.gguf"), 46);
}

// Qwen2's tokenizer.json asks for NFC: a decomposed "é" (e + U+0301) encodes
// like the composed one. Llama-3's has no normalizer and keeps them apart.
TEST(TokenizerVectors, Qwen2NormalisesToNfc) {
  SKIPKV_NPM_TOKENIZER_OR_SKIP(qwen, "tokenizer-qwen3");
  SKIPKV_NPM_TOKENIZER_OR_SKIP(llama3, "tokenizer-llama3_1");
  const std::string composed = "caf\xC3\xA9 na\xC3\xAFve";
  const std::string decomposed = "cafe\xCC\x81 nai\xCC\x88ve";
  EXPECT_EQ(qwen->Encode(decomposed), qwen->Encode(composed));
  EXPECT_EQ(*qwen->Decode(qwen->Encode(decomposed)), composed);
  EXPECT_NE(llama3->Encode(decomposed, {.add_special = false}),
            llama3->Encode(composed, {.add_special = false}));
  EXPECT_EQ(*llama3->Decode(llama3->Encode(decomposed, {.add_special = false})), decomposed);
  // Invalid bytes next to a decomposed sequence: the valid runs are normalised,
  // the bad byte passes through.
  const std::string mixed = decomposed + "\xFF" + decomposed;
  EXPECT_EQ(*qwen->Decode(qwen->Encode(mixed)), composed + "\xFF" + composed);
}

// Encode is const and thread-safe (the word cache is locked): concurrent
// encodes of the vector strings agree with serial ones.
TEST(TokenizerVectors, ConcurrentEncodeMatchesSerial) {
  SKIPKV_NPM_TOKENIZER_OR_SKIP(tok, "tokenizer-qwen3");
  const auto vectors = ReadVectors("ggml-vocab-qwen2.gguf");
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep) {
        for (const auto& [text, expected] : vectors) {
          if (tok->Encode(text, {.add_special = false}) != expected) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace skipkv::testing
