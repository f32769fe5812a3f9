// The configuration of a KV-cache eviction policy and of SkipKV's sentence
// side (public API; self-contained: standard library and include/skipkv/
// only). The policies themselves live in src/kv (interface kv/kv_policy.h);
// the maths is in docs/kv-policies.md and docs/spec.md.
//
// Vocabulary: B = budget = slots per (layer, KV head) left after a
// compression, the recent window included; α = window = observation window
// of queries and the number of most recent slots always kept; Δt = interval
// between compressions, counted on l = tokens processed so far (padded
// prompt + fed tokens, reset per request); Δpad = left-padding slots of a row
// in the padded batch mode.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "skipkv/status.h"
#include "skipkv/types.h"  // PadPolicy

namespace skipkv {

// The paper's six sentence delimiters (spec §1.3, R-KV's newline list):
// "\n", ".\n", ")\n", "\n\n", ".\n\n", ")\n\n". A delimiter's token id is the
// last id of its encoding.
std::vector<std::string> DefaultSentenceDelimiters();

// The non-execution keyword variants of N (spec §6.2): "Wait", " Wait",
// "wait", " wait", "Alternatively", " Alternatively", "again", " again".
std::vector<std::string> DefaultNonExecKeywords();

// How λ of a redundant sentence is chosen when several later sentences
// exceed τ against it (issue 38, row 10).
enum class SkipkvLambdaRule {
  kMax,   // the largest PSS seen (spec A7: order-independent; the default)
  kLast,  // the PSS of the last qualifying pair (the SkipKV authors' code)
};

struct SkipkvConfig {               // spec §6.11
  float sim_threshold = 0.95f;      // τ in (0, 1]: an earlier sentence with PSS > τ is redundant
  int min_sentence_tokens = 2;      // A9, >= 1: shorter spans are not sentences
  bool pss_include_prompt = false;  // A3: prompt sentences take part in the PSS and count in N_o
  int64_t max_sentences = 1024;     // K: a new sentence is compared with at most the last K (>= 1)
  std::vector<std::string> delimiters = DefaultSentenceDelimiters();  // non-empty strings, at least one
  bool sentence_scoring = true;  // false = the R-KV ablation (no penalty)
  // The keywords that make a sentence NONEXEC (N_o, spec §6.2): a keyword
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

struct KvPolicyConfig {
  // One of KnownKvPolicyNames(): full, streaming, h2o (= h2o_rkv), h2o_rkv,
  // h2o_acc, snapkv, rkv, skipkv.
  std::string policy = "full";
  int64_t budget = 1024;    // B: slots kept per (layer, KV head) after a compression, window included
  int window = 8;           // α: observation window (queries) and recent slots always kept
  int64_t interval = 128;   // Δt: compress in the forward that starts at l0 with l0 % Δt == 0, l0 > 0
  float mix_lambda = 0.1f;  // rkv, skipkv (σ): score = λ·importance − (1−λ)·redundancy, λ in [0, 1]
  int pool_kernel = 7;      // max-pool kernel over importance (odd, stride 1, pad kernel/2, −inf padding)
  PadPolicy pad_policy = PadPolicy::kRagged;
  // Padded mode only (issue 38 row 11): false = the slots' own valid flags
  // (pads masked and kept for the whole run); true = the SkipKV authors' code,
  // whose pad mask is the last N entries of the row's padding mask over all
  // tokens seen (transformers' flash-attention mask), see AuthorsPadMask.
  bool pad_mask_seen_tokens = false;
  // h2o_acc: heavy hitters + recent = budget. -1 = automatic: recent = B/2
  // (or B − heavy when only heavy is given), heavy = B − recent.
  int64_t h2o_heavy = -1;
  int64_t h2o_recent = -1;
  int streaming_sinks = 4;  // streaming: first tokens always kept (StreamingLLM attention sinks)
  SkipkvConfig skipkv;      // skipkv: sentence segmentation, PSS threshold τ, ablation switch (spec §6.11)
  // Eviction trace (JSONL, one line per (compression, layer)); empty = off.
  std::string trace_path;
  std::vector<int> trace_layers;  // layers to trace; empty = all
};

// All registered policy names, in the registry's order (aliases included).
std::vector<std::string> KnownKvPolicyNames();

// Checks the configuration before any work starts: the name is registered,
// then the policy's own factory validates the fields it uses. Errors name the
// field, its value and the constraint, e.g. "kv policy 'rkv': budget (8) must
// be larger than the window (8)" or "unknown KV policy 'foo' (known: full, ...)".
Status ValidateKvPolicyConfig(const KvPolicyConfig& config);

}  // namespace skipkv
