// The chat templates in C++ and their detection from the vocabulary; see chat_template.h.
#include "tokenizer/chat_template.h"

namespace skipkv {

const char* ChatTemplateKindName(ChatTemplateKind k) {
  switch (k) {
    case ChatTemplateKind::kRaw:
      return "raw";
    case ChatTemplateKind::kR1Distill:
      return "r1-distill";
    case ChatTemplateKind::kChatMl:
      return "chatml";
  }
  return "?";
}

StatusOr<ChatTemplateKind> ParseChatTemplateKind(const std::string& name) {
  for (ChatTemplateKind k :
       {ChatTemplateKind::kRaw, ChatTemplateKind::kR1Distill, ChatTemplateKind::kChatMl}) {
    if (name == ChatTemplateKindName(k)) return k;
  }
  return InvalidArgument("unknown chat template '" + name + "' (expected raw, r1-distill or chatml)");
}

ChatTemplateKind DetectChatTemplate(const Tokenizer& tok) {
  if (tok.IsR1Distill()) return ChatTemplateKind::kR1Distill;
  if (tok.PieceToId("<|im_start|>") != kNoToken && tok.PieceToId("<|im_end|>") != kNoToken) {
    return ChatTemplateKind::kChatMl;
  }
  return ChatTemplateKind::kRaw;
}

namespace {

// DeepSeek-R1-Distill (data/templates/deepseek-ai-DeepSeek-R1-Distill-*.jinja),
// for messages without tool_calls. Line by line:
//   {{bos_token}}{{ns.system_prompt}}   the last system message, right after BOS
//   user       -> '<｜User｜>' + content
//   assistant  -> '<｜Assistant｜>' + (content after the last '</think>') + '<｜end▁of▁sentence｜>'
//                 or, right after tool output, '<｜tool▁outputs▁end｜>' + content + EOS
//   tool       -> '<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + content + '<｜tool▁output▁end｜>'
//                 (later ones: '\n<｜tool▁output▁begin｜>' + content + '<｜tool▁output▁end｜>')
//   end        -> '<｜tool▁outputs▁end｜>' if the last message was tool output, else the
//                 generation prompt '<｜Assistant｜><think>\n' (+ '</think>' when thinking is off).
StatusOr<std::string> RenderR1(const Tokenizer& tok, std::span<const ChatMessage> messages,
                               const ChatOptions& opts) {
  std::string system;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") system = m.content;
  }
  std::string out;
  if (tok.bos() != kNoToken) out += tok.Piece(tok.bos());
  out += system;
  bool is_tool = false, is_output_first = true;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") continue;
    if (m.role == "user") {
      is_tool = false;
      out += "<｜User｜>" + m.content;
    } else if (m.role == "assistant") {
      if (is_tool) {
        out += "<｜tool▁outputs▁end｜>" + m.content + "<｜end▁of▁sentence｜>";
        is_tool = false;
      } else {
        std::string content = m.content;
        const size_t p = content.rfind("</think>");
        if (p != std::string::npos) content = content.substr(p + 8);
        out += "<｜Assistant｜>" + content + "<｜end▁of▁sentence｜>";
      }
    } else if (m.role == "tool") {
      is_tool = true;
      if (is_output_first) {
        out += "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>" + m.content + "<｜tool▁output▁end｜>";
        is_output_first = false;
      } else {
        out += "\n<｜tool▁output▁begin｜>" + m.content + "<｜tool▁output▁end｜>";
      }
    } else {
      return InvalidArgument("chat message role '" + m.role + "' (expected system, user, assistant or tool)");
    }
  }
  if (is_tool) out += "<｜tool▁outputs▁end｜>";
  if (opts.add_generation_prompt && !is_tool) {
    out += "<｜Assistant｜><think>\n";
    if (!opts.enable_thinking) out += "</think>";
  }
  return out;
}

StatusOr<std::string> RenderChatMl(std::span<const ChatMessage> messages, const ChatOptions& opts) {
  std::string out;
  for (const ChatMessage& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool") {
      return InvalidArgument("chat message role '" + m.role + "' (expected system, user, assistant or tool)");
    }
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  if (opts.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!opts.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace

StatusOr<std::string> RenderChat(ChatTemplateKind kind, const Tokenizer& tok,
                                 std::span<const ChatMessage> messages, const ChatOptions& opts) {
  switch (kind) {
    case ChatTemplateKind::kR1Distill:
      return RenderR1(tok, messages, opts);
    case ChatTemplateKind::kChatMl:
      return RenderChatMl(messages, opts);
    case ChatTemplateKind::kRaw: {
      std::string out;
      for (const ChatMessage& m : messages) out += m.content;
      return out;
    }
  }
  return InvalidArgument("unknown chat template kind");
}

StatusOr<std::vector<TokenId>> EncodeChat(ChatTemplateKind kind, const Tokenizer& tok,
                                          std::span<const ChatMessage> messages, const ChatOptions& opts,
                                          bool raw_parse_special) {
  SKIPKV_ASSIGN_OR_RETURN(std::string text, RenderChat(kind, tok, messages, opts));
  if (kind == ChatTemplateKind::kRaw) {
    return tok.Encode(text, {.add_special = true, .parse_special = raw_parse_special});
  }
  // ChatML carries no BOS; R1's BOS is in the text.
  return tok.Encode(text, {.add_special = false, .parse_special = true});
}

}  // namespace skipkv
