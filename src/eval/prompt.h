// The evaluation prompt (docs/spec.md §2.5): R-KV's instruction around the problem,
// sent either inside the model's chat template (one user turn plus the
// generation prompt; recommended for R1-Distill models, which otherwise may
// skip <think>) or raw with BOS, as R-KV's run_math.py does; or plain: the
// problem text is the whole prompt (the testbed, whose problems end with
// "<think>\n" and which never saw an instruction).
#pragma once

#include <string>

#include "util/status.h"

namespace skipkv::eval {

enum class PromptStyle { kChat, kRaw, kPlain };

// "chat" / "raw" / "plain".
StatusOr<PromptStyle> ParsePromptStyle(const std::string& s);
const char* PromptStyleName(PromptStyle s);

// R-KV's instruction (run_math.py's prompt_template) with the problem
// inserted; note the space after each blank line and the two spaces before
// \boxed{}, kept as R-KV has them.
std::string RkvInstruction(const std::string& question);

// The prompt text of a problem: RkvInstruction (chat, raw) or the question
// itself (plain). Chat prompts go through the chat template (Request::chat).
std::string PromptText(PromptStyle style, const std::string& question);

}  // namespace skipkv::eval
