// KvCompressor and KvTraceWriter (see kv_compressor.h).
#include "kv/kv_compressor.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "kernels/ops.h"
#include "util/check.h"
#include "util/fp16.h"

namespace skipkv {

StatusOr<std::shared_ptr<KvTraceWriter>> KvTraceWriter::Open(const std::string& path) {
  std::ofstream out(path, std::ios::out | std::ios::trunc);
  if (!out) return IoError("cannot open the KV eviction trace '" + path + "' for writing");
  return std::shared_ptr<KvTraceWriter>(new KvTraceWriter(std::move(out)));
}

void KvTraceWriter::WriteLine(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  out_ << line << '\n';
}

void KvTraceWriter::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  out_.flush();
}

KvCompressor::KvCompressor(std::shared_ptr<const KvPolicy> policy, int64_t sequence_id,
                           std::shared_ptr<KvTraceWriter> trace)
    : policy_(std::move(policy)), sequence_id_(sequence_id), trace_(std::move(trace)) {
  SKIPKV_CHECK(policy_ != nullptr);
  state_ = policy_->NewSequenceState();
  for (int layer : policy_->config().trace_layers) {
    if (layer >= static_cast<int>(traced_layer_.size())) traced_layer_.resize(layer + 1, 0);
    traced_layer_[layer] = 1;
  }
  stats_.effective_budget = policy_->evicts() ? policy_->budget() : 0;
}

StatusOr<std::unique_ptr<KvCompressor>> KvCompressor::Create(const KvPolicyConfig& config,
                                                             int64_t sequence_id) {
  SKIPKV_ASSIGN_OR_RETURN(auto policy, CreateKvPolicy(config));
  std::shared_ptr<KvTraceWriter> trace;
  if (!config.trace_path.empty()) {
    SKIPKV_ASSIGN_OR_RETURN(trace, KvTraceWriter::Open(config.trace_path));
  }
  return std::make_unique<KvCompressor>(std::move(policy), sequence_id, std::move(trace));
}

void AuthorsPadMask(int64_t seen, int64_t n, int64_t pad_len, uint8_t* valid_out) {
  for (int64_t s = 0; s < n; ++s) valid_out[s] = (seen - n + s >= pad_len) ? 1 : 0;
}

Status KvCompressor::Reset(int64_t pad_len) { return Reset(pad_len, policy_->NewSequenceState()); }

Status KvCompressor::Reset(int64_t pad_len, std::unique_ptr<KvSequenceState> state) {
  const int64_t pads[1] = {pad_len};
  SKIPKV_RETURN_IF_ERROR(ValidatePadLens(policy_->config(), pads));
  stats_ = KvCompressionStats{};
  stats_.pad_len = pad_len;
  stats_.effective_budget = policy_->evicts() ? policy_->budget() - pad_len : 0;
  state_ = std::move(state);
  pinned_prompt_.set_end(0);
  return Status::Ok();
}

bool KvCompressor::Scheduled(int64_t l_before, int64_t l_after, ForwardKind kind) const {
  if (!policy_->evicts()) return false;
  switch (kind) {
    case ForwardKind::kPrefillPartial:
      return false;
    case ForwardKind::kPrefill:
      return true;  // prompt compression (A11), if a layer holds ≥ B slots
    case ForwardKind::kDecode: {
      // Some l in [l_before, l_after) with l > 0 and l % Δt == 0.
      const int64_t dt = policy_->config().interval;
      const int64_t from = std::max<int64_t>(l_before, 1);
      const int64_t first_multiple = (from + dt - 1) / dt * dt;
      return first_multiple < l_after;
    }
  }
  return false;
}

void KvCompressor::UpdateMemoryStats(const SequenceKvCache& cache, bool before_compression) {
  const size_t live = cache.LiveKvBytes();
  stats_.live_kv_bytes = live;
  stats_.peak_live_kv_bytes = std::max(stats_.peak_live_kv_bytes, live);
  stats_.allocated_kv_bytes = cache.AllocatedKvBytes();
  stats_.allocated_metadata_bytes = cache.AllocatedMetadataBytes();
  if (before_compression) {
    for (int l = 0; l < cache.shape().n_layers; ++l)
      stats_.peak_slots = std::max(stats_.peak_slots, cache.size(l));
  }
}

