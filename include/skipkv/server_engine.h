// Serving API: a long-lived object that owns one Engine and runs requests
// that arrive while others are generating (continuous batching). Requests
// are submitted at any time, each Step() runs one scheduler step over every
// active sequence, tokens stream through per-request callbacks, Cancel()
// frees a sequence's KV cache at once. It runs the same generation loop as
// Engine::Generate, so a request's greedy output is the same either way.
//
// Scheduling: new prompts are prefilled in chunks (EngineOptions::n_ubatch
// per sequence, n_batch per step) in the same forward as the running decode
// tokens (ServingOptions::mix_prefill_decode), so a long prompt does not
// pause the streams. Admission by KV memory: each request's worst-case K/V
// bytes — per layer and KV head, min(policy capacity, prompt + max_new_tokens,
// n_ctx) slots, where an evicting policy's capacity is max(prompt, B + Δt)
// and FullKV's is unbounded — are reserved when it starts, and it starts only
// when the reservations of the active sequences plus its own fit
// ServingOptions::kv_memory_bytes (FIFO; caches are allocated at that worst
// case, so allocated K/V never exceeds the limit). A request that could never
// fit is refused at Submit.
//
// Threading: not thread-safe; one thread owns the object and calls every
// method (a server's engine thread). Callbacks run on that thread, inside
// Step() or Cancel().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "skipkv/engine.h"

namespace skipkv {

struct ServingOptions {
  size_t kv_memory_bytes = 0;      // limit on reserved K/V bytes of active requests (0 = none)
  int max_active = 0;              // requests active at once (0 = unlimited)
  bool mix_prefill_decode = true;  // prefill chunks ride with decode tokens in one forward
};

using RequestId = uint64_t;

// Per-request callbacks (either may be empty). on_token: as TokenCallback
// (TokenEvent::index is the RequestId); returning false cancels the request.
// on_done: exactly once per accepted request, with its result (finish
// kCancelled after Cancel or a false from on_token) and a Status that is not
// ok only when the request failed alone (e.g. its forward input was refused;
// the result is then empty).
struct RequestCallbacks {
  std::function<bool(const TokenEvent&)> on_token;
  std::function<void(const Status&, GenerationResult&&)> on_done;
};

// Server-wide figures (cumulative counters since Create, gauges now).
struct ServingStats {
  int64_t submitted = 0, completed = 0, cancelled = 0, failed = 0;  // counters
  int64_t prompt_tokens = 0, generated_tokens = 0;                  // counters, finished requests
  int64_t compressions = 0;            // counter: KV compressions of every request so far
  int64_t waiting = 0, active = 0;     // gauges
  size_t kv_allocated_bytes = 0;       // gauge: K/V bytes allocated by active requests
  size_t kv_live_bytes = 0;            // gauge: K/V bytes in live slots
  size_t kv_reserved_bytes = 0;        // gauge: worst-case bytes reserved by active requests
  size_t kv_peak_allocated_bytes = 0;  // the largest kv_allocated_bytes after any step
  size_t kv_memory_bytes = 0;          // the configured limit (0 = none)
};

class ServingEngine {
 public:
  // Takes ownership of `engine`. Unsupported for the padded mode (its batches
  // start together; serving is ragged). InvalidArgument for max_active < 0.
  static StatusOr<std::unique_ptr<ServingEngine>> Create(std::unique_ptr<Engine> engine,
                                                         const ServingOptions& options);
  ~ServingEngine();
  ServingEngine(const ServingEngine&) = delete;
  ServingEngine& operator=(const ServingEngine&) = delete;

  Engine& engine();
  const ServingOptions& options() const;

  // Validates the request as Engine::ValidateRequest does, computes its
  // worst-case K/V and queues it. OutOfRange when that worst case alone
  // exceeds kv_memory_bytes (the message gives both figures and the
  // max_new_tokens that would fit, if any); InvalidArgument / OutOfRange from
  // validation. Nothing is queued on error.
  StatusOr<RequestId> Submit(const Request& request, RequestCallbacks callbacks);

  // Worst-case K/V bytes of a request (as Submit computes them).
  StatusOr<size_t> WorstCaseKvBytes(const Request& request) const;

  // One scheduler step: admission, one forward over the planned micro-batch,
  // sampling, callbacks. Returns false when there was nothing to do. An error
  // is an engine fault that concerns every request (requests failing alone
  // are reported through their on_done).
  StatusOr<bool> Step();

  // Cancels a waiting or active request now (its cache is freed before this
  // returns; on_done runs with kCancelled). False if the id is unknown or done.
  bool Cancel(RequestId id);

  ServingStats stats() const;

  class Impl;

 private:
  explicit ServingEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace skipkv
