// The transformer forward pass (Llama / Qwen2), batched over ragged
// sequences. Reads top to bottom like the architecture:
//
//   x = E[token]                                        [n, D]
//   for each layer l:
//     (residual hook)
//     h = RMSNorm(x) * g_attn
//     q = h Wq + bq, k = h Wk + bk, v = h Wv + bv       [n, H, d], [n, Hkv, d], [n, Hkv, d]
//     q, k = RoPE(q, pos), RoPE(k, pos)
//     cache.append(k, v); o = softmax(q K^T / sqrt(d) + mask) V   (per sequence, GQA)
//     x = x + o Wo
//     h = RMSNorm(x) * g_ffn
//     x = x + (silu(h Wgate) * (h Wup)) Wdown
//   y = RMSNorm(x) * g_out                              (final hidden hook)
//   logits = y Wout                                     [n_out, vocab]
#include "model/forward.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/ops.h"
#include "util/check.h"

namespace skipkv {

namespace {

// y = x W^T for n rows (MatVec when n == 1, the decode case).
void Project(const TensorView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  if (n == 1) {
    kernels::MatVec(w, x, y, pool);
  } else {
    kernels::MatMul(w, x, n, y, pool);
  }
}

// Runs fn(t) for every token t in [0, n), in parallel over fixed chunks.
template <typename Fn>
void ForEachToken(ThreadPool& pool, int64_t n, int64_t row_floats, Fn&& fn) {
  // Chunks of roughly 64K floats of work keep small decode batches on one thread.
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(row_floats, 1));
  pool.ParallelFor(n, grain, [&](int64_t begin, int64_t end, int /*worker*/) {
    for (int64_t t = begin; t < end; ++t) fn(t);
  });
}

int64_t RowsFor(const SequenceInput& s) {
  switch (s.logits) {
    case LogitsMode::kNone:
      return 0;
    case LogitsMode::kLast:
      return s.tokens.empty() ? 0 : 1;
    case LogitsMode::kAll:
      return static_cast<int64_t>(s.tokens.size());
  }
  return 0;
}

float* Floats(AlignedBuffer& b) { return b.as<float>(); }

}  // namespace

int64_t NumLogitRows(std::span<const SequenceInput> seqs) {
  int64_t rows = 0;
  for (const SequenceInput& s : seqs) rows += RowsFor(s);
  return rows;
}

ForwardPass::ForwardPass(const Model& model) : model_(model), cfg_(model.config()) {}

// ---- Input validation ------------------------------------------------------

