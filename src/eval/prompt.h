// The evaluation prompt (docs/spec.md §2.5): R-KV's instruction around the problem,
// sent either inside the model's chat template (one user turn plus the
// generation prompt; recommended for R1-Distill models, which otherwise may
// skip <think>) or raw with BOS, as R-KV's run_math.py does; or plain: the
// problem text is the whole prompt (the testbed, whose problems end with
// "<think>\n" and which never saw an instruction).
#pragma once

#include <string>

#include "skipkv/presets.h"
#include "util/status.h"

namespace skipkv::eval {

// The styles (declared with the presets, which may carry one: issue 38 row
// 2). kSealChat: the SkipKV authors' SEAL instruction (run_math.py with
// --steering SEAL --use_chat_format, DeepSeek models: one user turn, the BOS
// the template writes removed and added back by the tokenizer, i.e. one BOS)
// inside the chat template. kRaw: R-KV's prompt_template as their run_task
// sends it (no template; the tokenizer adds BOS).
using skipkv::ParsePromptStyle;
using skipkv::PromptStyle;
using skipkv::PromptStyleName;

// R-KV's instruction (run_math.py's prompt_template) with the problem
// inserted; note the space after each blank line and the two spaces before
// \boxed{}, kept as R-KV has them.
std::string RkvInstruction(const std::string& question);

// The SEAL instruction with the problem (surrounding whitespace stripped, as
// the authors' .strip()): "Answer the following questions. You should think
// step-by-step and put your final answer within \boxed{}.\nQuestion: <q>".
std::string SealInstruction(const std::string& question);

// Whether the style's text goes through the chat template.
bool PromptStyleUsesChat(PromptStyle s);

// The prompt text of a problem: RkvInstruction (chat, raw), SealInstruction
// (seal-chat) or the question itself (plain). Chat prompts go through the chat template (Request::chat).
std::string PromptText(PromptStyle style, const std::string& question);

}  // namespace skipkv::eval
