// The evaluation prompt (spec §2.5): R-KV's instruction around the problem,
// sent either inside the model's chat template (one user turn plus the
// generation prompt; recommended for R1-Distill models, which otherwise may
// skip <think>) or raw with BOS, as R-KV's run_math.py does.
#pragma once

#include <string>

#include "util/status.h"

namespace skipkv::eval {

enum class PromptStyle { kChat, kRaw };

// "chat" / "raw".
StatusOr<PromptStyle> ParsePromptStyle(const std::string& s);
const char* PromptStyleName(PromptStyle s);

// R-KV's instruction (run_math.py's prompt_template) with the problem
// inserted; note the space after each blank line and the two spaces before
// \boxed{}, kept as R-KV has them.
std::string RkvInstruction(const std::string& question);

}  // namespace skipkv::eval
