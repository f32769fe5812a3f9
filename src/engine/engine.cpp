// Engine: loading (model, tokenizer, forward pass, KV policy), option and
// request validation, tokenization, and the thin public wrappers over
// Engine::Impl. The step loop lives in generate.cpp, perplexity in
// perplexity.cpp.
#include <algorithm>
#include <string>
#include <thread>

#include "engine/engine_impl.h"
#include "engine/engine_internals.h"
#include "io/embedded/embedded_model.h"
#include "model/model_config.h"
#include "tokenizer/chat_template.h"
#include "util/logging.h"

namespace skipkv {

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kEos: return "eos";
    case FinishReason::kStopString: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kContext: return "context";
    case FinishReason::kCancelled: return "cancelled";
  }
  return "?";
}

StatusOr<KvDType> ParseKvDType(const std::string& s) {
  if (s == "f16") return KvDType::kF16;
  if (s == "f32") return KvDType::kF32;
  return InvalidArgument("unknown KV type '" + s + "' (expected f16 or f32)");
}

StatusOr<PadPolicy> ParsePadPolicy(const std::string& s) {
  if (s == "ragged") return PadPolicy::kRagged;
  if (s == "padded") return PadPolicy::kPadded;
  return InvalidArgument("unknown pad policy '" + s + "' (expected ragged or padded)");
}

namespace {

// Upper bounds keep per-forward buffers (tokens x model width) allocatable.
constexpr int kMaxUbatch = 65536;
constexpr int kMaxBatchTokens = 1 << 20;

Status ValidateEngineOptions(const EngineOptions& o) {
  SKIPKV_RETURN_IF_ERROR(ResolveThreadCount(o.threads, "threads").status());
  if (o.n_ubatch < 1 || o.n_ubatch > kMaxUbatch)
    return InvalidArgument("n_ubatch must be in [1, " + std::to_string(kMaxUbatch) + "], got " +
                           std::to_string(o.n_ubatch));
  if (o.n_batch < o.n_ubatch || o.n_batch > kMaxBatchTokens)
    return InvalidArgument("n_batch (" + std::to_string(o.n_batch) + ") must be in [n_ubatch (" +
                           std::to_string(o.n_ubatch) + "), " + std::to_string(kMaxBatchTokens) + "]");
  if (o.batch_size < 0) return InvalidArgument("batch size must be >= 0 (0 = all requests), got " +
                                               std::to_string(o.batch_size));
  if (o.n_ctx < 0) return InvalidArgument("n_ctx must be >= 0 (0 = the model's), got " + std::to_string(o.n_ctx));
  return ValidateKvPolicyConfig(o.kv);
}

std::string MetadataString(const ModelSource& src, const std::string& key) {
  StatusOr<std::string> v = src.metadata.GetStringOr(key, "");
  return v.ok() ? *v : "";
}

}  // namespace

