// The forward-pass benchmark driver behind `skipkv bench` (llama-bench
// style): prefill and decode throughput of one model, and batched decode at a
// context depth under a KV policy, measured below the Engine (caches filled
// directly, no scheduler) so that the figures are those of the forward pass
// and the compression alone.
//
//   pp<N>  Prefill(N): N tokens in one call from an empty cache (tokens/s)
//   tg<N>  Decode(1, 0, N, ...) with `full`: N tokens one at a time
//   bd     Decode(B, D, S, ...): B sequences whose caches are filled to depth
//          D directly (FillSyntheticKv; prefilling 16 x 16k tokens would take
//          hours on a CPU), then S decode steps of one token per sequence
//          (tokens/s summed over the batch)
// Under an evicting policy the caches hold what the policy holds at that
// depth in steady state just before a compression (B + Δt − 1 slots plus the
// query window), each step feeds the sequence's KvCompressor, and the first
// step starts on a compression boundary (l % Δt == 0), so every call pays one
// full compression of every layer of every sequence at the real length
// N = B + Δt. tokens_per_s is amortised over Δt steps: batch·steps / (decode
// time + compression time · steps/Δt); compress_share is the compression
// time per step over the decode time per step.
// A policy that uses sentences (skipkv) also runs each sequence's sentence
// hooks (the tracker fed every final hidden row, the PSS / T update before
// the compressing forward) after a warm-up through the whole history
// (sentences of 16 tokens whose hidden rows repeat every 8 sentences, so T
// fills up); their time is reported apart (sentence_share = (bookkeeping per
// step + PSS per Δt steps) / decode time) and excluded from the decode time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "skipkv/kv_config.h"  // KvPolicyConfig
#include "skipkv/status.h"
#include "skipkv/types.h"  // FileLoad, KvDType

namespace skipkv {

struct BenchResult {
  double tokens_per_s = 0;
  double compress_share = 0;  // evicting policies: compression / decode time (0 otherwise)
  double sentence_share = 0;  // policies that use sentences: sentence hooks / decode time
  size_t kv_bytes = 0;        // allocated K+V bytes of all sequences
  // Sentence policies, sequence 0 at the end: |T| and the penalised slots
  // evicted (all compressions of the call), so a run shows the penalty worked.
  double redundant_sentences = 0;
  int64_t penalized_evicted = 0;
};

class ForwardBench {
 public:
  // Opens the model (a .gguf file, HF directory or llama2.c .bin; ":default:"
  // = the embedded one) and checks `kv` (ValidateKvPolicyConfig); a policy
  // that uses sentences also builds its token sets from the model's
  // tokenizer. Errors name the file or the field.
  // `weights`: how the weight files reach memory (EngineOptions::weights).
  static StatusOr<std::unique_ptr<ForwardBench>> Open(const std::string& model_path, KvDType kv_type,
                                                      const KvPolicyConfig& kv, FileLoad weights = FileLoad::kAuto);
  ~ForwardBench();

  // Worker threads of the following calls (ResolveThreadCount's range; 0 =
  // all cores). The default is 1.
  Status SetThreads(int threads);

  // N prefill tokens in one call into a fresh cache (random ids from `seed`).
  StatusOr<double> Prefill(int n, uint64_t seed);
  // `steps` decode steps of `n_seqs` sequences at context depth `depth`
  // (see the file comment); with_policy = false measures the plain forward
  // pass (`full`) whatever the configured policy.
  StatusOr<BenchResult> Decode(int n_seqs, int depth, int steps, bool with_policy, uint64_t seed);

  // For the report header.
  std::string ModelDescription() const;  // ModelConfig::ToString()
  std::string WeightsLoad() const;       // "read into memory (huge pages advised)", "mapped", ...
  size_t weight_bytes() const;           // bytes of all tensors of the file
  // Bytes of weights one decode step reads: every tensor but the token
  // embedding table, of which a step gathers one row, unless that table is
  // also the LM head (tied embeddings). tokens/s times this is the decode
  // bandwidth (the KV a short decode reads is left out: a lower bound).
  size_t decode_weight_bytes() const;
  int64_t parameters() const;            // elements of all tensors
  static const char* SimdTarget();       // the Highway target the kernels dispatch to
  static std::string AmxStatus();        // AMX tiles: "on (Q8_0, Q4_K weights)" or "off (reason)"
  static std::string DecodePrefetchStatus();  // the decode tiles' weight prefetch (SKIPKV_DECODE_PREFETCH)
  static std::string DecodeStreamsStatus();   // the decode tiles' weight streams (SKIPKV_DECODE_STREAMS)

  // Memory read bandwidth on this machine with the current thread count, on
  // the thread pool the tests use: the upper bound a decode step's weight
  // reads are held against. One array of `array_bytes` (rounded up to 2 MiB,
  // huge pages advised as for the weights; the default is far beyond any
  // cache), read in 4 MiB chunks shared out over the threads, each chunk one
  // sequential stream of the target's widest vector loads (kernels::ReadSweep).
  // GB/s = 1e9 bytes read / s, the best of `passes` timed passes after one
  // untimed pass (as STREAM reports it: an upper bound). Read-only: a STREAM triad
  // (2 reads and a write-allocated store, counted as 3 arrays) understated
  // what a decode reads by up to a third on an Intel Xeon (issue 40).
  // array_bytes < 1 MiB or passes < 1 is an InvalidArgument.
  StatusOr<double> ReadBandwidthGBs(size_t array_bytes = size_t{1} << 30, int passes = 5);

  class Impl;

 private:
  explicit ForwardBench(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace skipkv
