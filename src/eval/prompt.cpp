#include "eval/prompt.h"

namespace skipkv::eval {

StatusOr<PromptStyle> ParsePromptStyle(const std::string& s) {
  if (s == "chat") return PromptStyle::kChat;
  if (s == "raw") return PromptStyle::kRaw;
  if (s == "plain") return PromptStyle::kPlain;
  return InvalidArgument("prompt style '" + s + "' is not one of: chat, raw, plain");
}

const char* PromptStyleName(PromptStyle s) {
  return s == PromptStyle::kChat ? "chat" : s == PromptStyle::kRaw ? "raw" : "plain";
}

std::string PromptText(PromptStyle style, const std::string& question) {
  return style == PromptStyle::kPlain ? question : RkvInstruction(question);
}

std::string RkvInstruction(const std::string& question) {
  return "You are given a math problem.\n\nProblem: " + question +
         "\n\n You need to solve the problem step by step. First, you need to provide the chain-of-thought, "
         "then "
         "provide the final answer.\n\n Provide the final answer in the format: Final answer:  \\boxed{}";
}

}  // namespace skipkv::eval