Status ForwardPass::Validate(const SequenceInput& s) const {
  if (s.cache == nullptr) return InvalidArgument("no KV cache given");
  const size_t n = s.tokens.size();
  if (n == 0) return InvalidArgument("no tokens given");
  if (s.pos.size() != n) {
    return InvalidArgument("pos has " + std::to_string(s.pos.size()) + " entries for " + std::to_string(n) +
                           " tokens");
  }
  if (!s.gen_pos.empty() && s.gen_pos.size() != n) {
    return InvalidArgument("gen_pos has " + std::to_string(s.gen_pos.size()) + " entries for " +
                           std::to_string(n) + " tokens");
  }
  if (!s.valid.empty() && s.valid.size() != n) {
    return InvalidArgument("valid has " + std::to_string(s.valid.size()) + " entries for " +
                           std::to_string(n) + " tokens");
  }
  const KvCacheShape& cs = s.cache->shape();
  if (cs.n_layers != cfg_.n_layers || cs.n_heads != cfg_.n_heads || cs.n_kv_heads != cfg_.n_kv_heads ||
      cs.head_dim != cfg_.head_dim) {
    return InvalidArgument("KV cache shape (layers " + std::to_string(cs.n_layers) + ", heads " +
                           std::to_string(cs.n_heads) + ", kv heads " + std::to_string(cs.n_kv_heads) +
                           ", head dim " + std::to_string(cs.head_dim) + ") does not match the model (" +
                           std::to_string(cfg_.n_layers) + ", " + std::to_string(cfg_.n_heads) + ", " +
                           std::to_string(cfg_.n_kv_heads) + ", " + std::to_string(cfg_.head_dim) + ")");
  }
  for (size_t i = 0; i < n; ++i) {
    if (s.tokens[i] < 0 || s.tokens[i] >= cfg_.vocab_size) {
      return InvalidArgument("token id " + std::to_string(s.tokens[i]) + " at index " + std::to_string(i) +
                             " is out of range [0, " + std::to_string(cfg_.vocab_size) + ")");
    }
    if (s.pos[i] < 0 || s.pos[i] >= cfg_.context_length) {
      return OutOfRange("position " + std::to_string(s.pos[i]) + " at index " + std::to_string(i) +
                        " is beyond the context length " + std::to_string(cfg_.context_length));
    }
  }
  // gen_pos: non-negative, strictly increasing, above every live slot.
  int32_t last = -1;
  for (int l = 0; l < cfg_.n_layers; ++l) {
    const int64_t size = s.cache->size(l);
    if (size == 0) continue;
    for (int h = 0; h < cfg_.n_kv_heads; ++h) last = std::max(last, s.cache->GenPos(l, h)[size - 1]);
  }
  for (size_t i = 0; i < n; ++i) {
    const int32_t g = s.gen_pos.empty() ? s.pos[i] : s.gen_pos[i];
    if (g <= last) {
      return InvalidArgument("gen_pos " + std::to_string(g) + " at index " + std::to_string(i) +
                             " does not exceed the previous slot's gen_pos " + std::to_string(last) +
                             " (slots must stay in ascending position order)");
    }
    last = g;
  }
  if (s.cache->max_capacity() != SequenceKvCache::kUnbounded) {
    for (int l = 0; l < cfg_.n_layers; ++l) {
      if (s.cache->size(l) + static_cast<int64_t>(n) > s.cache->max_capacity()) {
        return OutOfRange("KV cache of layer " + std::to_string(l) + " holds " +
                          std::to_string(s.cache->size(l)) + " slots; " + std::to_string(n) +
                          " more exceed its capacity " + std::to_string(s.cache->max_capacity()));
      }
    }
  }
  return Status::Ok();
}

// ---- Scratch -----------------------------------------------------------------

void ForwardPass::EnsureScratch(int64_t n_tokens, int64_t n_out, size_t n_seqs) {
  const size_t f = sizeof(float);
  if (n_tokens > token_capacity_) {
    const size_t n = static_cast<size_t>(n_tokens);
    x_.Resize(n * cfg_.d_model * f);
    xb_.Resize(n * cfg_.d_model * f);
    q_.Resize(n * cfg_.q_dim() * f);
    k_.Resize(n * cfg_.kv_dim() * f);
    v_.Resize(n * cfg_.kv_dim() * f);
    attn_.Resize(n * cfg_.q_dim() * f);
    gate_.Resize(n * cfg_.ffn_dim * f);
    up_.Resize(n * cfg_.ffn_dim * f);
    token_capacity_ = n_tokens;
  }
  if (n_out > out_capacity_) {
    out_rows_.Resize(static_cast<size_t>(n_out) * cfg_.d_model * f);
    logits_.Resize(static_cast<size_t>(n_out) * cfg_.vocab_size * f);
    out_capacity_ = n_out;
  }
  tokens_.resize(static_cast<size_t>(n_tokens));
  seq_offset_.resize(n_seqs + 1);
  first_row_.resize(n_seqs);
  num_rows_.resize(n_seqs);
  tasks_.resize(n_seqs);
  task_k_.resize(n_seqs * cfg_.n_kv_heads);
  task_v_.resize(n_seqs * cfg_.n_kv_heads);
  task_valid_.resize(n_seqs * cfg_.n_kv_heads);
  task_accum_.resize(n_seqs * cfg_.n_kv_heads);
}

// ---- Attention of one layer over every sequence ------------------------------

