#include "eval/prompt.h"

namespace skipkv::eval {

bool PromptStyleUsesChat(PromptStyle s) { return s == PromptStyle::kChat || s == PromptStyle::kSealChat; }

std::string PromptText(PromptStyle style, const std::string& question) {
  if (style == PromptStyle::kPlain) return question;
  if (style == PromptStyle::kSealChat) return SealInstruction(question);
  return RkvInstruction(question);
}

std::string SealInstruction(const std::string& question) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = question.find_first_not_of(ws);
  const std::string q = b == std::string::npos ? "" : question.substr(b, question.find_last_not_of(ws) - b + 1);
  return "Answer the following questions. You should think step-by-step and put your final answer within "
         "\\boxed{}.\nQuestion: " +
         q;
}

std::string RkvInstruction(const std::string& question) {
  return "You are given a math problem.\n\nProblem: " + question +
         "\n\n You need to solve the problem step by step. First, you need to provide the chain-of-thought, "
         "then "
         "provide the final answer.\n\n Provide the final answer in the format: Final answer:  \\boxed{}";
}

}  // namespace skipkv::eval
