// KvCompressor: the per-sequence side of KV compression — the R-KV schedule
// (when to compress), running the policy on every layer of the sequence's
// SequenceKvCache, statistics (compressions, evictions, time, peak memory)
// and the optional eviction trace. The engine owns one per sequence (request
// row) and calls AfterForward after each forward pass of that sequence.
//
// Schedule (docs/spec.md §2.1, A2, A11). Let l = tokens processed so far for the
// request: padded prompt + fed tokens (so l is the gen_pos of the next token),
// reset per request.
//   * prefill: once the whole prompt (P tokens, pads included) is in the
//     cache, compress every layer iff P ≥ B (R-KV compresses the prompt).
//   * decode: the forward that takes l from l0 to l0 + 1 compresses after
//     its attention iff l0 > 0, l0 % Δt == 0 and the layer holds ≥ B slots.
//     A layer's compression only affects the next forward, so compressing
//     all layers after the whole forward is equivalent. A forward feeding
//     k > 1 tokens compresses iff some l in [l0, l0 + k) is such a multiple.
// Hence a cache never holds more than max(P, B + Δt) slots (CacheCapacity).
// A layer holding exactly B slots at a scheduled step is left as it is (a
// compression would keep everything).
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "kv/kv_policy.h"
#include "kv/score_adjust.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace skipkv {

// Thread-safe JSONL writer shared by the compressors of a run. One line per
// (compression, traced layer):
//   {"seq":3,"l":1280,"layer":0,"n":1152,"penalized_ranges":5,"penalized_evicted":40,
//    "kept":[[[0,3],[17,17],...],[...]]}
// seq = sequence id, l = tokens processed before the compressing forward,
// n = slots before the compression; only when a score adjuster is installed:
// penalized_ranges = the ranges it penalised (SkipKV: |T|), penalized_evicted
// = evicted slots of the layer (all KV heads) inside them (SkipKV: slots of
// redundant sentences); only in padded mode: pad_len = Δpad and
// effective_budget = B − Δpad (Eq. 12); kept[h] = the kept gen_pos of KV head h
// as inclusive runs [first, last] of consecutive positions (compact: the
// recent part is one run).
class KvTraceWriter {
 public:
  static StatusOr<std::shared_ptr<KvTraceWriter>> Open(const std::string& path);
  // Writes one complete line (appends '\n') atomically with respect to other writers.
  void WriteLine(const std::string& line);
  void Flush();

 private:
  explicit KvTraceWriter(std::ofstream out) : out_(std::move(out)) {}
  std::mutex mu_;
  std::ofstream out_;
};

// Per-sequence statistics (exact; bytes are K+V rows of all layers).
struct KvCompressionStats {
  int64_t compressions = 0;        // forwards after which at least one layer was compacted
  int64_t layer_compressions = 0;  // (layer) compactions
  int64_t slots_evicted = 0;       // summed over layers and KV heads
  double seconds = 0;              // wall time spent in scoring + compaction
  int64_t peak_slots = 0;          // largest per-layer slot count seen (before compression)
  size_t live_kv_bytes = 0;        // after the last AfterForward
  size_t peak_live_kv_bytes = 0;   // largest LiveKvBytes seen (before compression)
  size_t allocated_kv_bytes = 0;   // SequenceKvCache::AllocatedKvBytes (K+V capacity)
  size_t allocated_metadata_bytes = 0;
  int64_t pad_len = 0;           // Δpad of this row (padded mode)
  int64_t effective_budget = 0;  // real (valid) slots a compression keeps: B − Δpad (0 for full)
  // Post-compression report of the score adjusters (SkipKV: slots of
  // redundant sentences), counted like slots_evicted (over layers and KV
  // heads): evicted slots an adjuster penalised, in total and per compression
  // (one entry per compression; empty while no adjuster is installed).
  int64_t penalized_evicted = 0;
  std::vector<int64_t> penalized_evicted_per_compression;
};

// What the forward that AfterForward follows was, for this sequence.
enum class ForwardKind {
  kPrefillPartial,  // a prefill chunk that does not complete the prompt (never compresses)
  kPrefill,         // the forward that completes the prompt (whole prompt or last chunk)
  kDecode,          // generated tokens fed (normally one)
};

// The pad mask the SkipKV authors' update_kv sees (issue 38 row 11): the
// layer's attention mask is the row's padding mask over all `seen` tokens
// (pads first), sliced to its last n entries (transformers 4.53
// masking_utils.flash_attention_mask), so slot s counts as a pad iff
// seen − n + s < pad_len. Right until the first eviction; after it, the
// slice covers recent tokens and stops marking the pads the cache still
// holds (once seen − n ≥ pad_len it marks none). seen = gen_pos of the
// newest slot + 1. valid_out: [n].
void AuthorsPadMask(int64_t seen, int64_t n, int64_t pad_len, uint8_t* valid_out);

