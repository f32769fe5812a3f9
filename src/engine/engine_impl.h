// Engine::Impl: what a loaded engine holds (model, tokenizer, forward pass,
// thread pool, KV policy) and the helpers shared by engine.cpp (loading,
// validation, tokenization), generate.cpp (the step loop) and
// perplexity.cpp. Internal to src/engine.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "methods/method_table.h"
#include "io/model_source.h"
#include "kv/kv_cache.h"
#include "kv/kv_policy.h"
#include "model/forward.h"
#include "model/model.h"
#include "skipkv/engine.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace skipkv {

class Engine::Impl {
 public:
  static StatusOr<std::unique_ptr<Impl>> Create(const EngineOptions& options);

  // Prompt ids of a request: prompt_tokens verbatim, else the tokenized
  // (optionally chat-templated) prompt.
  StatusOr<std::vector<int32_t>> PromptTokens(const Request& request) const;
  // Validates a request whose prompt ids are `prompt` (see Engine::ValidateRequest).
  Status ValidateWithPrompt(const Request& request, const std::vector<int32_t>& prompt) const;

  StatusOr<std::vector<int32_t>> Tokenize(const std::string& text, bool add_bos, bool chat) const;
  // One (optional system +) user turn in the chat template, with the generation prompt.
  StatusOr<std::vector<int32_t>> TokenizeChat(const std::string& system, const std::string& user) const;

  // The cache shape for this model under `policy` and the kv type.
  KvCacheShape CacheShape(const KvPolicy& policy) const;
  // The token fed in pad slots of the padded mode (never attended): the
  // tokenizer's pad, else EOS (as R-KV's run_math.py), else 0.
  int32_t PadToken() const;

  StatusOr<std::vector<GenerationResult>> Generate(std::span<const Request> requests, const TokenCallback& cb,
                                                   const FinishedCallback& on_finished,
                                                   const LogitsCallback& on_logits);
  StatusOr<PerplexityResult> Perplexity(const std::string& text, const PerplexityOptions& options,
                                        const PerplexityCallback& progress);

  EngineOptions options;
  ModelInfo info;
  std::shared_ptr<const ModelSource> source;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ForwardPass> forward;
  // After `model`, so destroyed before it: a guarded decode loop (ThreadPool::RunGuarded)
  // may leave a preempted worker reading the weights after it returns.
  std::unique_ptr<ThreadPool> pool;
  // Methods per distinct configuration; default_method = options.kv's.
  std::unique_ptr<methods::MethodTable> methods;
  std::shared_ptr<const methods::Method> default_method;
  int64_t n_ctx = 0;  // positions a sequence may use
  ChatTemplateKind chat_template = ChatTemplateKind::kRaw;
  SequenceHooksFactory hooks_factory;
};

}  // namespace skipkv
