// PLACEHOLDER until the "sentences" branch lands its version (shared contract).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace skipkv {

std::vector<std::string> DefaultSentenceDelimiters();

struct SkipkvConfig {
  float sim_threshold = 0.95f;
  int min_sentence_tokens = 2;
  bool pss_include_prompt = false;
  int64_t max_sentences = 1024;
  std::vector<std::string> delimiters = DefaultSentenceDelimiters();
  bool sentence_scoring = true;
};

Status ValidateSkipkvConfig(const SkipkvConfig& config);

}  // namespace skipkv