void KvCompressor::AfterForward(SequenceKvCache& cache, int64_t l_before, int64_t l_after, ForwardKind kind,
                                ThreadPool* pool) {
  UpdateMemoryStats(cache, /*before_compression=*/true);
  if (kind == ForwardKind::kPrefillPartial || kind == ForwardKind::kPrefill) pinned_prompt_.set_end(l_after);
  if (Scheduled(l_before, l_after, kind)) CompressNow(cache, l_before, pool);
}

int KvCompressor::CompressNow(SequenceKvCache& cache, int64_t l, ThreadPool* pool) {
  if (!policy_->evicts()) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  // Layers over budget (a layer at exactly B would keep everything).
  std::vector<int> due;
  std::vector<int64_t> n_before;
  for (int layer = 0; layer < cache.shape().n_layers; ++layer) {
    if (cache.size(layer) > policy_->budget()) {
      due.push_back(layer);
      n_before.push_back(cache.size(layer));
    }
  }
  if (due.empty()) return 0;
  UpdateMemoryStats(cache, /*before_compression=*/true);

  const int n_workers = pool ? pool->num_threads() : 1;
  if (static_cast<int>(workers_.size()) < n_workers) workers_.resize(n_workers);
  std::vector<LayerResult> results(due.size());
  auto run = [&](int64_t task, int worker) { results[task] = CompressLayer(cache, due[task], l, worker); };
  if (pool && pool->num_threads() > 1 && due.size() > 1) {
    pool->Run(static_cast<int64_t>(due.size()), run);
  } else {
    for (size_t t = 0; t < due.size(); ++t) run(static_cast<int64_t>(t), 0);
  }

  ++stats_.compressions;
  stats_.layer_compressions += static_cast<int64_t>(due.size());
  int64_t penalized = 0;
  for (const LayerResult& r : results) stats_.slots_evicted += r.evicted, penalized += r.penalized;
  if (has_adjuster()) {
    stats_.penalized_evicted += penalized;
    stats_.penalized_evicted_per_compression.push_back(penalized);
  }
  if (trace_) {
    for (size_t t = 0; t < due.size(); ++t) {
      const int layer = due[t];
      if (traced_layer_.empty() || (layer < static_cast<int>(traced_layer_.size()) && traced_layer_[layer])) {
        Trace(l, layer, n_before[t], results[t], cache);
      }
    }
  }
  UpdateMemoryStats(cache, /*before_compression=*/false);
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<int>(due.size());
}

