// The generation loop; see batcher.h.
#include "engine/batcher.h"

#include <algorithm>
#include <utility>

#include "methods/composite_hooks.h"
#include "util/check.h"

namespace skipkv::engine {
namespace {

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
bool IsActive(SeqState s) { return s == SeqState::kPrefill || s == SeqState::kDecode; }

}  // namespace

Batcher::Batcher(Engine::Impl& engine, const BatcherOptions& options, const TokenCallback& cb,
                 const LogitsCallback* on_logits)
    : e_(engine), opts_(options), cb_(cb), on_logits_(on_logits) {}

Status Batcher::OpenTrace() {
  if (!e_.options.kv.trace_path.empty() && !trace_) {
    SKIPKV_ASSIGN_OR_RETURN(trace_, KvTraceWriter::Open(e_.options.kv.trace_path));
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Sequence>> Batcher::Prepare(const Request& request, size_t index) {
  auto s = std::make_unique<Sequence>();
  s->index = index;
  s->request = request;
  SKIPKV_ASSIGN_OR_RETURN(s->prompt, e_.PromptTokens(request));
  SKIPKV_RETURN_IF_ERROR(e_.ValidateWithPrompt(request, s->prompt));
  if (request.method) {
    SKIPKV_ASSIGN_OR_RETURN(s->method, e_.methods->Resolve(*request.method));
  } else {
    s->method = e_.default_method;
  }
  s->kv_reserve_bytes = WorstCaseKvBytes(*s);
  return s;
}

size_t Batcher::WorstCaseKvBytes(const Sequence& s) const {
  const int64_t stream = s.stream_len();
  // The last sampled token is never fed, and generation stops at the context.
  const int64_t needed = std::min<int64_t>(stream + s.request.max_new_tokens, s.pad_len + e_.n_ctx);
  const int64_t cap = s.method->policy()->CacheCapacity(stream);
  const int64_t slots = cap == SequenceKvCache::kUnbounded ? needed : std::min(cap, needed);
  const KvCacheShape shape = e_.CacheShape(*s.method->policy());
  const size_t elem = shape.dtype == KvDType::kF16 ? 2 : 4;
  return static_cast<size_t>(slots) * shape.n_layers * shape.n_kv_heads * shape.head_dim * elem * 2;
}

void Batcher::Add(std::unique_ptr<Sequence> s) {
  s->t0 = Clock::now();
  seqs_.push_back(std::move(s));
}

// Allocates the sequence's cache (the policy's capacity for its padded
// prompt) and its per-request state.
Status Batcher::Start(Sequence& s) {
  const Request& r = s.request;
  const int64_t stream = s.stream_len();
  // The last sampled token is never fed, so a request needs at most
  // stream + max_new_tokens − 1 slots, and generation stops at the context
  // (position l − pad_len = n_ctx), so a huge max_new_tokens never sizes a cache.
  const int64_t needed = std::min<int64_t>(stream + r.max_new_tokens, s.pad_len + e_.n_ctx);
  const KvPolicy& policy = *s.method->policy();
  int64_t cap = policy.CacheCapacity(stream);
  int64_t initial, max_cap;
  if (cap == SequenceKvCache::kUnbounded && !opts_.allocate_worst_case) {
    initial = stream + std::min<int64_t>(r.max_new_tokens, 512);  // grows geometrically beyond
    max_cap = SequenceKvCache::kUnbounded;
  } else {
    initial = max_cap = cap == SequenceKvCache::kUnbounded ? needed : std::min(cap, needed);
  }
  s.cache = std::make_unique<SequenceKvCache>(e_.CacheShape(policy), initial, max_cap);
  s.compressor = std::make_unique<KvCompressor>(s.method->policy(), static_cast<int64_t>(s.index), trace_);
  methods::Method::SequenceParts parts = s.method->NewSequence();
  SKIPKV_RETURN_IF_ERROR(s.compressor->Reset(s.pad_len, std::move(parts.state)));
  s.result.method = s.method->config();
  s.sampler.emplace(r.sampling);
  DecodeOptions dopts;
  dopts.skip_special = true;
  s.detok.emplace(*e_.tokenizer, dopts);
  // Prime the detokenizer with the prompt so the first generated piece is
  // decoded in context (SentencePiece drops a leading space only right
  // after BOS; a character may straddle the prompt's end).
  for (int32_t t : s.prompt) (void)s.detok->Push(t);
  // Teacher-forced requests ignore stop strings (they end with their forced tokens).
  s.stop = StopMatcher(r.forced_tokens.empty() ? r.stop : std::vector<std::string>{});
  s.history = s.prompt;
  s.history.reserve(static_cast<size_t>(std::min<int64_t>(s.prompt.size() + r.max_new_tokens, e_.n_ctx)));
  s.result.index = s.index;
  s.result.prompt_tokens = s.prompt;
  s.result.timings.prompt_tokens = static_cast<int64_t>(s.prompt.size());
  s.result.timings.queue_ms = MsBetween(s.t0, Clock::now());
  s.state = SeqState::kPrefill;
  {
    // The method's own hooks first (they update T before a compressing
    // forward), then the app's.
    std::vector<std::unique_ptr<SequenceHooks>> hooks;
    hooks.push_back(std::move(parts.hooks));
    if (e_.hooks_factory) hooks.push_back(e_.hooks_factory(s.index, r));
    s.hooks = methods::CompositeSequenceHooks::Combine(std::move(hooks));
    if (s.hooks) {
      SequenceStart start;
      start.index = s.index;
      start.prompt = s.prompt;
      start.pad_len = s.pad_len;
      start.d_model = e_.model->config().d_model;
      start.compressor = s.compressor.get();
      s.hooks->OnStart(start);
    }
  }
  return Status::Ok();
}

void Batcher::BuildStepInput(Sequence& s, const StepItem& item, SequenceInput* in) {
  s.in_tok.clear();
  s.in_pos.clear();
  s.in_gen.clear();
  s.in_valid.clear();
  if (item.prefill) {
    const int32_t pad = e_.PadToken();
    for (int64_t j = item.begin; j < item.begin + item.count; ++j) {
      const bool real = j >= s.pad_len;
      s.in_tok.push_back(real ? s.prompt[j - s.pad_len] : pad);
      s.in_pos.push_back(real ? static_cast<int32_t>(j - s.pad_len) : 0);
      s.in_gen.push_back(static_cast<int32_t>(j));
      s.in_valid.push_back(real ? 1 : 0);
    }
  } else {
    s.in_tok.push_back(s.next);
    s.in_pos.push_back(static_cast<int32_t>(s.l - s.pad_len));
    s.in_gen.push_back(static_cast<int32_t>(s.l));
    s.in_valid.push_back(1);
  }
  in->cache = s.cache.get();
  in->tokens = s.in_tok;
  in->pos = s.in_pos;
  in->gen_pos = s.in_gen;
  in->valid = s.in_valid;
  in->logits = (!item.prefill || item.completes_prefill) ? LogitsMode::kLast : LogitsMode::kNone;
}

void Batcher::Emit(Sequence& s, int32_t token, const std::string& text) {
  s.result.text += text;
  if (!cb_) return;
  if (token < 0 && text.empty()) return;
  if (!cb_(TokenEvent{s.index, token, text}) && token >= 0 && s.state != SeqState::kFinished) {
    Finish(s, FinishReason::kCancelled);
  }
}

void Batcher::Accept(Sequence& s, int32_t token) {
  const Request& r = s.request;
  const bool forced = !r.forced_tokens.empty();
  if (!r.ignore_eos && !forced && e_.tokenizer->IsEndOfGeneration(token)) {
    if (s.hooks) s.hooks->OnToken(token, {});
    Finish(s, FinishReason::kEos);
    return;
  }
  s.result.tokens.push_back(token);
  s.history.push_back(token);
  const std::string piece = s.detok->Push(token);
  if (s.hooks) s.hooks->OnToken(token, piece);
  const std::string text = s.stop.Push(piece);
  s.next = token;
  Emit(s, token, text);
  if (s.state == SeqState::kFinished) return;  // cancelled by the callback
  if (s.stop.matched()) {
    s.result.stop_string = s.stop.matched_string();
    Finish(s, FinishReason::kStopString);
  } else if (static_cast<int64_t>(s.result.tokens.size()) >= r.max_new_tokens ||
             (forced && s.result.tokens.size() >= r.forced_tokens.size())) {
    Finish(s, FinishReason::kLength);
  } else if (s.l - s.pad_len >= e_.n_ctx) {
    Finish(s, FinishReason::kContext);  // the token would be fed at position l − Δpad
  }
}

void Batcher::Finish(Sequence& s, FinishReason why) {
  const bool started = s.cache != nullptr;
  s.state = SeqState::kFinished;
  s.result.finish = why;
  s.result.index = s.index;
  GenerationTimings& t = s.result.timings;
  t.total_ms = MsBetween(s.t0, Clock::now());
  if (!started) return;  // cancelled or failed while waiting: nothing was allocated
  if (why != FinishReason::kStopString) {
    std::string tail = s.stop.Push(s.detok->Flush());
    tail += s.stop.Flush();
    if (!tail.empty()) {
      s.result.text += tail;
      if (cb_) (void)cb_(TokenEvent{s.index, -1, tail});
    }
  }
  t.decode_tokens_per_s = t.decode_ms > 0 ? t.decode_steps / (t.decode_ms / 1000.0) : 0.0;
  const KvCompressionStats& cs = s.compressor->stats();
  KvStats& kv = s.result.kv;
  kv.peak_live_bytes = std::max(cs.peak_live_kv_bytes, s.cache->LiveKvBytes());
  kv.final_live_bytes = s.cache->LiveKvBytes();
  kv.allocated_bytes = s.cache->AllocatedKvBytes();
  kv.peak_slots = std::max(cs.peak_slots, s.cache->size(0));
  kv.final_slots = s.cache->size(0);
  kv.compressions = cs.compressions;
  kv.slots_evicted = cs.slots_evicted;
  kv.compress_ms = cs.seconds * 1000.0;
  kv.pad_len = s.pad_len;
  kv.effective_budget = cs.effective_budget;
  kv.penalized_evicted = cs.penalized_evicted;
  kv.penalized_evicted_per_compression = cs.penalized_evicted_per_compression;
  finished_compressions_ += cs.compressions;
  if (s.hooks) {
    s.result.diagnostics = s.hooks->Diagnostics();
    s.hooks.reset();
  }
  s.cache.reset();  // frees the slot memory for the next admitted request
}

void Batcher::Fail(Sequence& s, const Status& st) {
  // Its partial state is dropped unread (a failed Start may have left it half built).
  s.error = st;
  s.hooks.reset();
  s.cache.reset();
  Finish(s, FinishReason::kCancelled);
}

void Batcher::InstallHooks(const StepPlan& plan, ForwardBatch* batch) {
  hooked_.clear();
  int64_t row = 0;
  bool residual = false, final_hidden = false;
  for (const StepItem& item : plan.items) {
    Sequence& s = *seqs_[item.seq];
    if (s.hooks) {
      SequenceStep step;
      step.l_before = s.l;
      step.l_after = s.l + item.count;
      step.kind = !item.prefill            ? ForwardKind::kDecode
                  : item.completes_prefill ? ForwardKind::kPrefill
                                           : ForwardKind::kPrefillPartial;
      step.compresses = s.compressor->Scheduled(step.l_before, step.l_after, step.kind);
      s.hooks->BeforeForward(step);
      hooked_.push_back({s.hooks.get(), row, item.count});
      // Layers 0..n_layers (n_layers: the hook after the last layer).
      for (int layer = 0; layer <= e_.model->config().n_layers && !residual; ++layer) {
        residual = s.hooks->WantsResidual(layer);
      }
      final_hidden = final_hidden || s.hooks->WantsFinalHidden();
    }
    row += item.count;
  }
  if (hooked_.empty()) return;
  const int64_t d = e_.model->config().d_model;
  if (residual) {
    batch->residual_hook = [this, d](int layer, std::span<const BatchToken> tokens, float* hidden) {
      for (const HookedRows& h : hooked_) {
        if (h.hooks->WantsResidual(layer)) {
          h.hooks->OnResidual(layer, tokens.subspan(h.first, h.count), hidden + h.first * d);
        }
      }
    };
  }
  if (final_hidden) {
    batch->final_hidden_hook = [this, d](std::span<const BatchToken> tokens, const float* hidden) {
      for (const HookedRows& h : hooked_) {
        if (h.hooks->WantsFinalHidden())
          h.hooks->OnFinalHidden(tokens.subspan(h.first, h.count), hidden + h.first * d);
      }
    };
  }
}

void Batcher::Reap() {
  auto mid = std::stable_partition(seqs_.begin(), seqs_.end(), [](const std::unique_ptr<Sequence>& s) {
    return s->state != SeqState::kFinished;
  });
  for (auto it = mid; it != seqs_.end(); ++it) finished_.push_back(std::move(*it));
  seqs_.erase(mid, seqs_.end());
}

StatusOr<bool> Batcher::Step() {
  SchedulerLimits limits;
  limits.n_ubatch = e_.options.n_ubatch;
  limits.n_batch = e_.options.n_batch;
  limits.max_active = opts_.padded ? 0 : opts_.max_active;
  limits.grouped = opts_.padded;
  limits.kv_memory = opts_.kv_memory;
  limits.mixed = opts_.mix_prefill_decode && !opts_.padded;
  auto refresh = [&] {
    views_.resize(seqs_.size());
    for (size_t i = 0; i < seqs_.size(); ++i) {
      const Sequence& s = *seqs_[i];
      views_[i] = {s.state, s.stream_len(), s.prefilled, s.group, s.kv_reserve_bytes};
    }
  };
  refresh();
  bool started_any = false;
  for (size_t i : Admit(views_, limits)) {
    Status st = Start(*seqs_[i]);
    if (!st.ok()) {
      if (!opts_.isolate_errors) return st.WithContext("request " + std::to_string(seqs_[i]->index));
      Fail(*seqs_[i], st);
    }
    started_any = true;
  }
  // Caches are allocated at Start and never grow past their reservation when
  // allocate_worst_case, so the step's peak is right after admission.
  peak_allocated_ = std::max(peak_allocated_, allocated_kv_bytes());
  Reap();
  refresh();
  StepPlan plan = PlanStep(views_, limits);
  if (plan.empty()) return started_any;

  inputs_.assign(plan.items.size(), SequenceInput{});
  for (size_t k = 0; k < plan.items.size(); ++k)
    BuildStepInput(*seqs_[plan.items[k].seq], plan.items[k], &inputs_[k]);
  if (opts_.isolate_errors) {
    // A sequence whose input the forward would refuse fails alone; the
    // others run this step without it.
    std::vector<StepItem> kept;
    std::vector<SequenceInput> kept_inputs;
    for (size_t k = 0; k < plan.items.size(); ++k) {
      Status st = e_.forward->Validate(inputs_[k]);
      if (st.ok()) {
        kept.push_back(plan.items[k]);
        kept_inputs.push_back(inputs_[k]);
      } else {
        Fail(*seqs_[plan.items[k].seq], st.WithContext("forward input"));
      }
    }
    plan.items = std::move(kept);
    inputs_ = std::move(kept_inputs);
    if (plan.items.empty()) {
      Reap();
      return true;
    }
  }
  ForwardBatch batch;
  batch.seqs = inputs_;
  InstallHooks(plan, &batch);
  const auto t_start = Clock::now();
  StatusOr<ForwardOutput> out = e_.forward->Run(batch, *e_.pool);
  if (!out.ok()) {
    if (!opts_.isolate_errors) return out.status().WithContext("forward pass");
    for (const StepItem& item : plan.items) Fail(*seqs_[item.seq], out.status().WithContext("forward pass"));
    Reap();
    return true;
  }
  const double step_ms = MsBetween(t_start, Clock::now());

  const int vocab = std::min(out->vocab, e_.tokenizer->vocab_size());  // never sample ids the tokenizer lacks
  for (size_t k = 0; k < plan.items.size(); ++k) {
    const StepItem& item = plan.items[k];
    Sequence& s = *seqs_[item.seq];
    if (s.state == SeqState::kFinished) continue;  // cancelled by a callback earlier in this step
    const int64_t l_before = s.l;
    s.l += item.count;
    ForwardKind kind = ForwardKind::kDecode;
    if (item.prefill) {
      s.prefilled += item.count;
      s.result.timings.prefill_ms += step_ms;
      kind = item.completes_prefill ? ForwardKind::kPrefill : ForwardKind::kPrefillPartial;
    } else {
      s.result.timings.decode_ms += step_ms;
      s.result.timings.decode_steps += 1;
    }
    s.compressor->AfterForward(*s.cache, l_before, s.l, kind, e_.pool.get());
    if (item.prefill && !item.completes_prefill) continue;
    if (item.prefill) s.state = SeqState::kDecode;
    const float* row = out->LastRow(static_cast<int>(k));
    SKIPKV_CHECK(row != nullptr);
    const std::span<const float> logits(row, vocab);
    const int64_t step = static_cast<int64_t>(s.result.tokens.size());
    if (on_logits_ && *on_logits_) (*on_logits_)(LogitsEvent{s.index, step, logits});
    const std::vector<int32_t>& forced = s.request.forced_tokens;
    const int32_t token = forced.empty() ? s.sampler->Sample(logits, s.history) : forced[step];
    Accept(s, token);
  }
  Reap();
  return true;
}

bool Batcher::Cancel(size_t index) {
  for (auto& s : seqs_) {
    if (s->index == index && s->state != SeqState::kFinished) {
      Finish(*s, FinishReason::kCancelled);
      Reap();
      return true;
    }
  }
  return false;
}

std::vector<std::unique_ptr<Sequence>> Batcher::TakeFinished() { return std::exchange(finished_, {}); }

size_t Batcher::waiting() const {
  return std::count_if(seqs_.begin(), seqs_.end(),
                       [](const auto& s) { return s->state == SeqState::kWaiting; });
}
size_t Batcher::active() const {
  return std::count_if(seqs_.begin(), seqs_.end(), [](const auto& s) { return IsActive(s->state); });
}
size_t Batcher::allocated_kv_bytes() const {
  size_t n = 0;
  for (const auto& s : seqs_) n += s->cache ? s->cache->AllocatedKvBytes() : 0;
  return n;
}
size_t Batcher::live_kv_bytes() const {
  size_t n = 0;
  for (const auto& s : seqs_) n += s->cache ? s->cache->LiveKvBytes() : 0;
  return n;
}
size_t Batcher::reserved_kv_bytes() const {
  size_t n = 0;
  for (const auto& s : seqs_) n += IsActive(s->state) ? s->kv_reserve_bytes : 0;
  return n;
}
int64_t Batcher::compressions() const {
  int64_t n = finished_compressions_;
  for (const auto& s : seqs_) n += s->compressor ? s->compressor->stats().compressions : 0;
  return n;
}
void Batcher::FlushTrace() {
  if (trace_) trace_->Flush();
}

}  // namespace skipkv::engine
