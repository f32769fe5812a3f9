// The generation loop as a long-lived object: sequences are added at any
// time, each Step() runs one scheduler step (admission, one forward pass over
// the planned micro-batch, KV compression, sampling, stop conditions,
// streaming), finished sequences are handed back with their result. Both
// Engine::Generate (add everything, step until idle) and ServingEngine
// (requests arriving while others decode) run on it, so there is one
// generation loop. The scheduling decisions are the pure stages of
// scheduler.h; this file executes them. Internal to src/engine.
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
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_impl.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/stop_matcher.h"
#include "kv/kv_compressor.h"

namespace skipkv::engine {

using Clock = std::chrono::steady_clock;

// Everything the loop keeps per request.
struct Sequence {
  size_t index = 0;             // the caller's id (Generate: input position; server: request id)
  Request request;              // a copy: the sequence may outlive the caller's request
  std::vector<int32_t> prompt;  // real prompt ids
  int64_t pad_len = 0;          // Δpad (padded mode)
  int64_t group = 0;            // padded mode: batch id
  size_t kv_reserve_bytes = 0;  // worst-case K/V bytes (admission by KV memory)
  SeqState state = SeqState::kWaiting;
  int64_t prefilled = 0;                 // stream tokens fed so far during prefill
  int64_t l = 0;                         // tokens processed (pads included)
  int32_t next = -1;                     // sampled token waiting to be fed (kDecode)
  std::vector<int32_t> history;          // prompt + generated ids (repetition penalty window)
  std::shared_ptr<const methods::Method> method;  // what this request runs
  Clock::time_point t0;                  // when it was added (queue time starts here)

  std::unique_ptr<SequenceKvCache> cache;
  std::unique_ptr<KvCompressor> compressor;
  std::optional<Sampler> sampler;
  std::optional<StreamingDetokenizer> detok;
  StopMatcher stop;
  std::unique_ptr<SequenceHooks> hooks;
  GenerationResult result;
  Status error;  // a sequence that failed alone (isolate_errors)

  // This step's forward input.
  std::vector<int32_t> in_tok, in_pos, in_gen;
  std::vector<uint8_t> in_valid;

  int64_t stream_len() const { return pad_len + static_cast<int64_t>(prompt.size()); }
};

struct BatcherOptions {
  bool padded = false;  // padded mode: groups start together (admission by group)
  int max_active = 0;   // ragged: sequences active at once (0 = unlimited)
  // Prefill chunks and decode tokens share one forward (chunked prefill
  // beside running decodes); false = a step is all prefill or all decode.
  bool mix_prefill_decode = false;
  // Admission by KV memory: the summed kv_reserve_bytes of active sequences
  // stays <= this (0 = no limit).
  size_t kv_memory = 0;
  // Allocate every cache at its worst case up front (FullKV included), so
  // the allocated K/V never exceeds kv_reserve_bytes; false = FullKV caches
  // grow on demand.
  bool allocate_worst_case = false;
  // A sequence whose start or forward input fails finishes alone with
  // Sequence::error set; false = the step returns the error (Generate).
  bool isolate_errors = false;
};

class Batcher {
 public:
  // on_logits (optional, must outlive the Batcher): every request's next-token logits.
  Batcher(Engine::Impl& engine, const BatcherOptions& options, const TokenCallback& cb,
          const LogitsCallback* on_logits = nullptr);

  // Opens the engine-wide eviction trace (EngineOptions::kv.trace_path), if any.
  Status OpenTrace();

  // A sequence for `request` under the caller's `index`: tokenized and
  // validated (ValidateWithPrompt), its method resolved, its worst-case KV
  // computed. No model work; not yet queued.
  StatusOr<std::unique_ptr<Sequence>> Prepare(const Request& request, size_t index);
  // Worst-case K/V bytes of a prepared sequence: per layer and KV head,
  // min(policy capacity, prompt + max_new_tokens, Δpad + n_ctx) slots.
  size_t WorstCaseKvBytes(const Sequence& s) const;
  // Queues a prepared sequence (FIFO after the ones already there).
  void Add(std::unique_ptr<Sequence> s);

  // One step: admits what fits, runs one forward over the planned
  // micro-batch. Returns false when there was nothing to run.
  StatusOr<bool> Step();

  // Finishes `index` now as kCancelled, freeing its cache. False if unknown
  // or already finished.
  bool Cancel(size_t index);

  // Sequences finished since the last call (with result and error), in
  // finishing order.
  std::vector<std::unique_ptr<Sequence>> TakeFinished();

  // Live figures over the sequences not yet finished.
  size_t waiting() const;
  size_t active() const;
  size_t allocated_kv_bytes() const;
  size_t live_kv_bytes() const;
  size_t reserved_kv_bytes() const;  // summed kv_reserve_bytes of active sequences
  int64_t compressions() const;      // of active sequences so far plus every finished one
  // The largest allocated_kv_bytes() seen right after an admission (FullKV
  // caches that grow later are not covered unless allocate_worst_case).
  size_t peak_allocated_kv_bytes() const { return peak_allocated_; }
  bool idle() const { return seqs_.empty(); }
  void FlushTrace();

 private:
  Status Start(Sequence& s);
  void BuildStepInput(Sequence& s, const StepItem& item, SequenceInput* in);
  // Handles a sampled token; may finish the sequence.
  void Accept(Sequence& s, int32_t token);
  void Finish(Sequence& s, FinishReason why);
  void Fail(Sequence& s, const Status& st);
  void Emit(Sequence& s, int32_t token, const std::string& text);
  // Calls BeforeForward on the step's hooks and, if any of them want hidden
  // states, sets the batch's hooks to dispatch each sequence's rows.
  void InstallHooks(const StepPlan& plan, ForwardBatch* batch);
  // Moves finished sequences from seqs_ to finished_.
  void Reap();

  Engine::Impl& e_;
  BatcherOptions opts_;
  const TokenCallback& cb_;
  const LogitsCallback* on_logits_;
  std::vector<std::unique_ptr<Sequence>> seqs_;  // not finished (FIFO order)
  std::vector<std::unique_ptr<Sequence>> finished_;
  std::shared_ptr<KvTraceWriter> trace_;
  int64_t finished_compressions_ = 0;
  size_t peak_allocated_ = 0;
  std::vector<SeqView> views_;
  std::vector<SequenceInput> inputs_;
  // This step's hooked sequences: (hooks, first batch row, rows).
  struct HookedRows {
    SequenceHooks* hooks;
    int64_t first;
    int64_t count;
  };
  std::vector<HookedRows> hooked_;
};

}  // namespace skipkv::engine
