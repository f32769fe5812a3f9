// The method table (see methods.h).
#include "methods/method_table.h"

#include "kv/policies/skipkv.h"
#include "methods/composite_hooks.h"
#include "sentence/sentence_hooks.h"
#include "steer/steering_hooks.h"
#include "steer/steering_vector.h"
#include "sentence/token_sets.h"

namespace skipkv::methods {

Method::SequenceParts Method::NewSequence() const {
  SequenceParts parts;
  SkipkvSentenceHooks* sentences = nullptr;  // N_o for adaptive steering
  if (policy_->uses_sentences()) {
    const SkipkvConfig& sk = config_.kv.skipkv;
    auto state = std::make_unique<SkipkvSequenceState>(sk.sentence_scoring);
    // Without sentence scoring the tracker still computes T (diagnostics) but
    // writes no penalty: the ablation selects exactly what rkv selects.
    std::unique_ptr<SkipkvSentenceHooks> hooks =
        MakeSkipkvSentenceHooks(sk, skipkv_sets_, sk.sentence_scoring ? &state->penalty : nullptr);
    sentences = hooks.get();
    parts.hooks = std::move(hooks);
    parts.state = std::move(state);
  } else {
    parts.state = policy_->NewSequenceState();
    if (observe_sentences_) {
      // Observation only: no penalty (FullKV evicts nothing anyway), and
      // not the N_o of steering (a full-policy method steers with a fixed
      // strength). The redundant set is updated at every closed sentence.
      const SkipkvConfig& sk = config_.kv.skipkv;  // a full-policy config's skipkv fields are not validated
      parts.hooks = MakeSkipkvSentenceHooks(ValidateSkipkvConfig(sk).ok() ? sk : SkipkvConfig{}, skipkv_sets_,
                                            nullptr, /*observe=*/true);
    }
  }
  if (steer_vector_) {
    // The sentence hooks come first so N_o is current when the steering
    // hooks read it in BeforeForward; both live in the same composite.
    std::function<int64_t()> n_o;
    if (sentences) n_o = [sentences] { return sentences->nonexec_count(); };
    std::vector<std::unique_ptr<SequenceHooks>> hooks;
    hooks.push_back(std::move(parts.hooks));
    hooks.push_back(std::make_unique<SteeringHooks>(config_.steer, steer_vector_,
                                                    EngineLayerForDirection(config_.steer.layer), skipkv_sets_,
                                                    std::move(n_o)));
    parts.hooks = CompositeSequenceHooks::Combine(std::move(hooks));
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
  m->observe_sentences_ = observe_sentences_ && !m->policy_->evicts();
  if (m->policy_->uses_sentences() || c.steer.enabled || m->observe_sentences_) {
    StatusOr<SkipkvTokenSets> sets = BuildSkipkvTokenSets(*tokenizer_, c.kv.skipkv.delimiters, c.kv.skipkv.nonexec_keywords);
    if (!sets.ok()) return sets.status().WithContext("method '" + c.name + "': SkipKV token sets");
    m->skipkv_sets_ = std::make_shared<const SkipkvTokenSets>(std::move(sets).value());
  }
  if (c.steer.enabled) {
    auto ctx = [&](const Status& st) { return st.WithContext("method '" + c.name + "'"); };
    StatusOr<ControlVector> cv = LoadSteeringVector(c.steer.file);
    if (!cv.ok()) return ctx(cv.status());
    Status st = ValidateControlVectorForModel(*cv, c.steer.file, c.steer.layer, n_layers_, d_model_);
    if (!st.ok()) return ctx(st);
    m->steer_vector_ = std::make_shared<const std::vector<float>>(SteeringDirection(*cv, c.steer.layer, c.steer.authors_form));
  }
  m->config_ = std::move(c);
  methods_.emplace(key, m);
  return std::shared_ptr<const Method>(m);
}

}  // namespace skipkv::methods
