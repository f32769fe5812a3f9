// SkipkvConfig defaults and validation (see include/skipkv/kv_config.h).
#include "skipkv/kv_config.h"

#include <cmath>

namespace skipkv {

std::vector<std::string> DefaultSentenceDelimiters() {
  return {"\n", ".\n", ")\n", "\n\n", ".\n\n", ")\n\n"};
}

std::vector<std::string> DefaultNonExecKeywords() {
  return {"Wait", " Wait", "wait", " wait", "Alternatively", " Alternatively", "again", " again"};
}

namespace {

// A delimiter as it would be typed on a command line ("\n" for a newline).
std::string Escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

Status ValidateSkipkvConfig(const SkipkvConfig& config) {
  const std::string p = "skipkv: ";
  if (config.range_min_slots < 1) {
    return InvalidField("range_min_slots", p + "range_min_slots (" + std::to_string(config.range_min_slots) +
                           ") must be at least 1");
  }
  if (!(config.sim_threshold > 0.f && config.sim_threshold <= 1.f)) {
    return InvalidField("sim_threshold", p + "sim_threshold (" + std::to_string(config.sim_threshold) +
                           ") must be in (0, 1]");
  }
  if (config.min_sentence_tokens < 1) {
    return InvalidField("min_sentence_tokens", p + "min_sentence_tokens (" + std::to_string(config.min_sentence_tokens) +
                           ") must be at least 1");
  }
  if (config.max_sentences < 1) {
    return InvalidField(
        "max_sentences", p + "max_sentences (" + std::to_string(config.max_sentences) +
        ") must be at least 1: a new sentence is compared with the last max_sentences ones");
  }
  if (config.delimiters.empty()) {
    return InvalidField("sentence_delimiters", p + "delimiters is empty: at least one sentence delimiter is needed");
  }
  for (size_t i = 0; i < config.delimiters.size(); ++i) {
    if (config.delimiters[i].empty()) {
      return InvalidField("sentence_delimiters", p + "delimiters[" + std::to_string(i) + "] is an empty string");
    }
    for (size_t j = 0; j < i; ++j) {
      if (config.delimiters[j] == config.delimiters[i]) {
        return InvalidField("sentence_delimiters", p + "delimiter \"" + Escaped(config.delimiters[i]) + "\" is listed twice");
      }
    }
  }
  for (size_t i = 0; i < config.nonexec_keywords.size(); ++i) {
    if (config.nonexec_keywords[i].empty()) {
      return InvalidField("nonexec_keywords", p + "nonexec_keywords[" + std::to_string(i) + "] is an empty string");
    }
  }
  return Status::Ok();
}

}  // namespace skipkv
