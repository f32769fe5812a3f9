// The generation loop: request states, admission, one forward per step,
// KV compression after every forward, sampling, stop conditions, streaming
// and per-request statistics. The scheduling decisions themselves are the
// pure stages of scheduler.h; this file executes them.
//
// Positions (written once here, see also model/forward.h). A sequence's
// prefill stream is its padded prompt: Δpad pad tokens (padded mode only)
// followed by its P real prompt tokens. For stream index j:
//   gen_pos = j              (the padded-stream index; the KV slot order)
//   pos     = j − Δpad       (RoPE position: real tokens start at 0, as HF
//                             derives position_ids from the attention mask)
//   valid   = j >= Δpad      (pads are stored but masked everywhere)
// Pads get pos 0; they are never attended, so their position is irrelevant.
// l = tokens processed so far (= the gen_pos of the next token) drives the
// compression schedule (R-KV counts padded prompt + fed tokens), and it
// starts at 0 for every request.
#include <chrono>
#include <optional>
#include <string>

#include "engine/composite_hooks.h"
#include "engine/engine_impl.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/stop_matcher.h"
#include "kv/kv_compressor.h"
#include "util/check.h"
#include "util/logging.h"

namespace skipkv {
namespace {

using Clock = std::chrono::steady_clock;
double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Everything the loop keeps per request.
struct Sequence {
  size_t index = 0;
  const Request* request = nullptr;
  std::vector<int32_t> prompt;   // real prompt ids
  int64_t pad_len = 0;           // Δpad (padded mode)
  int64_t group = 0;             // padded mode: batch id
  engine::SeqState state = engine::SeqState::kWaiting;
  int64_t prefilled = 0;         // stream tokens fed so far during prefill
  int64_t l = 0;                 // tokens processed (pads included)
  int32_t next = -1;             // sampled token waiting to be fed (kDecode)
  std::vector<int32_t> history;  // prompt + generated ids (repetition penalty window)
  std::shared_ptr<const engine::Method> method;  // what this request runs

  std::unique_ptr<SequenceKvCache> cache;
  std::unique_ptr<KvCompressor> compressor;
  std::optional<engine::Sampler> sampler;
  std::optional<StreamingDetokenizer> detok;
  engine::StopMatcher stop;
  std::unique_ptr<SequenceHooks> hooks;
  GenerationResult result;

  // This step's forward input.
  std::vector<int32_t> in_tok, in_pos, in_gen;
  std::vector<uint8_t> in_valid;

  int64_t stream_len() const { return pad_len + static_cast<int64_t>(prompt.size()); }
};

class GenerationRun {
 public:
  GenerationRun(Engine::Impl& engine, const TokenCallback& cb, const FinishedCallback& on_finished)
      : e_(engine), cb_(cb), on_finished_(on_finished) {}

  // Tokenizes and validates everything, builds the sequences. No model work.
  Status Prepare(std::span<const Request> requests);
  // Runs the step loop to completion.
  Status Run();
  std::vector<GenerationResult> TakeResults();

 private:
  Status Start(Sequence& s);
  void BuildStepInput(Sequence& s, const engine::StepItem& item, bool prefill, SequenceInput* in);
  // Handles a sampled token; may finish the sequence.
  void Accept(Sequence& s, int32_t token);
  void Finish(Sequence& s, FinishReason why);
  void Emit(Sequence& s, int32_t token, const std::string& text);
  // Calls BeforeForward on the step's hooks and, if any of them want hidden
  // states, sets the batch's hooks to dispatch each sequence's rows.
  void InstallHooks(const engine::StepPlan& plan, ForwardBatch* batch);

