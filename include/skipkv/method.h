// Methods: what a request runs. A method is one named configuration — the KV
// policy with its budget, window, interval and (for skipkv) the sentence
// fields — plus the per-sequence hooks that policy brings (skipkv installs
// its sentence tracker itself; steering joins here later). A Request may
// carry its own method (Request::method); unset = the engine's
// (EngineOptions::kv). One batch may mix methods: every sequence has its own
// compressor. The pad policy and the eviction trace stay engine-wide: the
// engine overwrites kv.pad_policy, kv.trace_path and kv.trace_layers of a
// request's method with its own (GenerationResult::method shows what ran).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "skipkv/kv_config.h"  // KvPolicyConfig, SkipkvConfig
#include "skipkv/steering.h"
#include "skipkv/status.h"

namespace skipkv {

struct MethodConfig {
  std::string name;   // label for reports, e.g. "skipkv", "rkv+sentence"; empty = kv.policy
  KvPolicyConfig kv;  // policy, budget, window, interval, skipkv fields, ...
  // Steering (docs/steering.md): SEAL's fixed strength with any policy (the
  // method "seal" is full + fixed), SkipKV's adaptive strength only with a
  // policy that tracks sentences (N_o). Disabled by default.
  SteeringConfig steer;
};

// The label: name, or kv.policy when the name is empty.
std::string MethodLabel(const MethodConfig& method);

// What a method does, as its registered policy and its steering declare it
// (callers ask this instead of comparing policy names).
struct MethodTraits {
  bool evicts = false;             // the policy evicts: budget, window and interval apply (false: full)
  bool uses_sentences = false;     // the policy tracks sentences (skipkv): the sentence fields apply
  bool steers = false;             // steering is enabled
  bool adaptive_steering = false;  // SkipKV's adaptive strength (α0 + γ·N_o), not SEAL's fixed one
};
// The traits of the policy's name (its other fields do not matter; an
// unknown name has none) and, for a method, of its steering.
MethodTraits TraitsOf(const KvPolicyConfig& kv);
MethodTraits TraitsOf(const MethodConfig& method);

// Checks the method (ValidateKvPolicyConfig, which covers the skipkv fields).
Status ValidateMethod(const MethodConfig& method);

// Provenance: the method's fields that matter for its policy, as name/value
// pairs in a fixed order ("name", "policy", "budget", ...; skipkv adds
// "skipkv.sim_threshold", ...; "skipkv.delimiters" is a JSON array of
// strings). Values are plain text (numbers as written by the CLI).
std::vector<std::pair<std::string, std::string>> MethodFields(const MethodConfig& method);

// The same fields as one JSON object (strings quoted and escaped, numbers
// and booleans bare), e.g. for `skipkv run --json`, eval logs and the server.
std::string MethodJson(const MethodConfig& method);

}  // namespace skipkv
