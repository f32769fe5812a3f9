// Chat templates, implemented in C++ (no Jinja engine): the logic of
// DeepSeek-R1-Distill's published template (data/templates/*.jinja, the Qwen
// and Llama variants agree for plain messages), ChatML for Qwen vocabularies,
// and a raw mode that sends message text unchanged.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace skipkv {

enum class ChatTemplateKind {
  kRaw,        // contents concatenated; the tokenizer adds BOS if it wants one
  kR1Distill,  // <｜begin▁of▁sentence｜>{system}<｜User｜>...<｜Assistant｜><think>\n
  kChatMl,     // <|im_start|>role\n...<|im_end|>\n
};
const char* ChatTemplateKindName(ChatTemplateKind k);
StatusOr<ChatTemplateKind> ParseChatTemplateKind(const std::string& name);  // "raw", "r1-distill", "chatml"

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (R1 also "tool")
  std::string content;
};

struct ChatOptions {
  bool add_generation_prompt = true;
  // R1-Distill-Qwen's template closes the think block at once ("</think>")
  // when enable_thinking is false *or undefined*; we default to thinking on,
  // which is the generation prompt the model was trained with.
  bool enable_thinking = true;
};

// R1-Distill if the vocabulary has <｜User｜>/<｜Assistant｜>, ChatML if it has
// <|im_start|>/<|im_end|>, else raw.
ChatTemplateKind DetectChatTemplate(const Tokenizer& tok);

// The prompt text. For kR1Distill it starts with the BOS text (the template
// adds BOS itself); encode it with EncodeChat or with
// {add_special = false, parse_special = true}.
StatusOr<std::string> RenderChat(ChatTemplateKind kind, const Tokenizer& tok,
                                 std::span<const ChatMessage> messages, const ChatOptions& opts = {});

// RenderChat + Encode with the right flags: templates parse special tokens
// and carry their own BOS; raw mode adds the tokenizer's BOS and parses no
// special tokens unless `raw_parse_special`.
StatusOr<std::vector<TokenId>> EncodeChat(ChatTemplateKind kind, const Tokenizer& tok,
                                          std::span<const ChatMessage> messages, const ChatOptions& opts = {},
                                          bool raw_parse_special = false);

}  // namespace skipkv