  Engine::Impl& e_;
  const TokenCallback& cb_;
  const FinishedCallback& on_finished_;
  bool padded_ = false;
  std::vector<Sequence> seqs_;
  std::shared_ptr<KvTraceWriter> trace_;
  Clock::time_point t0_;
  // This step's hooked sequences: (hooks, first batch row, rows).
  struct HookedRows {
    SequenceHooks* hooks;
    int64_t first;
    int64_t count;
  };
  std::vector<HookedRows> hooked_;
};

Status GenerationRun::Prepare(std::span<const Request> requests) {
  t0_ = Clock::now();
  padded_ = e_.options.kv.pad_policy == PadPolicy::kPadded;
  if (requests.empty()) return Status::Ok();
  seqs_.resize(requests.size());
  std::vector<int64_t> lens(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    Sequence& s = seqs_[i];
    s.index = i;
    s.request = &requests[i];
    auto ctx = [i](const Status& st) { return st.WithContext("request " + std::to_string(i)); };
    StatusOr<std::vector<int32_t>> prompt = e_.PromptTokens(requests[i]);
    if (!prompt.ok()) return ctx(prompt.status());
    Status st = e_.ValidateWithPrompt(requests[i], *prompt);
    if (!st.ok()) return ctx(st);
    if (requests[i].method) {
      StatusOr<std::shared_ptr<const engine::Method>> m = e_.methods->Resolve(*requests[i].method);
      if (!m.ok()) return ctx(m.status());
      s.method = std::move(m).value();
    } else {
      s.method = e_.default_method;
    }
    s.prompt = std::move(prompt).value();
    lens[i] = static_cast<int64_t>(s.prompt.size());
  }
  if (padded_) {
    // Batch grouping (spec §6.3) and the left padding of each batch; the pad
    // lengths must leave each row's policy room for real tokens (spec A10).
    const auto batches = engine::GroupBatches(lens, e_.options.batch_size, e_.options.sort_by_length);
    for (size_t b = 0; b < batches.size(); ++b) {
      const std::vector<int64_t> pads = engine::PadLens(lens, batches[b]);
      for (size_t k = 0; k < batches[b].size(); ++k) {
        Sequence& s = seqs_[batches[b][k]];
        Status st = ValidatePadLens(s.method->config().kv, std::span<const int64_t>(&pads[k], 1));
        if (!st.ok()) {
          return st.WithContext("padded batch " + std::to_string(b) + ", request " + std::to_string(s.index));
        }
        s.group = static_cast<int64_t>(b);
        s.pad_len = pads[k];
        s.result.batch = static_cast<int64_t>(b);
      }
    }
  }
  if (!e_.options.kv.trace_path.empty()) {
    SKIPKV_ASSIGN_OR_RETURN(trace_, KvTraceWriter::Open(e_.options.kv.trace_path));
  }
  return Status::Ok();
}

// Allocates the sequence's cache (the policy's capacity for its padded
// prompt) and its per-request state.
Status GenerationRun::Start(Sequence& s) {
  const Request& r = *s.request;
  const int64_t stream = s.stream_len();
  // The last sampled token is never fed, so a request needs at most
  // stream + max_new_tokens − 1 slots, and generation stops at the context
  // (position l − pad_len = n_ctx), so a huge max_new_tokens never sizes a cache.
  const int64_t needed = std::min<int64_t>(stream + r.max_new_tokens, s.pad_len + e_.n_ctx);
  const KvPolicy& policy = *s.method->policy();
  int64_t cap = policy.CacheCapacity(stream);
  int64_t initial, max_cap;
  if (cap == SequenceKvCache::kUnbounded) {
    initial = stream + std::min<int64_t>(r.max_new_tokens, 512);  // grows geometrically beyond
    max_cap = SequenceKvCache::kUnbounded;
  } else {
    initial = max_cap = std::min(cap, needed);
  }
  s.cache = std::make_unique<SequenceKvCache>(e_.CacheShape(policy), initial, max_cap);
  s.compressor = std::make_unique<KvCompressor>(s.method->policy(), static_cast<int64_t>(s.index), trace_);
  engine::Method::SequenceParts parts = s.method->NewSequence();
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
  s.stop = engine::StopMatcher(r.stop);
  s.history = s.prompt;
  s.history.reserve(static_cast<size_t>(std::min<int64_t>(s.prompt.size() + r.max_new_tokens, e_.n_ctx)));
  s.result.index = s.index;
  s.result.prompt_tokens = s.prompt;
  s.result.timings.prompt_tokens = static_cast<int64_t>(s.prompt.size());
  s.result.timings.queue_ms = MsBetween(t0_, Clock::now());
  s.state = engine::SeqState::kPrefill;
  {
    // The method's own hooks first (they update T before a compressing
    // forward), then the app's.
    std::vector<std::unique_ptr<SequenceHooks>> hooks;
    hooks.push_back(std::move(parts.hooks));
    if (e_.hooks_factory) hooks.push_back(e_.hooks_factory(s.index, r));
    s.hooks = engine::CompositeSequenceHooks::Combine(std::move(hooks));
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

void GenerationRun::BuildStepInput(Sequence& s, const engine::StepItem& item, bool prefill, SequenceInput* in) {
  s.in_tok.clear();
  s.in_pos.clear();
  s.in_gen.clear();
  s.in_valid.clear();
  if (prefill) {
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
  in->logits = (!prefill || item.completes_prefill) ? LogitsMode::kLast : LogitsMode::kNone;
}

void GenerationRun::Emit(Sequence& s, int32_t token, const std::string& text) {
  s.result.text += text;
  if (!cb_) return;
  if (token < 0 && text.empty()) return;
  if (!cb_(TokenEvent{s.index, token, text}) && token >= 0 && s.state != engine::SeqState::kFinished) {
    Finish(s, FinishReason::kCancelled);
  }
}

void GenerationRun::Accept(Sequence& s, int32_t token) {
  const Request& r = *s.request;
  if (!r.ignore_eos && e_.tokenizer->IsEndOfGeneration(token)) {
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
  if (s.state == engine::SeqState::kFinished) return;  // cancelled by the callback
  if (s.stop.matched()) {
    s.result.stop_string = s.stop.matched_string();
    Finish(s, FinishReason::kStopString);
  } else if (static_cast<int64_t>(s.result.tokens.size()) >= r.max_new_tokens) {
    Finish(s, FinishReason::kLength);
  } else if (s.l - s.pad_len >= e_.n_ctx) {
    Finish(s, FinishReason::kContext);  // the token would be fed at position l − Δpad
  }
}

void GenerationRun::Finish(Sequence& s, FinishReason why) {
  s.state = engine::SeqState::kFinished;
  s.result.finish = why;
  if (why != FinishReason::kStopString) {
    std::string tail = s.stop.Push(s.detok->Flush());
    tail += s.stop.Flush();
    if (!tail.empty()) {
      s.result.text += tail;
      if (cb_) (void)cb_(TokenEvent{s.index, -1, tail});
    }
  }
  GenerationTimings& t = s.result.timings;
  t.total_ms = MsBetween(t0_, Clock::now());
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
  if (s.hooks) {
    s.result.diagnostics = s.hooks->Diagnostics();
    s.hooks.reset();
  }
  s.cache.reset();  // frees the slot memory for the next admitted request
  if (on_finished_) on_finished_(s.result);
}

void GenerationRun::InstallHooks(const engine::StepPlan& plan, ForwardBatch* batch) {
  hooked_.clear();
  int64_t row = 0;
  bool residual = false, final_hidden = false;
  for (const engine::StepItem& item : plan.items) {
    Sequence& s = seqs_[item.seq];
    if (s.hooks) {
      SequenceStep step;
      step.l_before = s.l;
      step.l_after = s.l + item.count;
      step.kind = !plan.prefill ? ForwardKind::kDecode
                  : item.completes_prefill ? ForwardKind::kPrefill
                                           : ForwardKind::kPrefillPartial;
      step.compresses = s.compressor->Scheduled(step.l_before, step.l_after, step.kind);
      s.hooks->BeforeForward(step);
      hooked_.push_back({s.hooks.get(), row, item.count});
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
        if (h.hooks->WantsFinalHidden()) h.hooks->OnFinalHidden(tokens.subspan(h.first, h.count), hidden + h.first * d);
      }
    };
  }
}

Status GenerationRun::Run() {
  engine::SchedulerLimits limits;
  limits.n_ubatch = e_.options.n_ubatch;
  limits.n_batch = e_.options.n_batch;
  limits.max_active = padded_ ? 0 : e_.options.batch_size;
  limits.grouped = padded_;
  std::vector<engine::SeqView> views(seqs_.size());
  std::vector<SequenceInput> inputs;
  auto refresh = [&] {
    for (size_t i = 0; i < seqs_.size(); ++i) {
      views[i] = {seqs_[i].state, seqs_[i].stream_len(), seqs_[i].prefilled, seqs_[i].group};
    }
  };
  while (true) {
    refresh();
    for (size_t i : engine::Admit(views, limits)) SKIPKV_RETURN_IF_ERROR(Start(seqs_[i]));
    refresh();
    const engine::StepPlan plan = engine::PlanStep(views, limits);
    if (plan.empty()) break;

    inputs.assign(plan.items.size(), SequenceInput{});
    for (size_t k = 0; k < plan.items.size(); ++k) {
      BuildStepInput(seqs_[plan.items[k].seq], plan.items[k], plan.prefill, &inputs[k]);
    }
    ForwardBatch batch;
    batch.seqs = inputs;
    InstallHooks(plan, &batch);
    const auto t_start = Clock::now();
    StatusOr<ForwardOutput> out = e_.forward->Run(batch, *e_.pool);
    if (!out.ok()) return out.status().WithContext("forward pass");
    const double step_ms = MsBetween(t_start, Clock::now());

    const int vocab = std::min(out->vocab, e_.tokenizer->vocab_size());  // never sample ids the tokenizer lacks
    for (size_t k = 0; k < plan.items.size(); ++k) {
      const engine::StepItem& item = plan.items[k];
      Sequence& s = seqs_[item.seq];
      const int64_t l_before = s.l;
      s.l += item.count;
      ForwardKind kind = ForwardKind::kDecode;
      if (plan.prefill) {
        s.prefilled += item.count;
        s.result.timings.prefill_ms += step_ms;
        kind = item.completes_prefill ? ForwardKind::kPrefill : ForwardKind::kPrefillPartial;
      } else {
        s.result.timings.decode_ms += step_ms;
        s.result.timings.decode_steps += 1;
      }
      s.compressor->AfterForward(*s.cache, l_before, s.l, kind, e_.pool.get());
      if (plan.prefill && !item.completes_prefill) continue;
      if (plan.prefill) s.state = engine::SeqState::kDecode;
      const float* row = out->LastRow(static_cast<int>(k));
      SKIPKV_CHECK(row != nullptr);
      const int32_t token = s.sampler->Sample(std::span<const float>(row, vocab), s.history);
      Accept(s, token);
    }
  }
  if (trace_) trace_->Flush();
  return Status::Ok();
}

std::vector<GenerationResult> GenerationRun::TakeResults() {
  std::vector<GenerationResult> out;
  out.reserve(seqs_.size());
  for (Sequence& s : seqs_) out.push_back(std::move(s.result));
  return out;
}

}  // namespace

StatusOr<std::vector<GenerationResult>> Engine::Impl::Generate(std::span<const Request> requests,
                                                               const TokenCallback& cb,
                                                               const FinishedCallback& on_finished) {
  GenerationRun run(*this, cb, on_finished);
  SKIPKV_RETURN_IF_ERROR(run.Prepare(requests));
  SKIPKV_RETURN_IF_ERROR(run.Run());
  return run.TakeResults();
}

}  // namespace skipkv