// Appends this layer's new K/V to each sequence's cache, pushes the last
// queries into the query window, then runs one attention task per sequence.
void ForwardPass::Attend(int layer, const ForwardBatch& batch, ThreadPool& pool) {
  const size_t n_seqs = batch.seqs.size();
  const int hkv = cfg_.n_kv_heads;
  const int q_dim = cfg_.q_dim(), kv_dim = cfg_.kv_dim();
  float* q = Floats(q_);
  const float* k = Floats(k_);
  const float* v = Floats(v_);

  // Sequences own distinct caches, so they can append in parallel.
  pool.Run(static_cast<int64_t>(n_seqs), [&](int64_t s, int /*worker*/) {
    SequenceKvCache& cache = *batch.seqs[s].cache;
    const int64_t off = seq_offset_[s], n = seq_offset_[s + 1] - off;
    const int64_t first_slot = cache.size(layer);
    for (int64_t i = 0; i < n; ++i) {
      const BatchToken& tk = tokens_[off + i];
      cache.Append(layer, k + (off + i) * kv_dim, v + (off + i) * kv_dim, tk.gen_pos, tk.valid);
    }
    const int window = cache.shape().query_window;
    for (int64_t i = std::max<int64_t>(0, n - window); i < n; ++i)
      cache.PushQuery(layer, q + (off + i) * q_dim);

    kernels::AttentionTask& task = tasks_[s];
    const bool track = cache.shape().track_attention;
    for (int h = 0; h < hkv; ++h) {
      task_k_[s * hkv + h] = cache.K(layer, h);
      task_v_[s * hkv + h] = cache.V(layer, h);
      task_valid_[s * hkv + h] = cache.Valid(layer, h);
      task_accum_[s * hkv + h] = track ? cache.AttentionScore(layer, h) : nullptr;
    }
    task.q = q + off * q_dim;
    task.n_q = static_cast<int>(n);
    task.n_slots = cache.size(layer);
    task.first_query_slot = first_slot;
    task.k = task_k_.data() + s * hkv;
    task.v = task_v_.data() + s * hkv;
    task.valid = task_valid_.data() + s * hkv;
    task.attn_accum = track ? task_accum_.data() + s * hkv : nullptr;
    task.out = Floats(attn_) + off * q_dim;
  });

  kernels::AttentionShape shape;
  shape.n_heads = cfg_.n_heads;
  shape.n_kv_heads = hkv;
  shape.head_dim = cfg_.head_dim;
  shape.kv_type = batch.seqs[0].cache->shape().dtype == KvDType::kF16 ? DType::kF16 : DType::kF32;
  shape.scale = 1.f / std::sqrt(static_cast<float>(cfg_.head_dim));
  kernels::Attention(shape, std::span<const kernels::AttentionTask>(tasks_.data(), n_seqs), pool);
}

// ---- The forward pass ----------------------------------------------------------