StatusOr<std::unique_ptr<Engine::Impl>> Engine::Impl::Create(const EngineOptions& options) {
  SKIPKV_RETURN_IF_ERROR(ValidateEngineOptions(options));
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  const std::string path = options.model_path.empty() ? std::string(kEmbeddedModelPath) : options.model_path;
  SKIPKV_ASSIGN_OR_RETURN(std::unique_ptr<ModelSource> src, OpenModel(path, options.tokenizer_path, options.weights));
  InterleaveWeights(*src);  // before the source is shared: read weights are rewritten in place
  impl->source = std::shared_ptr<const ModelSource>(std::move(src));
  SKIPKV_ASSIGN_OR_RETURN(impl->model, Model::Load(impl->source));
  SKIPKV_ASSIGN_OR_RETURN(impl->tokenizer, Tokenizer::FromModelSource(*impl->source));
  const ModelConfig& cfg = impl->model->config();
  if (impl->tokenizer->vocab_size() > cfg.vocab_size) {
    return CorruptData(path + ": the tokenizer has " + std::to_string(impl->tokenizer->vocab_size()) +
                       " tokens but the model only " + std::to_string(cfg.vocab_size) + " embedding rows");
  }
  if (options.n_ctx > cfg.context_length) {
    return InvalidArgument("n_ctx " + std::to_string(options.n_ctx) + " exceeds the model's context length " +
                           std::to_string(cfg.context_length));
  }
  impl->n_ctx = options.n_ctx > 0 ? options.n_ctx : cfg.context_length;
  if (options.chat_template.empty() || options.chat_template == "auto") {
    impl->chat_template = DetectChatTemplate(*impl->tokenizer);
  } else {
    SKIPKV_ASSIGN_OR_RETURN(impl->chat_template, ParseChatTemplateKind(options.chat_template));
  }
  impl->methods = std::make_unique<methods::MethodTable>(impl->tokenizer.get(), options.kv, cfg.n_layers,
                                                        cfg.d_model, options.observe_sentences);
  SKIPKV_ASSIGN_OR_RETURN(impl->default_method,
                          impl->methods->Resolve(MethodConfig{"", options.kv, options.steer}));
  impl->forward = std::make_unique<ForwardPass>(*impl->model);
  SKIPKV_ASSIGN_OR_RETURN(const int threads, ResolveThreadCount(options.threads, "threads"));
  impl->pool = std::make_unique<ThreadPool>(threads);
  // Decode products redo a preempted worker's chunk instead of waiting for it
  // (ThreadPool::RunGuarded). Safe here: Impl destroys the pool before the
  // model whose weights those chunks read.
  impl->pool->SetBackupExecution(true);

  ModelInfo& info = impl->info;
  info.path = path;
  info.name = MetadataString(*impl->source, "general.name");
  if (info.name.empty()) info.name = path;
  info.architecture = ArchitectureName(cfg.arch);
  info.description = cfg.ToString();
  info.n_layers = cfg.n_layers;
  info.d_model = cfg.d_model;
  info.n_heads = cfg.n_heads;
  info.n_kv_heads = cfg.n_kv_heads;
  info.head_dim = cfg.head_dim;
  info.vocab_size = cfg.vocab_size;
  info.context_length = impl->n_ctx;
  info.bos = impl->tokenizer->bos();
  info.eos = impl->tokenizer->eos();
  info.chat_template = ChatTemplateKindName(impl->chat_template);
  SKIPKV_LOG_INFO("engine: %s (%s), %d threads, kv %s budget %lld, weights %s", info.name.c_str(),
                  info.description.c_str(), threads, options.kv.policy.c_str(),
                  static_cast<long long>(options.kv.budget), WeightsLoadDescription(*impl->source).c_str());
  return impl;
}

KvCacheShape Engine::Impl::CacheShape(const KvPolicy& policy) const {
  KvCacheShape shape = model->KvShape(options.kv_type, policy.config().window, false);
  policy.ConfigureCacheShape(&shape);
  return shape;
}

int32_t Engine::Impl::PadToken() const {
  if (tokenizer->spec().pad != kNoToken) return tokenizer->spec().pad;
  if (tokenizer->eos() != kNoToken) return tokenizer->eos();
  return 0;
}

StatusOr<std::vector<int32_t>> Engine::Impl::Tokenize(const std::string& text, bool add_bos, bool chat) const {
  if (!chat) {
    EncodeOptions eo;
    eo.add_special = add_bos;
    return tokenizer->Encode(text, eo);
  }
  return TokenizeChat("", text);
}

StatusOr<std::vector<int32_t>> Engine::Impl::TokenizeChat(const std::string& system, const std::string& user) const {
  // The template carries its own BOS (R1-Distill) or none (ChatML); raw mode
  // sends the text as is with the tokenizer's BOS.
  std::vector<ChatMessage> msgs;
  if (!system.empty()) msgs.push_back({"system", system});
  msgs.push_back({"user", user});
  StatusOr<std::vector<TokenId>> ids = EncodeChat(chat_template, *tokenizer, msgs);
  if (!ids.ok()) return ids.status().WithContext("chat template " + std::string(ChatTemplateKindName(chat_template)));
  return std::move(ids).value();
}

