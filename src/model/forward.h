// The transformer forward pass over a batch of ragged sequences.
//
// One call takes several sequences, each with its own number of new tokens
// (prefill chunks and single decode tokens mixed) and its own
// SequenceKvCache. All tokens of the call go through the weight matmuls
// together ([n_tokens, D] activations); attention runs per sequence (one
// kernels::AttentionTask per sequence per layer, one kernels::Attention call
// per layer). Nothing is padded.
//
// The position rule (written once, here): for every token the caller gives
// its RoPE position `pos`, the slot's `gen_pos` (default pos) and `valid`
// (false for padding tokens of the padded batch mode: their K/V are stored
// but masked). In each layer the token's K (after RoPE) and V are appended to
// the cache before that layer's attention; new token i of a sequence whose
// layer held S slots before the call attends slots [0, S + i] except invalid
// ones. The post-RoPE queries of the last min(n, query_window) new tokens of
// each sequence are pushed into the cache's query window.
//
// Hooks (set per call, nothing is paid when unset):
//   residual     at the input of every layer l, before its attention norm:
//                (l, tokens, hidden [n_tokens][D]) — mutable (steering);
//                then once more with l = n_layers: the residual after the
//                last layer, before the final norm (llama.cpp's last
//                control-vector direction, direction.(n_layers - 1)).
//   final_hidden the final RMS-normed hidden state [n_tokens][D], the LM
//                head's input (SkipKV sentence embeddings) — read-only.
//
// Activations are f32. Scratch is owned by the ForwardPass, allocated on the
// first call and grown, never shrunk; one ForwardPass must not be used by two
// threads at once (use one per engine thread; the Model is shared).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kv/kv_cache.h"
#include "model/model.h"
#include "util/aligned_buffer.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace skipkv {

// Which logits a sequence wants from a call.
enum class LogitsMode {
  kNone,  // none (a prefill chunk that is not the last)
  kLast,  // the last new token only (decode, last prefill chunk)
  kAll,   // every new token (perplexity, teacher forcing)
};

// One sequence's share of a forward call: n = tokens.size() new tokens.
struct SequenceInput {
  SequenceKvCache* cache = nullptr;  // this sequence's cache (shape must match the model)
  std::span<const int32_t> tokens;   // [n] token ids, each < vocab
  std::span<const int32_t> pos;      // [n] RoPE positions, each < context_length
  std::span<const int32_t> gen_pos;  // [n] slot positions, strictly increasing and above
                                     //     the cache's last gen_pos; empty = pos
  std::span<const uint8_t> valid;    // [n] 0 = padding slot (stored, masked); empty = all valid
  LogitsMode logits = LogitsMode::kLast;
};

// One token of a batch, in batch order (sequence after sequence, each in order).
// Hooks receive these so they can tell which row of [n_tokens][D] is whose.
struct BatchToken {
  int32_t seq = 0;    // index into ForwardBatch::seqs
  int32_t index = 0;  // index among that sequence's new tokens
  int32_t token = 0;
  int32_t pos = 0;
  int32_t gen_pos = 0;
  bool valid = true;
  bool last = false;  // the sequence's last new token in this call
};

using ResidualHook = std::function<void(int layer, std::span<const BatchToken> tokens, float* hidden)>;
using FinalHiddenHook = std::function<void(std::span<const BatchToken> tokens, const float* hidden)>;

struct ForwardBatch {
  std::span<const SequenceInput> seqs;
  ResidualHook residual_hook;         // optional, see the file comment
  FinalHiddenHook final_hidden_hook;  // optional
  // Optional caller buffer for the logits, [NumLogitRows(seqs)][vocab].
  // nullptr: the ForwardPass's own buffer (valid until the next Run).
  float* logits = nullptr;
};

// Number of logits rows a batch produces (sum over its sequences of 0, 1 or n).
int64_t NumLogitRows(std::span<const SequenceInput> seqs);

struct ForwardOutput {
  const float* logits = nullptr;  // [n_rows][vocab]
  int64_t n_rows = 0;
  int vocab = 0;
  // Per sequence of the batch: the first logits row and how many it has
  // (0 for kNone, 1 for kLast, n for kAll; rows follow the sequence's tokens).
  std::span<const int64_t> seq_first_row;
  std::span<const int64_t> seq_num_rows;

  const float* Row(int64_t r) const { return logits + r * vocab; }
  // The logits of sequence s's last requested token (nullptr if it has none).
  const float* LastRow(int s) const {
    return seq_num_rows[s] == 0 ? nullptr : Row(seq_first_row[s] + seq_num_rows[s] - 1);
  }
};

class ForwardPass {
 public:
  explicit ForwardPass(const Model& model);

  // Checks one sequence's input against the model and its cache without
  // touching anything: token ids, positions vs the context, gen_pos order,
  // span lengths, cache shape and room (a bounded cache that cannot take the
  // tokens is OutOfRange). Run() does the same for each sequence; the engine
  // can call it first so that a bad request fails alone.
  Status Validate(const SequenceInput& seq) const;

  // Runs the batch: appends every token's K/V to its cache, pushes queries,
  // and computes the requested logits. On error nothing has been modified.
  // The returned spans are valid until the next Run.
  StatusOr<ForwardOutput> Run(const ForwardBatch& batch, ThreadPool& pool);

  const Model& model() const { return model_; }

 private:
  void EnsureScratch(int64_t n_tokens, int64_t n_out, size_t n_seqs);
  void Attend(int layer, const ForwardBatch& batch, ThreadPool& pool);

  const Model& model_;
  const ModelConfig& cfg_;

  // Per-token activations, [n_tokens][width] f32, grown on demand.
  std::vector<BatchToken> tokens_;
  AlignedBuffer x_;         // residual stream        [n][D]
  AlignedBuffer xb_;        // normed input           [n][D]
  AlignedBuffer q_;         // queries (post-RoPE)    [n][n_heads][head_dim]
  AlignedBuffer k_;         // keys (post-RoPE)       [n][n_kv_heads][head_dim]
  AlignedBuffer v_;         // values                 [n][n_kv_heads][head_dim]
  AlignedBuffer attn_;      // attention output       [n][n_heads][head_dim]
  AlignedBuffer gate_;      // FFN gate (then SwiGLU) [n][F]
  AlignedBuffer up_;        // FFN up                 [n][F]
  AlignedBuffer out_rows_;  // normed rows gathered for the LM head [n_out][D]
  AlignedBuffer logits_;    // own logits buffer      [n_out][vocab]
  int64_t token_capacity_ = 0;
  int64_t out_capacity_ = 0;

  // Per sequence: token offset, slots before the call, logits rows; and the
  // per-(sequence, KV head) pointer tables the attention tasks point into.
  std::vector<int64_t> seq_offset_;
  std::vector<int64_t> first_row_, num_rows_;
  std::vector<kernels::AttentionTask> tasks_;
  std::vector<const void*> task_k_, task_v_;
  std::vector<const uint8_t*> task_valid_;
  std::vector<float*> task_accum_;
  std::vector<const SequenceKvCache*> caches_seen_;  // duplicate-cache check
};

// Appends `depth` synthetic tokens (random post-RoPE-like K/V rows (uniform with
// mean 0 and variance 1, from a fixed seed), gen_pos continuing after the cache's last slot,
// all valid) to every layer of `cache`, for benchmarks of attention and
// eviction at a given depth without running a prefill.
Status FillSyntheticKv(SequenceKvCache& cache, int64_t depth, uint64_t seed);

}  // namespace skipkv
