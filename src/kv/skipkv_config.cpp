// PLACEHOLDER until the "sentences" branch lands its version (shared contract).
#include "kv/skipkv_config.h"

namespace skipkv {

std::vector<std::string> DefaultSentenceDelimiters() { return {"\n", ".\n", ")\n", "\n\n", ".\n\n", ")\n\n"}; }

Status ValidateSkipkvConfig(const SkipkvConfig& c) {
  if (!(c.sim_threshold > 0.f && c.sim_threshold <= 1.f))
    return InvalidArgument("skipkv: sim_threshold (" + std::to_string(c.sim_threshold) + ") must be in (0, 1]");
  if (c.min_sentence_tokens < 1)
    return InvalidArgument("skipkv: min_sentence_tokens (" + std::to_string(c.min_sentence_tokens) + ") must be >= 1");
  if (c.max_sentences < 1)
    return InvalidArgument("skipkv: max_sentences (" + std::to_string(c.max_sentences) + ") must be >= 1");
  return Status::Ok();
}

}  // namespace skipkv
