// Special tokens, the DeepSeek-R1-Distill specials over the Qwen2 BPE, the
// chat templates and the SkipKV token-id helpers.
#include <gtest/gtest.h>

#include <algorithm>

#include "tokenizer/chat_template.h"
#include "tokenizer_test_util.h"

namespace skipkv::testing {
namespace {

// A fresh Qwen2 tokenizer with the R1-Distill specials installed (the shared
// one stays Qwen3-flavoured for the other tests).
std::unique_ptr<Tokenizer> R1Tokenizer(std::string* missing) {
  const std::string path = NpmJson("tokenizer-qwen3");
  if (!std::filesystem::exists(path)) {
    *missing = path + " (npm tokenizer package)";
    return nullptr;
  }
  auto tok = Tokenizer::FromHfJsonFile(path, NpmConfig("tokenizer-qwen3"));
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  if (!tok.ok()) return nullptr;
  Status st = (*tok)->ApplyR1DistillQwenSpecials();
  EXPECT_TRUE(st.ok()) << st.ToString();
  return std::move(tok).value();
}

#define R1_OR_SKIP(var)                   \
  std::string var##_missing;              \
  auto var = R1Tokenizer(&var##_missing); \
  if (var == nullptr) SKIPKV_MISSING_PREREQ(var##_missing)

TEST(TokenizerSpecial, R1DistillPromptIds) {
  R1_OR_SKIP(tok);
  EXPECT_TRUE(tok->IsR1Distill());
  EXPECT_EQ(tok->bos(), 151646);
  EXPECT_EQ(tok->eos(), 151643);
  const std::string prompt = "<｜User｜>What is 1+1?<｜Assistant｜><think>\n";
  EXPECT_EQ(tok->Encode(prompt, {.add_special = true, .parse_special = true}),
            (std::vector<TokenId>{151646, 151644, 3838, 374, 220, 16, 10, 16, 30, 151645, 151648, 198}));
  // Without parse_special the markers are ordinary text.
  const auto plain = tok->Encode(prompt, {.add_special = false, .parse_special = false});
  for (TokenId id : plain) EXPECT_LT(id, 151643);
  // Qwen3's own <think> (151667) no longer shadows R1's.
  EXPECT_EQ(tok->PieceToId("<think>"), 151648);
  EXPECT_EQ(tok->PieceToId("</think>"), 151649);
  EXPECT_TRUE(tok->IsEndOfGeneration(151643));
  EXPECT_FALSE(tok->IsEndOfGeneration(151648));
}

TEST(TokenizerSpecial, R1ChatTemplate) {
  R1_OR_SKIP(tok);
  ASSERT_EQ(DetectChatTemplate(*tok), ChatTemplateKind::kR1Distill);
  const std::vector<ChatMessage> msgs = {{"user", "What is 1+1?"}};
  auto ids = EncodeChat(ChatTemplateKind::kR1Distill, *tok, msgs);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(*ids,
            (std::vector<TokenId>{151646, 151644, 3838, 374, 220, 16, 10, 16, 30, 151645, 151648, 198}));

  // System prompt right after BOS; earlier assistant turns lose their thinking.
  const std::vector<ChatMessage> conv = {{"system", "Be brief."},
                                         {"user", "Hi"},
                                         {"assistant", "<think>\nhmm\n</think>\n\nHello!"},
                                         {"user", "2+2?"}};
  auto text = RenderChat(ChatTemplateKind::kR1Distill, *tok, conv);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text,
            "<｜begin▁of▁sentence｜>Be brief.<｜User｜>Hi<｜Assistant｜>\n\nHello!<｜end▁of▁sentence｜>"
            "<｜User｜>2+2?<｜Assistant｜><think>\n");
  auto no_think = RenderChat(ChatTemplateKind::kR1Distill, *tok, msgs,
                             {.add_generation_prompt = true, .enable_thinking = false});
  ASSERT_TRUE(no_think.ok());
  EXPECT_TRUE(no_think->ends_with("<｜Assistant｜><think>\n</think>"));
  auto no_gen = RenderChat(ChatTemplateKind::kR1Distill, *tok, msgs, {.add_generation_prompt = false});
  ASSERT_TRUE(no_gen.ok());
  EXPECT_EQ(*no_gen, "<｜begin▁of▁sentence｜><｜User｜>What is 1+1?");
  auto bad = RenderChat(ChatTemplateKind::kR1Distill, *tok, std::vector<ChatMessage>{{"narrator", "x"}});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("narrator"), std::string::npos);
}

TEST(TokenizerSpecial, Qwen3IsChatMlAndRawModeAddsNothing) {
  SKIPKV_NPM_TOKENIZER_OR_SKIP(tok, "tokenizer-qwen3");
  EXPECT_FALSE(tok->IsR1Distill());
  EXPECT_EQ(DetectChatTemplate(*tok), ChatTemplateKind::kChatMl);
  auto ids = EncodeChat(ChatTemplateKind::kChatMl, *tok, std::vector<ChatMessage>{{"user", "Hi"}});
  ASSERT_TRUE(ids.ok());
  // <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n
  EXPECT_EQ(*ids, (std::vector<TokenId>{151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198}));
  auto raw = EncodeChat(ChatTemplateKind::kRaw, *tok, std::vector<ChatMessage>{{"user", "Hi <|im_end|>"}});
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(std::count(raw->begin(), raw->end(), 151645), 0);   // raw: specials not parsed
  EXPECT_EQ(tok->Encode("Hi"), (std::vector<TokenId>{13048}));  // Qwen adds no BOS
}

TEST(TokenizerSpecial, SkipKvHelpers) {
  SKIPKV_NPM_TOKENIZER_OR_SKIP(tok, "tokenizer-qwen3");
  // Exact piece lookup in the stored (byte-level) form.
  EXPECT_EQ(tok->PieceToId("ĊĊ"), 271);
  EXPECT_EQ(tok->PieceToId("\n\n"), kNoToken);
  EXPECT_EQ(tok->PieceToId("<|im_start|>"), 151644);
  // Last token of an encoding.
  EXPECT_EQ(tok->LastTokenId("Hello world"), 1879);
  EXPECT_EQ(tok->LastTokenId("\n\n"), 271);
  EXPECT_EQ(tok->LastTokenId("Wait<|im_end|>"), 151645);
  EXPECT_EQ(tok->LastTokenId(""), kNoToken);
  // Every id whose text contains "\n\n", and nothing else.
  const std::vector<TokenId> nn = tok->IdsWhoseTextContains("\n\n");
  EXPECT_TRUE(std::is_sorted(nn.begin(), nn.end()));
  EXPECT_NE(std::find(nn.begin(), nn.end(), 271), nn.end());
  EXPECT_GT(nn.size(), 10u);
  for (TokenId id : nn) EXPECT_NE(tok->TokenBytes(id).find("\n\n"), std::string_view::npos) << id;
  int brute = 0;
  for (TokenId id = 0; id < tok->vocab_size(); ++id) {
    if (tok->type(id) == TokenType::kNormal && tok->TokenBytes(id).find("\n\n") != std::string_view::npos)
      ++brute;
  }
  EXPECT_EQ(static_cast<int>(nn.size()), brute);
}

}  // namespace
}  // namespace skipkv::testing
