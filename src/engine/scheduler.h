// The scheduler, as two pure stages over an explicit request-state enum
// (TensorRT-LLM batch_manager style), so it is testable without a model:
//   1. capacity — which waiting sequences may start now (Admit);
//   2. micro-batch — what the next forward carries (PlanStep): either prefill
//      chunks (at most n_ubatch tokens per sequence, at most n_batch tokens in
//      all) or one decode token for every decoding sequence.
// Plus the batch grouping of the padded mode (docs/spec.md §6.3): GroupBatches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace skipkv::engine {

enum class SeqState {
  kWaiting,   // not started: no cache yet
  kPrefill,   // prompt (pads included) partly fed
  kDecode,    // prompt done; one sampled token waits to be fed
  kFinished,  // done; its cache is released
};

// What the scheduler needs to know of one sequence.
struct SeqView {
  SeqState state = SeqState::kWaiting;
  int64_t prompt_len = 0;  // tokens the prefill feeds (padded prompt in padded mode)
  int64_t prefilled = 0;   // of those, already fed
  int64_t group = 0;       // padded mode: batch id (sequences of one group start together)
  size_t kv_bytes = 0;     // worst-case K/V bytes it holds once started (admission by KV memory)
};

struct SchedulerLimits {
  int n_ubatch = 512;   // prefill tokens per sequence per step (>= 1)
  int n_batch = 2048;   // prefill tokens per step in total (>= 1)
  int max_active = 0;   // ragged: sequences in prefill/decode at once (0 = unlimited)
  bool grouped = false; // padded: admit a whole group, only when nothing is active
  // Ragged: the summed kv_bytes of active sequences stays <= this (0 = no
  // limit); admission is FIFO and stops at the first sequence that does not fit.
  size_t kv_memory = 0;
  // Prefill chunks ride in the same step as the decode tokens (chunked
  // prefill beside running decodes) instead of pausing them.
  bool mixed = false;
};

// Capacity stage: the waiting sequences to start now, in index order (FIFO).
// Ragged: as many as max_active and kv_memory allow. Grouped: when no sequence is active,
// every waiting sequence of the lowest waiting group id; otherwise none.
std::vector<size_t> Admit(std::span<const SeqView> seqs, const SchedulerLimits& limits);

// One sequence's share of a step.
struct StepItem {
  size_t seq = 0;
  int64_t begin = 0;  // prefill: first prompt index fed; decode: 0
  int64_t count = 1;  // tokens fed
  bool completes_prefill = false;  // prefill: this chunk feeds the last prompt token
  bool prefill = false;            // a prefill chunk (else one decode token)
};

struct StepPlan {
  bool prefill = false;  // true: has prefill chunks (unmixed: only those); false: decode tokens only
  std::vector<StepItem> items;
  bool empty() const { return items.empty(); }
  int64_t tokens() const;
};

// Micro-batch stage: if any sequence is in kPrefill, a prefill step over them
// in index order (each min(n_ubatch, remaining) tokens, stopping when n_batch
// tokens are planned; the last item may be cut short, and the first item is
// always planned). Otherwise a decode step with every kDecode sequence.
// Empty when no sequence is active.
// Mixed: one decode token for every kDecode sequence plus prefill chunks as
// above under the budget n_batch − decodes (at least one chunk when any
// sequence is in kPrefill), items in index order.
StepPlan PlanStep(std::span<const SeqView> seqs, const SchedulerLimits& limits);

// Batch grouping (docs/spec.md §6.3): order = stable argsort of `lens` (ascending,
// ties by index) when `sort`, else 0..n−1; batches of `batch_size`
// consecutive entries of that order (batch_size <= 0: one batch).
std::vector<std::vector<size_t>> GroupBatches(std::span<const int64_t> lens, int batch_size, bool sort);

// Left-padding of a batch: Δpad_i = max(lens of the batch) − lens_i.
std::vector<int64_t> PadLens(std::span<const int64_t> lens, std::span<const size_t> batch);

}  // namespace skipkv::engine