StatusOr<ForwardOutput> ForwardPass::Run(const ForwardBatch& batch, ThreadPool& pool) {
  const size_t n_seqs = batch.seqs.size();
  if (n_seqs == 0) return InvalidArgument("forward batch has no sequences");

  // Validate everything before touching any cache.
  int64_t n_tok = 0;
  for (size_t s = 0; s < n_seqs; ++s) {
    const SequenceInput& in = batch.seqs[s];
    Status st = Validate(in);
    if (!st.ok()) return st.WithContext("sequence " + std::to_string(s));
    if (in.cache->shape().dtype != batch.seqs[0].cache->shape().dtype) {
      return InvalidArgument("sequence " + std::to_string(s) +
                             ": KV cache dtype differs from sequence 0's (one dtype per batch)");
    }
    n_tok += static_cast<int64_t>(in.tokens.size());
  }
  // Sequences append in parallel, so each must own its cache.
  caches_seen_.clear();
  for (const SequenceInput& in : batch.seqs) caches_seen_.push_back(in.cache);
  std::sort(caches_seen_.begin(), caches_seen_.end());
  if (std::adjacent_find(caches_seen_.begin(), caches_seen_.end()) != caches_seen_.end()) {
    return InvalidArgument(
        "two sequences of the batch share one KV cache (each sequence needs its own; "
        "a KV cache is already used by another sequence)");
  }
  const int64_t n_out = NumLogitRows(batch.seqs);
  for (size_t s = 0; s < n_seqs; ++s)
    SKIPKV_RETURN_IF_ERROR(batch.seqs[s].cache->Reserve(batch.seqs[s].tokens.size()));

  EnsureScratch(n_tok, n_out, n_seqs);

  // Token descriptors and per-sequence offsets / logits rows.
  int64_t t = 0, row = 0;
  for (size_t s = 0; s < n_seqs; ++s) {
    const SequenceInput& in = batch.seqs[s];
    const int64_t n = static_cast<int64_t>(in.tokens.size());
    seq_offset_[s] = t;
    for (int64_t i = 0; i < n; ++i, ++t) {
      BatchToken& tk = tokens_[t];
      tk.seq = static_cast<int32_t>(s);
      tk.index = static_cast<int32_t>(i);
      tk.token = in.tokens[i];
      tk.pos = in.pos[i];
      tk.gen_pos = in.gen_pos.empty() ? in.pos[i] : in.gen_pos[i];
      tk.valid = in.valid.empty() || in.valid[i] != 0;
      tk.last = i == n - 1;
    }
    first_row_[s] = row;
    num_rows_[s] = RowsFor(in);
    row += num_rows_[s];
  }
  seq_offset_[n_seqs] = t;
  const std::span<const BatchToken> toks(tokens_.data(), static_cast<size_t>(n_tok));

  const ModelWeights& W = model_.weights();
  const int D = cfg_.d_model, ffn = cfg_.ffn_dim, q_dim = cfg_.q_dim(), kv_dim = cfg_.kv_dim();
  float* x = Floats(x_);
  float* xb = Floats(xb_);
  float* q = Floats(q_);
  float* k = Floats(k_);
  float* v = Floats(v_);
  float* gate = Floats(gate_);
  float* up = Floats(up_);

  // x = E[token]
  ForEachToken(pool, n_tok, D, [&](int64_t i) { kernels::GetRow(W.token_embd, toks[i].token, x + i * D); });

  for (int l = 0; l < cfg_.n_layers; ++l) {
    const LayerWeights& lw = W.layers[l];
    if (batch.residual_hook) batch.residual_hook(l, toks, x);

    // ---- Attention block: x += Attn(RMSNorm(x)) Wo
    ForEachToken(pool, n_tok, D, [&](int64_t i) {
      kernels::RmsNorm(x + i * D, lw.attn_norm.data(), D, cfg_.rms_eps, xb + i * D);
    });
    const kernels::MatMulOut qkv[] = {{&lw.wq, q}, {&lw.wk, k}, {&lw.wv, v}};
    kernels::MatMulGroup(qkv, xb, n_tok, pool);  // one parallel loop for the three
    ForEachToken(pool, n_tok, q_dim + 2 * kv_dim, [&](int64_t i) {
      float* qi = q + i * q_dim;
      float* ki = k + i * kv_dim;
      if (!lw.bq.empty()) kernels::Add(qi, lw.bq.data(), q_dim);
      if (!lw.bk.empty()) kernels::Add(ki, lw.bk.data(), kv_dim);
      if (!lw.bv.empty()) kernels::Add(v + i * kv_dim, lw.bv.data(), kv_dim);
      kernels::Rope(qi, cfg_.n_heads, cfg_.head_dim, toks[i].pos, cfg_.rope);
      kernels::Rope(ki, cfg_.n_kv_heads, cfg_.head_dim, toks[i].pos, cfg_.rope);
    });
    Attend(l, batch, pool);                     // attn_ = softmax(q K^T / sqrt(d)) V
    Project(lw.wo, Floats(attn_), n_tok, xb, pool);  // xb = attn Wo
    ForEachToken(pool, n_tok, D, [&](int64_t i) { kernels::Add(x + i * D, xb + i * D, D); });

    // ---- FFN block (SwiGLU): x += (silu(h Wgate) * (h Wup)) Wdown
    ForEachToken(pool, n_tok, D, [&](int64_t i) {
      kernels::RmsNorm(x + i * D, lw.ffn_norm.data(), D, cfg_.rms_eps, xb + i * D);
    });
    const kernels::MatMulOut gate_up[] = {{&lw.w_gate, gate}, {&lw.w_up, up}};
    kernels::MatMulGroup(gate_up, xb, n_tok, pool);
    ForEachToken(pool, n_tok, ffn,
                 [&](int64_t i) { kernels::SiluMul(gate + i * ffn, up + i * ffn, gate + i * ffn, ffn); });
    Project(lw.w_down, gate, n_tok, xb, pool);
    ForEachToken(pool, n_tok, D, [&](int64_t i) { kernels::Add(x + i * D, xb + i * D, D); });
  }
  // The last layer's output (the final norm's input), as "layer n_layers".
  if (batch.residual_hook) batch.residual_hook(cfg_.n_layers, toks, x);

  // ---- Final norm: y = RMSNorm(x) * g_out. All tokens when the hook wants
  // them, otherwise only the rows that produce logits.
  float* y = Floats(out_rows_);
  if (batch.final_hidden_hook) {
    ForEachToken(pool, n_tok, D, [&](int64_t i) {
      kernels::RmsNorm(x + i * D, W.output_norm.data(), D, cfg_.rms_eps, xb + i * D);
    });
    batch.final_hidden_hook(toks, xb);
  }
  // Gather the rows that produce logits, in sequence order.
  int64_t r = 0;
  for (size_t s = 0; s < n_seqs; ++s) {
    const int64_t end = seq_offset_[s + 1];
    for (int64_t i = end - num_rows_[s]; i < end; ++i, ++r) {
      if (batch.final_hidden_hook) {
        std::copy_n(xb + i * D, D, y + r * D);
      } else {
        kernels::RmsNorm(x + i * D, W.output_norm.data(), D, cfg_.rms_eps, y + r * D);
      }
    }
  }
  SKIPKV_CHECK(r == n_out);

  // ---- LM head: logits = y Wout
  float* logits = batch.logits != nullptr ? batch.logits : Floats(logits_);
  if (n_out > 0) Project(W.output, y, n_out, logits, pool);

  ForwardOutput out;
  out.logits = logits;
  out.n_rows = n_out;
  out.vocab = cfg_.vocab_size;
  out.seq_first_row = std::span<const int64_t>(first_row_.data(), n_seqs);
  out.seq_num_rows = std::span<const int64_t>(num_rows_.data(), n_seqs);
  return out;
}

