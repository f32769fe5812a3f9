// ServingEngine (skipkv/server_engine.h) on the Batcher: request ids are the
// sequences' indices, callbacks are looked up per id when the Batcher's
// single TokenCallback fires, finished sequences are reported after each step.
#include "skipkv/server_engine.h"

#include <algorithm>
#include <map>
#include <string>

#include "engine/batcher.h"
#include "engine/engine_impl.h"

namespace skipkv {

class ServingEngine::Impl {
 public:
  Impl(std::unique_ptr<Engine> engine, const ServingOptions& options, Engine::Impl& e)
      : engine_(std::move(engine)),
        options_(options),
        cb_([this](const TokenEvent& ev) { return OnToken(ev); }),
        batcher_(e, BatcherOptionsFor(options), cb_) {}

  static engine::BatcherOptions BatcherOptionsFor(const ServingOptions& o) {
    engine::BatcherOptions bo;
    bo.max_active = o.max_active;
    bo.mix_prefill_decode = o.mix_prefill_decode;
    bo.kv_memory = o.kv_memory_bytes;
    bo.allocate_worst_case = true;
    bo.isolate_errors = true;
    return bo;
  }

  bool OnToken(const TokenEvent& ev) {
    auto it = callbacks_.find(ev.index);
    if (ev.token >= 0) ++stats_.generated_tokens;
    if (it == callbacks_.end() || !it->second.on_token) return true;
    return it->second.on_token(ev);
  }

  // Reports finished sequences to their callbacks and counters.
  void Deliver() {
    for (auto& s : batcher_.TakeFinished()) {
      auto it = callbacks_.find(s->index);
      RequestCallbacks cb = it == callbacks_.end() ? RequestCallbacks{} : std::move(it->second);
      if (it != callbacks_.end()) callbacks_.erase(it);
      if (!s->error.ok()) {
        ++stats_.failed;
      } else if (s->result.finish == FinishReason::kCancelled) {
        ++stats_.cancelled;
      } else {
        ++stats_.completed;
      }
      stats_.prompt_tokens += static_cast<int64_t>(s->prompt.size());
      if (cb.on_done) cb.on_done(s->error, std::move(s->result));
    }
  }

  std::unique_ptr<Engine> engine_;
  ServingOptions options_;
  TokenCallback cb_;
  engine::Batcher batcher_;
  std::map<RequestId, RequestCallbacks> callbacks_;
  RequestId next_id_ = 1;
  ServingStats stats_;
};

ServingEngine::ServingEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ServingEngine::~ServingEngine() = default;

StatusOr<std::unique_ptr<ServingEngine>> ServingEngine::Create(std::unique_ptr<Engine> engine,
                                                               const ServingOptions& options) {
  if (!engine) return InvalidArgument("ServingEngine::Create: no engine");
  if (engine->options().kv.pad_policy == PadPolicy::kPadded) {
    return Unsupported("serving runs ragged batches; the engine's pad policy is 'padded'");
  }
  if (options.max_active < 0) {
    return InvalidArgument("max_active must be >= 0 (0 = unlimited), got " +
                           std::to_string(options.max_active));
  }
  Engine::Impl& e = *engine->impl_;
  auto impl = std::make_unique<Impl>(std::move(engine), options, e);
  SKIPKV_RETURN_IF_ERROR(impl->batcher_.OpenTrace());
  return std::unique_ptr<ServingEngine>(new ServingEngine(std::move(impl)));
}

Engine& ServingEngine::engine() { return *impl_->engine_; }
const ServingOptions& ServingEngine::options() const { return impl_->options_; }

StatusOr<size_t> ServingEngine::WorstCaseKvBytes(const Request& request) const {
  SKIPKV_ASSIGN_OR_RETURN(std::unique_ptr<engine::Sequence> s, impl_->batcher_.Prepare(request, 0));
  return s->kv_reserve_bytes;
}

StatusOr<RequestId> ServingEngine::Submit(const Request& request, RequestCallbacks callbacks) {
  const RequestId id = impl_->next_id_;
  SKIPKV_ASSIGN_OR_RETURN(std::unique_ptr<engine::Sequence> s, impl_->batcher_.Prepare(request, id));
  const size_t limit = impl_->options_.kv_memory_bytes;
  if (limit > 0 && s->kv_reserve_bytes > limit) {
    // The largest max_new_tokens that would fit, by bisection on the worst case (monotone in it).
    int64_t lo = 0, hi = request.max_new_tokens;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      s->request.max_new_tokens = static_cast<int>(mid);
      if (impl_->batcher_.WorstCaseKvBytes(*s) <= limit)
        lo = mid;
      else
        hi = mid - 1;
    }
    std::string hint =
        lo >= 1 ? "; max_tokens <= " + std::to_string(lo) + " would fit" : "; the prompt alone does not fit";
    return OutOfRange("the request's worst-case KV cache is " + std::to_string(s->kv_reserve_bytes) +
                      " bytes, above the server's KV memory limit of " + std::to_string(limit) + " bytes" +
                      hint);
  }
  impl_->next_id_++;
  impl_->callbacks_[id] = std::move(callbacks);
  impl_->batcher_.Add(std::move(s));
  impl_->stats_.submitted++;
  return id;
}

StatusOr<bool> ServingEngine::Step() {
  StatusOr<bool> ran = impl_->batcher_.Step();
  impl_->Deliver();
  return ran;
}

bool ServingEngine::Cancel(RequestId id) {
  const bool found = impl_->batcher_.Cancel(id);
  impl_->Deliver();
  return found;
}

ServingStats ServingEngine::stats() const {
  ServingStats s = impl_->stats_;
  const engine::Batcher& b = impl_->batcher_;
  s.compressions = b.compressions();
  s.waiting = static_cast<int64_t>(b.waiting());
  s.active = static_cast<int64_t>(b.active());
  s.kv_allocated_bytes = b.allocated_kv_bytes();
  s.kv_live_bytes = b.live_kv_bytes();
  s.kv_reserved_bytes = b.reserved_kv_bytes();
  s.kv_peak_allocated_bytes = b.peak_allocated_kv_bytes();
  s.kv_memory_bytes = impl_->options_.kv_memory_bytes;
  return s;
}

}  // namespace skipkv
