// SkipKV's sentence-level settings (docs/spec.md §6.11): the redundancy threshold τ,
// the sentence rules (A3, A9, §1.3) and the cost bound K of the pairwise
// sentence similarity (PSS). The sentence bookkeeping itself lives in
// src/steer/; the kv layer only carries the configuration so that a policy
// configuration (KvPolicyConfig) can hold it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace skipkv {

// The paper's six sentence delimiters (docs/spec.md §1.3, R-KV's newline list):
// "\n", ".\n", ")\n", "\n\n", ".\n\n", ")\n\n". A delimiter's token id is the
// last id of its encoding.
std::vector<std::string> DefaultSentenceDelimiters();

// The non-execution keyword variants of N (docs/spec.md §6.2): "Wait", " Wait",
// "wait", " wait", "Alternatively", " Alternatively", "again", " again".
std::vector<std::string> DefaultNonExecKeywords();

// How λ of a redundant sentence is chosen when several later sentences
// exceed τ against it (issue 38, row 10).
enum class SkipkvLambdaRule {
  kMax,   // the largest PSS seen (spec A7: order-independent; the default)
  kLast,  // the PSS of the last qualifying pair (the SkipKV authors' code)
};

struct SkipkvConfig {               // docs/spec.md §6.11
  float sim_threshold = 0.95f;      // τ in (0, 1]: an earlier sentence with PSS > τ is redundant
  int min_sentence_tokens = 2;      // A9, >= 1: shorter spans are not sentences
  bool pss_include_prompt = false;  // A3: prompt sentences take part in the PSS and count in N_o
  int64_t max_sentences = 1024;     // K: a new sentence is compared with at most the last K (>= 1)
  std::vector<std::string> delimiters = DefaultSentenceDelimiters();  // non-empty strings, at least one
  bool sentence_scoring = true;  // false = the R-KV ablation (no penalty)
  // The keywords that make a sentence NONEXEC (N_o, docs/spec.md §6.2): a keyword
  // that encodes to one token matches by id, a longer one on the decoded text.
  std::vector<std::string> nonexec_keywords = DefaultNonExecKeywords();
  // Parity switches (issue 38; docs/kv-policies.md, "Parity with the authors' code"):
  int range_min_slots = 1;   // row 9: penalise a range only when >= this many of its slots are cached (authors: 2)
  bool lambda_last = false;  // row 10: λ = the last qualifying pair's PSS, not the largest (authors: true)
  SkipkvLambdaRule lambda_rule() const { return lambda_last ? SkipkvLambdaRule::kLast : SkipkvLambdaRule::kMax; }
};

// InvalidArgument naming the field, its value and the constraint, e.g.
// "skipkv: sim_threshold (1.5) must be in (0, 1]".
Status ValidateSkipkvConfig(const SkipkvConfig& config);

}  // namespace skipkv