StatusOr<std::vector<int32_t>> Engine::Impl::PromptTokens(const Request& r) const {
  if (!r.prompt_tokens.empty()) return r.prompt_tokens;
  if (r.chat && !r.messages.empty()) {
    std::vector<ChatMessage> msgs;
    for (const ChatTurn& t : r.messages) msgs.push_back({t.role, t.content});
    StatusOr<std::vector<TokenId>> ids = EncodeChat(chat_template, *tokenizer, msgs);
    if (!ids.ok()) return ids.status().WithContext("chat template " + std::string(ChatTemplateKindName(chat_template)));
    return std::move(ids).value();
  }
  if (r.chat) return TokenizeChat(r.system, r.prompt);
  return Tokenize(r.prompt, /*add_bos=*/true, false);
}

Status Engine::Impl::ValidateWithPrompt(const Request& r, const std::vector<int32_t>& prompt) const {
  if (r.method) SKIPKV_RETURN_IF_ERROR(ValidateMethod(*r.method));
  SKIPKV_RETURN_IF_ERROR(ValidateSamplingParams(r.sampling));
  if (r.max_new_tokens < 1)
    return InvalidArgument("max_new_tokens must be >= 1, got " + std::to_string(r.max_new_tokens));
  for (const std::string& s : r.stop) {
    if (s.empty()) return InvalidArgument("stop strings must be non-empty");
  }
  if (prompt.empty()) {
    return InvalidArgument("empty prompt: the tokenizer adds no BOS, so give a prompt text or prompt tokens");
  }
  const int vocab = model->config().vocab_size;
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= vocab) {
      return InvalidArgument("prompt token " + std::to_string(i) + " is " + std::to_string(prompt[i]) +
                             ", outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  for (size_t i = 0; i < r.forced_tokens.size(); ++i) {
    if (r.forced_tokens[i] < 0 || r.forced_tokens[i] >= vocab) {
      return InvalidArgument("forced token " + std::to_string(i) + " is " + std::to_string(r.forced_tokens[i]) +
                             ", outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  // The first generated token is fed at position len(prompt), which must exist.
  if (static_cast<int64_t>(prompt.size()) >= n_ctx) {
    return OutOfRange("prompt of " + std::to_string(prompt.size()) + " tokens does not fit the context of " +
                      std::to_string(n_ctx) + " positions (it must leave room for generated tokens)")
        .WithField("prompt");
  }
  return Status::Ok();
}

// ---- Public wrappers ---------------------------------------------------------------

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  SKIPKV_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, Impl::Create(options));
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const ModelInfo& Engine::info() const { return impl_->info; }
const EngineOptions& Engine::options() const { return impl_->options; }

Status Engine::ValidateRequest(const Request& request) const {
  SKIPKV_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, impl_->PromptTokens(request));
  return impl_->ValidateWithPrompt(request, prompt);
}

StatusOr<std::vector<GenerationResult>> Engine::Generate(std::span<const Request> requests,
                                                         const TokenCallback& on_token,
                                                         const FinishedCallback& on_finished,
                                                         const LogitsCallback& on_logits) {
  return impl_->Generate(requests, on_token, on_finished, on_logits);
}

void EngineInternals::SetSequenceHooks(Engine& engine, SequenceHooksFactory factory) {
  engine.impl_->hooks_factory = std::move(factory);
}

const Tokenizer& EngineInternals::GetTokenizer(const Engine& engine) { return *engine.impl_->tokenizer; }

StatusOr<std::vector<int32_t>> Engine::Tokenize(const std::string& text, bool add_bos, bool chat) const {
  return impl_->Tokenize(text, add_bos, chat);
}

StatusOr<std::string> Engine::Detokenize(std::span<const int32_t> tokens) const {
  DecodeOptions d;
  d.skip_special = true;
  return impl_->tokenizer->Decode(tokens, d);
}

StatusOr<PerplexityResult> Engine::Perplexity(const std::string& text, const PerplexityOptions& options,
                                              const PerplexityCallback& progress) {
  return impl_->Perplexity(text, options, progress);
}

}  // namespace skipkv