// ---- Synthetic KV for benchmarks ------------------------------------------------

Status FillSyntheticKv(SequenceKvCache& cache, int64_t depth, uint64_t seed) {
  if (depth < 0) return InvalidArgument("FillSyntheticKv: negative depth " + std::to_string(depth));
  SKIPKV_RETURN_IF_ERROR(cache.Reserve(depth));
  const KvCacheShape& cs = cache.shape();
  int32_t last = -1;
  for (int l = 0; l < cs.n_layers; ++l) {
    if (cache.size(l) == 0) continue;
    for (int h = 0; h < cs.n_kv_heads; ++h) last = std::max(last, cache.GenPos(l, h)[cache.size(l) - 1]);
  }
  // splitmix64 -> two uniform floats in [-sqrt(3), sqrt(3)) per draw (mean 0,
  // variance 1): the same values on every platform, and cheap enough to fill
  // 16 sequences x 16k tokens x 28 layers in seconds (a Box-Muller normal per
  // element took minutes, and attention's cost does not depend on the shape
  // of the distribution).
  uint64_t state = seed;
  auto next_u64 = [&state] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  constexpr float kScale = 1.7320508f * 0x1.0p-31f;  // sqrt(3) / 2^31
  auto fill = [&](std::vector<float>& out) {
    for (size_t j = 0; j + 1 < out.size(); j += 2) {
      const uint64_t r = next_u64();
      out[j] = static_cast<float>(static_cast<int32_t>(r)) * kScale;
      out[j + 1] = static_cast<float>(static_cast<int32_t>(r >> 32)) * kScale;
    }
    if (out.size() % 2) out.back() = static_cast<float>(static_cast<int32_t>(next_u64())) * kScale;
  };
  const size_t row = static_cast<size_t>(cs.n_kv_heads) * cs.head_dim;
  std::vector<float> k(row), v(row);
  for (int l = 0; l < cs.n_layers; ++l) {
    for (int64_t i = 0; i < depth; ++i) {
      fill(k);
      fill(v);
      cache.Append(l, k.data(), v.data(), static_cast<int32_t>(last + 1 + i), true);
    }
  }
  return Status::Ok();
}

}  // namespace skipkv