KvCompressor::LayerResult KvCompressor::CompressLayer(SequenceKvCache& cache, int layer, int64_t l,
                                                      int worker) {
  Worker& w = workers_[worker];
  const KvCacheShape& shape = cache.shape();
  const int hk = shape.n_kv_heads, d = shape.head_dim;
  const int64_t n = cache.size(layer), b = policy_->budget();

  std::vector<const int32_t*> gen_pos(hk);
  std::vector<const uint8_t*> valid(hk);
  std::vector<const float*> attention;
  for (int h = 0; h < hk; ++h) {
    gen_pos[h] = cache.GenPos(layer, h);
    valid[h] = cache.Valid(layer, h);
  }
  const SlotScoreAdjuster* adjusters[3] = {state_ ? state_->adjuster() : nullptr, extra_adjuster_,
                                           policy_->config().pin_prompt ? &pinned_prompt_ : nullptr};

  KvLayerInput in;
  in.layer = layer;
  in.n_slots = n;
  in.n_heads = shape.n_heads;
  in.n_kv_heads = hk;
  in.head_dim = d;
  in.gen_pos = gen_pos;
  in.valid = valid;
  in.padded = policy_->config().pad_policy == PadPolicy::kPadded;
  if (in.padded && policy_->config().pad_mask_seen_tokens) {
    w.valid.resize(static_cast<size_t>(hk) * n);
    for (int h = 0; h < hk; ++h) {
      uint8_t* v = w.valid.data() + static_cast<size_t>(h) * n;
      AuthorsPadMask(static_cast<int64_t>(gen_pos[h][n - 1]) + 1, n, stats_.pad_len, v);
      valid[h] = v;
    }
  }
  in.adjusters = adjusters;
  if (policy_->needs_keys()) {
    // Keys as f32, [hk][n][d]: one bulk conversion per head.
    w.keys.resize(static_cast<size_t>(hk) * n * d);
    for (int h = 0; h < hk; ++h) {
      float* dst = w.keys.data() + static_cast<size_t>(h) * n * d;
      if (shape.dtype == KvDType::kF16) {
        kernels::ConvertF16ToF32(static_cast<const f16_t*>(cache.K(layer, h)), dst, n * d);
      } else {
        std::memcpy(dst, cache.K(layer, h), static_cast<size_t>(n) * d * sizeof(float));
      }
    }
    in.keys = w.keys.data();
  }
  if (policy_->needs_queries()) {
    const int count = cache.QueryWindowCount(layer);
    SKIPKV_CHECK_MSG(count >= 1, "KV policy needs the query window, but no query was pushed");
    w.queries.resize(static_cast<size_t>(shape.n_heads) * count * d);
    cache.CopyQueryWindow(layer, w.queries.data());
    in.queries = w.queries.data();
    in.n_queries = count;
  }
  if (policy_->needs_attention_scores()) {
    attention.resize(hk);
    for (int h = 0; h < hk; ++h) attention[h] = cache.AttentionScore(layer, h);
    in.attention = attention;
  }

  policy_->SelectKeep(in, w.scratch, w.keep);
  SKIPKV_CHECK(static_cast<int>(w.keep.size()) == hk);
  for (const auto& k : w.keep) SKIPKV_CHECK(static_cast<int64_t>(k.size()) == b);
  LayerResult result;
  result.evicted = (n - b) * hk;
  if (adjusters[0] || adjusters[1]) {
    // The evicted gen_pos of each head (the complement of its ascending keep
    // set), counted by every adjuster that penalised them.
    for (int h = 0; h < hk; ++h) {
      w.evicted.clear();
      size_t next = 0;
      for (int64_t s = 0; s < n; ++s) {
        if (next < w.keep[h].size() && w.keep[h][next] == s) {
          ++next;
        } else {
          w.evicted.push_back(gen_pos[h][s]);
        }
      }
      // With two adjusters a slot both penalise counts twice; the engine installs at most one.
      for (const SlotScoreAdjuster* a : adjusters)
        if (a) result.penalized += a->CountPenalized(w.evicted);
    }
  }
  cache.Compact(layer, w.keep);
  return result;
}

void KvCompressor::Trace(int64_t l, int layer, int64_t n_before, const LayerResult& result,
                         const SequenceKvCache& cache) {
  std::string line = "{\"seq\":" + std::to_string(sequence_id_) + ",\"l\":" + std::to_string(l) +
                     ",\"layer\":" + std::to_string(layer) + ",\"n\":" + std::to_string(n_before);
  if (has_adjuster()) {
    int64_t ranges = 0;
    for (const SlotScoreAdjuster* a : {state_ ? state_->adjuster() : nullptr, extra_adjuster_})
      if (a) ranges += a->RangeCount();
    line += ",\"penalized_ranges\":" + std::to_string(ranges) +
            ",\"penalized_evicted\":" + std::to_string(result.penalized);
  }
  if (policy_->config().pad_policy == PadPolicy::kPadded) {
    line += ",\"pad_len\":" + std::to_string(stats_.pad_len) +
            ",\"effective_budget\":" + std::to_string(stats_.effective_budget);
  }
  line += ",\"kept\":[";
  const int64_t n = cache.size(layer);
  for (int h = 0; h < cache.shape().n_kv_heads; ++h) {
    const int32_t* gp = cache.GenPos(layer, h);
    line += h ? ",[" : "[";
    for (int64_t i = 0; i < n;) {
      int64_t j = i;
      while (j + 1 < n && gp[j + 1] == gp[j] + 1) ++j;
      if (i) line += ',';
      line += '[' + std::to_string(gp[i]) + ',' + std::to_string(gp[j]) + ']';
      i = j + 1;
    }
    line += ']';
  }
  line += "]}";
  trace_->WriteLine(line);
}

}  // namespace skipkv