class KvCompressor {
 public:
  // `policy` is shared by all sequences; `trace` may be null (no trace).
  KvCompressor(std::shared_ptr<const KvPolicy> policy, int64_t sequence_id,
               std::shared_ptr<KvTraceWriter> trace = nullptr);

  // Convenience: validates the config, creates the policy and (if
  // config.trace_path is set) opens a trace writer of its own.
  static StatusOr<std::unique_ptr<KvCompressor>> Create(const KvPolicyConfig& config, int64_t sequence_id);

  // Starts a new request on this compressor: clears the statistics and the
  // policy's per-sequence state. pad_len = Δpad of the row in padded mode
  // (0 in ragged mode); an InvalidArgument if it leaves no room (see
  // ValidatePadLens).
  Status Reset(int64_t pad_len = 0);
  // Same, but the per-sequence state is `state` (made by the caller for this
  // policy, e.g. the engine's method table keeps a typed pointer into a
  // SkipkvSequenceState for the sentence hooks) instead of a fresh
  // policy().NewSequenceState(). `state` may be null (no state).
  Status Reset(int64_t pad_len, std::unique_ptr<KvSequenceState> state);

  // Pure schedule: whether the forward described compresses (ignoring the
  // "≥ B slots" condition, which is per layer).
  bool Scheduled(int64_t l_before, int64_t l_after, ForwardKind kind) const;

  // Call after every forward of this sequence: l_before/l_after = tokens
  // processed before/after it. Compresses every layer that is due (see the
  // file comment), updates the statistics and writes the trace. Layers run
  // in parallel on `pool` when given (results do not depend on it).
  void AfterForward(SequenceKvCache& cache, int64_t l_before, int64_t l_after, ForwardKind kind,
                    ThreadPool* pool = nullptr);

  // pin_prompt: the prompt length AfterForward recorded (tests may set it
  // before CompressNow).
  void set_prompt_len(int64_t prompt_len) { pinned_prompt_.set_end(prompt_len); }
  int64_t prompt_len() const { return pinned_prompt_.end(); }

  // Compresses every layer holding more than B slots now, unconditionally
  // (tests, tools). `l` is recorded in the trace. Returns the number of
  // layers compacted.
  int CompressNow(SequenceKvCache& cache, int64_t l, ThreadPool* pool = nullptr);

  // Extra per-slot score adjustment applied on top of the policy state's
  // (e.g. analysis tools); not owned, may be null.
  void set_score_adjuster(const SlotScoreAdjuster* adjuster) { extra_adjuster_ = adjuster; }

  const KvPolicy& policy() const { return *policy_; }
  const KvCompressionStats& stats() const { return stats_; }
  KvSequenceState* state() { return state_.get(); }
  int64_t sequence_id() const { return sequence_id_; }

 private:
  struct LayerResult {
    int64_t evicted = 0;    // slots evicted, over KV heads
    int64_t penalized = 0;  // of which an adjuster penalised
  };
  // Scores and compacts one layer with the worker's scratch.
  LayerResult CompressLayer(SequenceKvCache& cache, int layer, int64_t l, int worker);
  void UpdateMemoryStats(const SequenceKvCache& cache, bool before_compression);
  void Trace(int64_t l, int layer, int64_t n_before, const LayerResult& result, const SequenceKvCache& cache);
  bool has_adjuster() const { return (state_ && state_->adjuster()) || extra_adjuster_; }

  struct Worker {
    KvScratch scratch;
    std::vector<float> keys, queries;
    KeepSets keep;
    std::vector<int32_t> evicted;  // evicted gen_pos of one head (post-compression report)
    std::vector<uint8_t> valid;    // pad_mask_seen_tokens: the authors' mask [hk][n]
  };

  std::shared_ptr<const KvPolicy> policy_;
  int64_t sequence_id_;
  std::shared_ptr<KvTraceWriter> trace_;
  std::unique_ptr<KvSequenceState> state_;
  const SlotScoreAdjuster* extra_adjuster_ = nullptr;
  // pin_prompt: end = the padded prompt length, recorded by the prefill
  // forwards of AfterForward (0 until then, and after Reset).
  PinnedPrefix pinned_prompt_;
  KvCompressionStats stats_;
  std::vector<Worker> workers_;
  std::vector<uint8_t> traced_layer_;  // per layer: 1 = write the trace (empty = all)
};

}  // namespace skipkv
