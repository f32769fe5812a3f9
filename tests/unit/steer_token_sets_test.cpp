// SkipKV's token-id sets (spec §1.3, §6.2, A5, A6) on the real Qwen2/Qwen3
// byte-level BPE and on stories260K's SentencePiece tok512, and the
// SkipkvConfig validation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "skipkv/kv_config.h"
#include "sentence/token_sets.h"
#include "tokenizer_test_util.h"

namespace skipkv::testing {
namespace {

std::unique_ptr<Tokenizer> Tok512() {
  auto tok = Tokenizer::FromLlama2cFile(std::string(SKIPKV_DATA_DIR) + "/models/stories260K/tok512.bin");
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

TEST(SkipkvTokenSetsTest, QwenDelimitersKeywordsSplitAndThink) {
  SKIPKV_NPM_TOKENIZER_OR_SKIP(tok, "tokenizer-qwen3");
  const std::vector<std::string> delims = DefaultSentenceDelimiters();
  ASSERT_EQ(delims.size(), 6u);
  auto sets = BuildSkipkvTokenSets(*tok, delims);
  ASSERT_TRUE(sets.ok()) << sets.status().ToString();
  // Each of the six strings is one Qwen2 token; D is their ids, ascending.
  EXPECT_EQ(sets->delimiters, (std::vector<int32_t>{198, 271, 340, 382, 624, 692}));
  for (const std::string& d : delims) {
    const int32_t id = tok->LastTokenId(d);
    EXPECT_EQ(tok->TokenBytes(id), d);
    EXPECT_TRUE(sets->IsDelimiter(id));
  }
  // Tokens that merely contain a newline do not end a sentence (spec §1.3).
  for (const char* s : {":\n", " \n\n", "$\n\n"}) {
    const std::vector<TokenId> ids = tok->Encode(s, {.add_special = false});
    ASSERT_EQ(ids.size(), 1u) << s;
    EXPECT_FALSE(sets->IsDelimiter(ids[0])) << s;
  }
  // All eight keyword variants are single tokens: no text fallback.
  EXPECT_EQ(sets->nonexec, (std::vector<int32_t>{1549, 3783, 11489, 13824, 14190, 32771, 38478, 92014}));
  EXPECT_TRUE(sets->nonexec_text.empty());
  for (const std::string& k : NonExecKeywordVariants()) {
    EXPECT_EQ(tok->TokenBytes(tok->LastTokenId(k)), k);
    EXPECT_TRUE(sets->IsNonExec(tok->LastTokenId(k))) << k;
  }
  EXPECT_FALSE(sets->IsNonExec(tok->LastTokenId(" Waiting")));
  EXPECT_EQ(tok->TokenBytes(sets->think_start), "<think>");
  EXPECT_EQ(tok->TokenBytes(sets->think_end), "</think>");
  // SPLIT: exactly the ids whose bytes contain "\n\n", by brute force over
  // the vocabulary (normal tokens; control tokens have no newlines).
  std::vector<int32_t> brute;
  for (TokenId id = 0; id < tok->vocab_size(); ++id) {
    if (tok->TokenBytes(id).find("\n\n") != std::string_view::npos) brute.push_back(id);
  }
  EXPECT_EQ(sets->split, brute);
  EXPECT_TRUE(sets->IsSplit(271));
  EXPECT_TRUE(sets->IsSplit(382));
  EXPECT_FALSE(sets->IsSplit(198));
  const std::string text = DescribeSkipkvTokenSets(*tok, delims, *sets);
  EXPECT_NE(text.find("\".\\n\\n\" -> [382 \".\\n\\n\"] -> 382"), std::string::npos) << text;
  EXPECT_NE(text.find("\" Wait\" -> [13824 \" Wait\"] id"), std::string::npos) << text;
}

TEST(SkipkvTokenSetsTest, SentencePieceUsesTheLastIdAndTextFallback) {
  auto tok = Tok512();
  ASSERT_TRUE(tok);
  auto sets = BuildSkipkvTokenSets(*tok, DefaultSentenceDelimiters());
  ASSERT_TRUE(sets.ok()) << sets.status().ToString();
  // SPM prefixes a space and has no multi-newline pieces: every delimiter
  // string ends in the "\n" byte token, so D = {<0x0A>}.
  const int32_t nl = tok->PieceToId("<0x0A>");
  ASSERT_GE(nl, 0);
  EXPECT_EQ(sets->delimiters, std::vector<int32_t>{nl});
  EXPECT_TRUE(sets->split.empty());  // no piece holds "\n\n"
  EXPECT_EQ(sets->think_start, -1);
  EXPECT_EQ(sets->think_end, -1);
  // No keyword variant is a single piece of the 512-token vocabulary, so all
  // are matched on text (A6).
  EXPECT_TRUE(sets->nonexec.empty());
  EXPECT_EQ(sets->nonexec_text, NonExecKeywordVariants());

  // A "." delimiter set (the engine test's): the "." piece, as it appears
  // after a word in a story.
  const std::vector<std::string> dot = {"."};
  auto dsets = BuildSkipkvTokenSets(*tok, dot);
  ASSERT_TRUE(dsets.ok());
  ASSERT_EQ(dsets->delimiters.size(), 1u);
  EXPECT_EQ(tok->TokenBytes(dsets->delimiters[0]), ".");
  const std::vector<TokenId> box = tok->Encode("with the box.", {.add_special = false});
  ASSERT_FALSE(box.empty());
  EXPECT_EQ(box.back(), dsets->delimiters[0]);
}

TEST(SkipkvTokenSetsTest, BadDelimitersAreRefused) {
  auto tok = Tok512();
  ASSERT_TRUE(tok);
  EXPECT_EQ(BuildSkipkvTokenSets(*tok, {}).status().code(), StatusCode::kInvalidArgument);
  const std::vector<std::string> empty_one = {".", ""};
  auto st = BuildSkipkvTokenSets(*tok, empty_one).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("empty"), std::string::npos) << st.ToString();
}

TEST(SkipkvConfigTest, ValidationNamesFieldAndValue) {
  SkipkvConfig c;
  EXPECT_TRUE(ValidateSkipkvConfig(c).ok());
  EXPECT_EQ(c.delimiters, DefaultSentenceDelimiters());
  auto expect_bad = [](const SkipkvConfig& bad, const std::string& field, const std::string& value) {
    const Status st = ValidateSkipkvConfig(bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << field;
    EXPECT_NE(st.message().find(field), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find(value), std::string::npos) << st.ToString();
  };
  for (float tau : {0.f, -0.5f, 1.5f}) {
    SkipkvConfig b;
    b.sim_threshold = tau;
    expect_bad(b, "sim_threshold", std::to_string(tau));
  }
  SkipkvConfig nan;
  nan.sim_threshold = std::numeric_limits<float>::quiet_NaN();
  expect_bad(nan, "sim_threshold", "nan");
  SkipkvConfig one;
  one.sim_threshold = 1.f;  // (0, 1]: 1 is allowed
  EXPECT_TRUE(ValidateSkipkvConfig(one).ok());
  SkipkvConfig k;
  k.max_sentences = -3;
  expect_bad(k, "max_sentences", "-3");
  k.max_sentences = 0;
  expect_bad(k, "max_sentences", "0");
  SkipkvConfig m;
  m.min_sentence_tokens = 0;
  expect_bad(m, "min_sentence_tokens", "0");
  SkipkvConfig d;
  d.delimiters.clear();
  expect_bad(d, "delimiters", "empty");
  d.delimiters = {".", ""};
  expect_bad(d, "delimiters[1]", "empty");
  d.delimiters = {"\n", ".", "\n"};
  expect_bad(d, "delimiter", "\\n");
}

}  // namespace
}  // namespace skipkv::testing
