// Test helpers for the model layer: random-weight Llama / Qwen2 models built
// in memory as a ModelSource (GGUF names and ggml shapes), and a naive,
// obviously-correct forward pass used as the oracle. The reference uses no
// kernels: full recompute of every token, textbook formulas, double
// accumulators. It reads the weights exactly as stored (f16 values rounded
// back to f32), so any difference is the engine's arithmetic.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "io/model_source.h"
#include "tensor/dtype.h"
#include "tensor/interleaved.h"
#include "tensor/quant.h"
#include "util/fp16.h"

namespace skipkv::testing {

// Deterministic uniform numbers (splitmix64).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float Uniform(float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>((Next() >> 40) * 0x1.0p-24);
  }
  int Int(int n) { return static_cast<int>(Next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t s_;
};

struct TinySpec {
  std::string arch = "qwen2";
  int n_layers = 3;
  int d_model = 48;
  int n_heads = 6;
  int n_kv_heads = 2;
  int head_dim = 8;  // written as key_length when != d_model / n_heads
  int ffn_dim = 80;
  int vocab = 97;
  int context = 256;
  float eps = 1e-6f;
  float theta = 10000.f;
  int rot_dim = 0;  // 0 = head_dim (no key written)
  bool qkv_bias = true;
  bool tied = false;
  std::string rope_layout;  // "" = architecture default (no key)
  // Llama-3 RoPE scaling (factor 0 = none).
  float llama3_factor = 0.f, llama3_low = 1.f, llama3_high = 4.f;
  int llama3_orig_ctx = 64;
  DType weight_type = DType::kF32;  // matrices: kF32, kF16, or a quantised type (rows quantised)
  DType norm_type = DType::kF32;    // norms and biases: kF32, kF16 or kBF16
  bool interleave = false;          // Q4_K / Q8_0 matrices of whole 16-row groups: kQ4_Kx16 / kQ8_0x16
  uint64_t seed = 1;
};

// The weights as f32, row-major [out][in] (exactly the values stored).
struct RefWeights {
  struct Layer {
    std::vector<float> attn_norm, wq, wk, wv, bq, bk, bv, wo, ffn_norm, w_gate, w_up, w_down;
  };
  std::vector<float> embd;  // [vocab][D]
  std::vector<Layer> layers;
  std::vector<float> output_norm, output;  // output [vocab][D]
};

struct TinyModel {
  TinySpec spec;
  std::shared_ptr<ModelSource> source;
  RefWeights ref;
};

namespace internal {

inline float RoundTo(DType t, float x) {
  if (t == DType::kF16) return F16ToF32(F32ToF16(x));
  if (t == DType::kBF16) return BF16ToF32(F32ToBF16(x));
  return x;
}

// Stores `values` (already rounded) as a tensor of type t with ggml dims ne.
inline void AddTensor(ModelSource& src, const std::string& name, DType t, std::vector<int64_t> ne,
                      const std::vector<float>& values) {
  auto buf = std::make_shared<std::vector<uint8_t>>();
  if (t == DType::kF32) {
    buf->resize(values.size() * 4);
    std::memcpy(buf->data(), values.data(), buf->size());
  } else {
    buf->resize(values.size() * 2);
    auto* p = reinterpret_cast<uint16_t*>(buf->data());
    for (size_t i = 0; i < values.size(); ++i)
      p[i] = t == DType::kF16 ? F32ToF16(values[i]) : F32ToBF16(values[i]);
  }
  TensorView v;
  v.name = name;
  v.type = t;
  v.n_dims = static_cast<int>(ne.size());
  for (size_t i = 0; i < ne.size(); ++i) v.ne[i] = ne[i];
  v.data = buf->data();
  src.tensors.push_back(v);
  src.owners.push_back(buf);
}

}  // namespace internal

// Builds a random model: weights uniform in +-1/sqrt(fan_in), norm weights
// around 1, biases small, embeddings in +-1.
inline TinyModel MakeTinyModel(const TinySpec& spec) {
  using internal::AddTensor;
  using internal::RoundTo;
  TinyModel m;
  m.spec = spec;
  m.source = std::make_shared<ModelSource>();
  ModelSource& src = *m.source;
  src.path = "tiny-" + spec.arch;
  Rng rng(spec.seed);
  const std::string a = spec.arch;
  GgufMetadata& md = src.metadata;
  md.Set("general.architecture", GgufValue::Str(a));
  md.Set(a + ".block_count", GgufValue::U32(spec.n_layers));
  md.Set(a + ".embedding_length", GgufValue::U32(spec.d_model));
  md.Set(a + ".attention.head_count", GgufValue::U32(spec.n_heads));
  md.Set(a + ".attention.head_count_kv", GgufValue::U32(spec.n_kv_heads));
  if (spec.head_dim * spec.n_heads != spec.d_model)
    md.Set(a + ".attention.key_length", GgufValue::U32(spec.head_dim));
  md.Set(a + ".feed_forward_length", GgufValue::U32(spec.ffn_dim));
  md.Set(a + ".context_length", GgufValue::U32(spec.context));
  md.Set(a + ".attention.layer_norm_rms_epsilon", GgufValue::F32(spec.eps));
  md.Set(a + ".rope.freq_base", GgufValue::F32(spec.theta));
  if (spec.rot_dim != 0) md.Set(a + ".rope.dimension_count", GgufValue::U32(spec.rot_dim));
  if (!spec.rope_layout.empty()) md.Set("skipkv.rope_layout", GgufValue::Str(spec.rope_layout));
  if (spec.llama3_factor > 0) {
    md.Set(a + ".rope.scaling.type", GgufValue::Str("llama3"));
    md.Set(a + ".rope.scaling.factor", GgufValue::F32(spec.llama3_factor));
    md.Set(a + ".rope.scaling.low_freq_factor", GgufValue::F32(spec.llama3_low));
    md.Set(a + ".rope.scaling.high_freq_factor", GgufValue::F32(spec.llama3_high));
    md.Set(a + ".rope.scaling.original_context_length", GgufValue::U32(spec.llama3_orig_ctx));
  }

  const int D = spec.d_model, Q = spec.n_heads * spec.head_dim, KV = spec.n_kv_heads * spec.head_dim,
            F = spec.ffn_dim, V = spec.vocab;
  auto matrix = [&](const std::string& name, int in, int out, float scale) {
    std::vector<float> w(static_cast<size_t>(in) * out);
    if (IsQuantizable(spec.weight_type) && spec.weight_type != DType::kF16 &&
        spec.weight_type != DType::kBF16 && spec.weight_type != DType::kF32) {
      // Quantise row by row; the reference sees the dequantised values.
      for (float& x : w) x = rng.Uniform(-scale, scale);
      const size_t row_bytes = RowBytes(spec.weight_type, in);
      auto buf = std::make_shared<std::vector<uint8_t>>(row_bytes * out);
      for (int r = 0; r < out; ++r) {
        QuantizeRow(spec.weight_type, w.data() + static_cast<size_t>(r) * in, buf->data() + r * row_bytes,
                    in);
        DequantizeRow(spec.weight_type, buf->data() + r * row_bytes, w.data() + static_cast<size_t>(r) * in,
                      in);
      }
      TensorView v;
      v.name = name;
      v.type = spec.weight_type;
      if (spec.interleave && CanInterleave(spec.weight_type, out, in)) {
        InterleaveRows(spec.weight_type, buf->data(), out, in);
        v.type = *InterleavedType(spec.weight_type);
      }
      v.n_dims = 2;
      v.ne = {in, out, 1, 1};
      v.data = buf->data();
      src.tensors.push_back(v);
      src.owners.push_back(buf);
      return w;
    }
    for (float& x : w) x = RoundTo(spec.weight_type, rng.Uniform(-scale, scale));
    AddTensor(src, name, spec.weight_type, {in, out}, w);
    return w;
  };
  auto vec = [&](const std::string& name, int n, float center, float spread) {
    std::vector<float> w(n);
    for (float& x : w) x = RoundTo(spec.norm_type, center + rng.Uniform(-spread, spread));
    AddTensor(src, name, spec.norm_type, {n}, w);
    return w;
  };
  m.ref.embd = matrix("token_embd.weight", D, V, 1.f);
  m.ref.layers.resize(spec.n_layers);
  for (int l = 0; l < spec.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    RefWeights::Layer& L = m.ref.layers[l];
    L.attn_norm = vec(p + "attn_norm.weight", D, 1.f, 0.3f);
    L.wq = matrix(p + "attn_q.weight", D, Q, 1.5f / std::sqrt(D));
    L.wk = matrix(p + "attn_k.weight", D, KV, 1.5f / std::sqrt(D));
    L.wv = matrix(p + "attn_v.weight", D, KV, 1.f / std::sqrt(D));
    if (spec.qkv_bias) {
      L.bq = vec(p + "attn_q.bias", Q, 0.f, 0.2f);
      L.bk = vec(p + "attn_k.bias", KV, 0.f, 0.2f);
      L.bv = vec(p + "attn_v.bias", KV, 0.f, 0.2f);
    }
    L.wo = matrix(p + "attn_output.weight", Q, D, 1.f / std::sqrt(Q));
    L.ffn_norm = vec(p + "ffn_norm.weight", D, 1.f, 0.3f);
    L.w_gate = matrix(p + "ffn_gate.weight", D, F, 1.f / std::sqrt(D));
    L.w_up = matrix(p + "ffn_up.weight", D, F, 1.f / std::sqrt(D));
    L.w_down = matrix(p + "ffn_down.weight", F, D, 1.f / std::sqrt(F));
  }
  m.ref.output_norm = vec("output_norm.weight", D, 1.f, 0.3f);
  m.ref.output = spec.tied ? m.ref.embd : matrix("output.weight", D, V, 2.f / std::sqrt(D));
  return m;
}

// ---- The naive reference forward ---------------------------------------------

// Per token of a whole sequence: token id, RoPE position, slot validity.
struct RefToken {
  int token = 0;
  int pos = 0;
  bool valid = true;
};

struct RefTrace {
  std::vector<std::vector<float>> logits;                // [n][vocab]
  std::vector<std::vector<float>> final_hidden;          // [n][D]
  std::vector<std::vector<float>> final_residual;        // [n][D] the last layer's output (final norm input)
  std::vector<std::vector<std::vector<float>>> q, k, v;  // [layer][n][H*d | Hkv*d], q and k after RoPE
};

// Residual edit applied to token t at the input of layer l (steering);
// l = n_layers edits the last layer's output, before the final norm.
using RefSteer = std::function<void(int layer, int t, std::vector<float>& x)>;

inline std::vector<float> RefMatVec(const std::vector<float>& w, const std::vector<float>& x, int out) {
  const size_t in = x.size();
  std::vector<float> y(out);
  for (int r = 0; r < out; ++r) {
    double acc = 0;
    for (size_t c = 0; c < in; ++c) acc += static_cast<double>(w[r * in + c]) * x[c];
    y[r] = static_cast<float>(acc);
  }
  return y;
}

inline std::vector<float> RefRmsNorm(const std::vector<float>& x, const std::vector<float>& g, float eps) {
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const double inv = 1.0 / std::sqrt(ss / x.size() + eps);
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(x[i] * inv * g[i]);
  return y;
}

// RoPE by definition: pair i of each head (adjacent: (2i, 2i+1); rotate-half:
// (i, i + rot/2)) rotated by angle pos * theta^(-2i/rot), with Llama-3
// frequency scaling (HF's formula) and linear position scaling.
inline void RefRope(std::vector<float>& x, int n_heads, const TinySpec& s, int pos) {
  const int d = s.head_dim, rot = s.rot_dim ? s.rot_dim : d, half = rot / 2;
  const bool adjacent = s.rope_layout.empty() ? s.arch == "llama" : s.rope_layout == "adjacent_pairs";
  for (int h = 0; h < n_heads; ++h) {
    for (int i = 0; i < half; ++i) {
      double freq = std::pow(static_cast<double>(s.theta), -2.0 * i / rot);
      if (s.llama3_factor > 0) {
        const double wavelen = 2 * std::numbers::pi / freq;
        const double lo_wl = s.llama3_orig_ctx / s.llama3_low, hi_wl = s.llama3_orig_ctx / s.llama3_high;
        if (wavelen > lo_wl) {
          freq /= s.llama3_factor;
        } else if (wavelen >= hi_wl) {
          const double smooth = (s.llama3_orig_ctx / wavelen - s.llama3_low) / (s.llama3_high - s.llama3_low);
          freq = (1 - smooth) * freq / s.llama3_factor + smooth * freq;
        }
      }
      const double ang = pos * freq;
      const int ia = adjacent ? h * d + 2 * i : h * d + i;
      const int ib = adjacent ? h * d + 2 * i + 1 : h * d + i + half;
      const double a = x[ia], b = x[ib];
      x[ia] = static_cast<float>(a * std::cos(ang) - b * std::sin(ang));
      x[ib] = static_cast<float>(a * std::sin(ang) + b * std::cos(ang));
    }
  }
}

// Full recompute of a sequence: token t attends tokens j <= t with valid[j]
// (no visible token: zero output). Returns every token's logits.
inline RefTrace RefForward(const TinyModel& m, const std::vector<RefToken>& seq,
                           const RefSteer& steer = nullptr) {
  const TinySpec& s = m.spec;
  const RefWeights& W = m.ref;
  const int n = static_cast<int>(seq.size()), D = s.d_model, d = s.head_dim;
  const int Q = s.n_heads * d, KV = s.n_kv_heads * d, group = s.n_heads / s.n_kv_heads;
  RefTrace tr;
  std::vector<std::vector<float>> x(n);
  for (int t = 0; t < n; ++t)
    x[t].assign(W.embd.begin() + seq[t].token * D, W.embd.begin() + (seq[t].token + 1) * D);
  tr.q.resize(s.n_layers);
  tr.k.resize(s.n_layers);
  tr.v.resize(s.n_layers);
  for (int l = 0; l < s.n_layers; ++l) {
    const RefWeights::Layer& L = W.layers[l];
    auto& q = tr.q[l];
    auto& k = tr.k[l];
    auto& v = tr.v[l];
    q.resize(n);
    k.resize(n);
    v.resize(n);
    for (int t = 0; t < n; ++t) {
      if (steer) steer(l, t, x[t]);
      const std::vector<float> h = RefRmsNorm(x[t], L.attn_norm, s.eps);
      q[t] = RefMatVec(L.wq, h, Q);
      k[t] = RefMatVec(L.wk, h, KV);
      v[t] = RefMatVec(L.wv, h, KV);
      for (int i = 0; i < Q && !L.bq.empty(); ++i) q[t][i] += L.bq[i];
      for (int i = 0; i < KV && !L.bk.empty(); ++i) k[t][i] += L.bk[i];
      for (int i = 0; i < KV && !L.bv.empty(); ++i) v[t][i] += L.bv[i];
      RefRope(q[t], s.n_heads, s, seq[t].pos);
      RefRope(k[t], s.n_kv_heads, s, seq[t].pos);
    }
    for (int t = 0; t < n; ++t) {
      std::vector<float> o(Q, 0.f);
      for (int qh = 0; qh < s.n_heads; ++qh) {
        const int kh = qh / group;
        std::vector<double> sc(t + 1, -INFINITY);
        double mx = -INFINITY;
        for (int j = 0; j <= t; ++j) {
          if (!seq[j].valid) continue;
          double dot = 0;
          for (int e = 0; e < d; ++e) dot += static_cast<double>(q[t][qh * d + e]) * k[j][kh * d + e];
          sc[j] = dot / std::sqrt(static_cast<double>(d));
          mx = std::max(mx, sc[j]);
        }
        if (mx == -INFINITY) continue;
        double sum = 0;
        for (int j = 0; j <= t; ++j) sum += seq[j].valid ? std::exp(sc[j] - mx) : 0.0;
        for (int e = 0; e < d; ++e) {
          double acc = 0;
          for (int j = 0; j <= t; ++j) {
            if (seq[j].valid) acc += std::exp(sc[j] - mx) / sum * v[j][kh * d + e];
          }
          o[qh * d + e] = static_cast<float>(acc);
        }
      }
      const std::vector<float> proj = RefMatVec(L.wo, o, D);
      for (int i = 0; i < D; ++i) x[t][i] += proj[i];
      const std::vector<float> h = RefRmsNorm(x[t], L.ffn_norm, s.eps);
      const std::vector<float> g = RefMatVec(L.w_gate, h, s.ffn_dim);
      const std::vector<float> u = RefMatVec(L.w_up, h, s.ffn_dim);
      std::vector<float> a(s.ffn_dim);
      for (int i = 0; i < s.ffn_dim; ++i)
        a[i] = static_cast<float>(g[i] / (1.0 + std::exp(-double{g[i]})) * u[i]);
      const std::vector<float> down = RefMatVec(L.w_down, a, D);
      for (int i = 0; i < D; ++i) x[t][i] += down[i];
    }
  }
  tr.final_hidden.resize(n);
  tr.logits.resize(n);
  for (int t = 0; t < n; ++t) {
    if (steer) steer(s.n_layers, t, x[t]);
    tr.final_residual.push_back(x[t]);
    tr.final_hidden[t] = RefRmsNorm(x[t], W.output_norm, s.eps);
    tr.logits[t] = RefMatVec(W.output, tr.final_hidden[t], s.vocab);
  }
  return tr;
}

// max |a - b| / max |b| over a row (0 when both are zero).
inline double RelErr(const float* a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num = std::max(num, std::fabs(double{a[i]} - b[i]));
    den = std::max(den, std::fabs(double{b[i]}));
  }
  return den == 0 ? num : num / den;
}

}  // namespace skipkv::testing
