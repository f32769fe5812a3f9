// The method table: per distinct MethodConfig, the validated configuration,
// its shared KV policy and (skipkv) the tokenizer's SkipKV token sets, built
// once and reused by every request that runs it; per sequence, the policy's
// state and the hooks the method brings (spec §6.5: the sentence tracker
// writes the redundant set T into the state's penalty — a typed pointer, no
// downcast). Internal to src/engine.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kv/kv_policy.h"
#include "skipkv/method.h"
#include "kv/sequence_hooks.h"
#include "tokenizer/tokenizer.h"

namespace skipkv {
struct SkipkvTokenSets;
}

namespace skipkv::methods {

// One resolved method (immutable, shared by the sequences running it).
class Method {
 public:
  const MethodConfig& config() const { return config_; }
  const std::shared_ptr<const KvPolicy>& policy() const { return policy_; }
  // The tokenizer's SkipKV token sets (delimiters, keywords); nullptr for a
  // method that neither uses sentences nor steers.
  const SkipkvTokenSets* token_sets() const { return skipkv_sets_.get(); }

  // What a new sequence of this method gets: the policy's per-sequence state
  // (for KvCompressor::Reset) and the method's hooks (nullptr = none).
  struct SequenceParts {
    std::unique_ptr<KvSequenceState> state;
    std::unique_ptr<SequenceHooks> hooks;
  };
  SequenceParts NewSequence() const;

 private:
  friend class MethodTable;
  MethodConfig config_;
  std::shared_ptr<const KvPolicy> policy_;
  std::shared_ptr<const SkipkvTokenSets> skipkv_sets_;  // policies that use_sentences(), and steering
  std::shared_ptr<const std::vector<float>> steer_vector_;  // steering: V of the configured direction
  bool observe_sentences_ = false;  // FullKV with EngineOptions::observe_sentences: tracker, no penalty
};

class MethodTable {
 public:
  // `tokenizer` must outlive the table. `engine_kv` supplies the engine-wide
  // fields (pad policy, trace) that every method inherits.
  // n_layers, d_model: the model's, for the steering vector's shape check.
  // observe_sentences: EngineOptions::observe_sentences.
  MethodTable(const Tokenizer* tokenizer, const KvPolicyConfig& engine_kv, int n_layers, int64_t d_model,
              bool observe_sentences = false)
      : tokenizer_(tokenizer),
        engine_kv_(engine_kv),
        n_layers_(n_layers),
        d_model_(d_model),
        observe_sentences_(observe_sentences) {}

  // The method for `config` with the engine-wide fields applied and an empty
  // name replaced by the label; validated (InvalidArgument naming the field)
  // and created on first use, then shared.
  StatusOr<std::shared_ptr<const Method>> Resolve(const MethodConfig& config);

 private:
  const Tokenizer* tokenizer_;
  KvPolicyConfig engine_kv_;
  int n_layers_;
  int64_t d_model_;
  bool observe_sentences_;
  std::map<std::string, std::shared_ptr<const Method>> methods_;  // key: MethodJson
};

}  // namespace skipkv::methods
