// The method table (see methods.h).
#include "engine/methods.h"

#include "kv/policies/skipkv.h"
#include "steer/skipkv_hooks.h"
#include "steer/token_sets.h"

namespace skipkv::engine {

Method::SequenceParts Method::NewSequence() const {
  SequenceParts parts;
  if (policy_->uses_sentences()) {
    const SkipkvConfig& sk = config_.kv.skipkv;
    auto state = std::make_unique<SkipkvSequenceState>(sk.sentence_scoring);
    // Without sentence scoring the tracker still computes T (diagnostics) but
    // writes no penalty: the ablation selects exactly what rkv selects.
    parts.hooks = MakeSkipkvSentenceHooks(sk, skipkv_sets_, sk.sentence_scoring ? &state->penalty : nullptr);
    parts.state = std::move(state);
  } else {
    parts.state = policy_->NewSequenceState();
  }
  return parts;
}

StatusOr<std::shared_ptr<const Method>> MethodTable::Resolve(const MethodConfig& config) {
  MethodConfig c = config;
  c.name = MethodLabel(c);
  c.kv.pad_policy = engine_kv_.pad_policy;
  c.kv.trace_path = engine_kv_.trace_path;
  c.kv.trace_layers = engine_kv_.trace_layers;
  const std::string key = MethodJson(c);
  if (auto it = methods_.find(key); it != methods_.end()) return it->second;
  SKIPKV_RETURN_IF_ERROR(ValidateMethod(c));
  auto m = std::make_shared<Method>();
  SKIPKV_ASSIGN_OR_RETURN(m->policy_, CreateKvPolicy(c.kv));
  if (m->policy_->uses_sentences()) {
    StatusOr<SkipkvTokenSets> sets = BuildSkipkvTokenSets(*tokenizer_, c.kv.skipkv.delimiters);
    if (!sets.ok()) return sets.status().WithContext("method '" + c.name + "': SkipKV token sets");
    m->skipkv_sets_ = std::make_shared<const SkipkvTokenSets>(std::move(sets).value());
  }
  m->config_ = std::move(c);
  methods_.emplace(key, m);
  return std::shared_ptr<const Method>(m);
}

}  // namespace skipkv::engine
