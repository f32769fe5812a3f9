// kernels::ref — the scalar oracles of every kernel in ops.h. They favour
// obvious correctness over speed: weights are dequantised row by row with the
// reference DequantizeRow, sums are accumulated in double, and attention is
// the textbook two-pass softmax. Single-threaded.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/ops.h"
#include "kernels/rope_freq.h"
#include "tensor/interleaved.h"
#include "tensor/quant.h"
#include "util/check.h"
#include "util/fp16.h"

namespace skipkv::kernels::ref {

void GetRow(const TensorView& w, int64_t row, float* out) {
  SKIPKV_CHECK(row >= 0 && row < w.NumRows());
  if (const DType file = FileTypeOf(w.type); file != w.type) {  // interleaved: take the row out of its group
    std::vector<uint8_t> bytes(RowBytes(file, w.ne[0]));
    ExtractRow(w.type, w.data, w.ne[0], row, bytes.data());
    DequantizeRow(file, bytes.data(), out, w.ne[0]);
    return;
  }
  DequantizeRow(w.type, w.Row(row), out, w.ne[0]);
}

void MatMul(const TensorView& w, const float* x, int64_t n, float* y) {
  const int64_t in = w.ne[0], rows = w.NumRows();
  std::vector<float> wrow(static_cast<size_t>(in));
  for (int64_t r = 0; r < rows; ++r) {
    GetRow(w, r, wrow.data());
    for (int64_t t = 0; t < n; ++t) {
      const float* xt = x + t * in;
      double acc = 0.0;
      for (int64_t i = 0; i < in; ++i) acc += static_cast<double>(wrow[i]) * xt[i];
      y[t * rows + r] = static_cast<float>(acc);
    }
  }
}

void MatVec(const TensorView& w, const float* x, float* y) { MatMul(w, x, 1, y); }

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * weight[i];
}

void Rope(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p) {
  const int rot = p.rot_dim > 0 ? p.rot_dim : head_dim;
  SKIPKV_CHECK(rot % 2 == 0 && rot <= head_dim);
  const int half = rot / 2;
  std::vector<float> c(half), s(half);
  internal::RopeCosSin(p, rot, pos, c.data(), s.data());
  for (int h = 0; h < n_heads; ++h) {
    float* xh = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      // Pair (a, b) rotates to (a cos - b sin, a sin + b cos).
      const int ia = p.style == RopeStyle::kAdjacentPairs ? 2 * i : i;
      const int ib = p.style == RopeStyle::kAdjacentPairs ? 2 * i + 1 : i + half;
      const float a = xh[ia], b = xh[ib];
      xh[ia] = a * c[i] - b * s[i];
      xh[ib] = a * s[i] + b * c[i];
    }
  }
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  const float mx = *std::max_element(x, x + n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.f + std::exp(-g)) * up[i];
  }
}

void Add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

uint64_t ReadSweep(const uint64_t* words, int64_t n) {
  uint64_t x = 0;
  for (int64_t i = 0; i < n; ++i) x ^= words[i];
  return x;
}

// The contract's constants spelled out here, not taken from the SIMD code.
void FmaChains(int64_t steps, int64_t values, float* out) {
  for (int64_t v = 0; v < values; ++v) {
    float x = 1.0f + static_cast<float>(v) / 1024.0f;
    for (int64_t s = 0; s < steps; ++s) x = std::fma(x, 0.999f, 0.001f);
    out[v] = x;
  }
}

void ConvertF16ToF32(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(src[i]);
}

namespace {
// Reads element j of KV row `slot` (row length head_dim) as f32.
inline float KvAt(const void* base, DType t, int64_t slot, int head_dim, int j) {
  const int64_t idx = slot * head_dim + j;
  if (t == DType::kF16) return F16ToF32(static_cast<const f16_t*>(base)[idx]);
  return static_cast<const float*>(base)[idx];
}
}  // namespace

// Textbook attention: for each query row i and head qh, softmax over the
// visible slots s (s <= first_query_slot + i, valid[s] != 0) of
// scale * q.k_s, then out = sum_s p_s v_s. A row that sees no slot outputs 0.
void Attention(const AttentionShape& shape, std::span<const AttentionTask> tasks) {
  SKIPKV_CHECK(shape.n_kv_heads > 0 && shape.n_heads % shape.n_kv_heads == 0);
  SKIPKV_CHECK(shape.kv_type == DType::kF16 || shape.kv_type == DType::kF32);
  const int d = shape.head_dim;
  const int group = shape.n_heads / shape.n_kv_heads;
  std::vector<double> scores;
  for (const AttentionTask& task : tasks) {
    scores.assign(static_cast<size_t>(task.n_slots), 0.0);
    for (int i = 0; i < task.n_q; ++i) {
      const int64_t visible = std::min<int64_t>(task.n_slots, task.first_query_slot + i + 1);
      for (int qh = 0; qh < shape.n_heads; ++qh) {
        const int kvh = qh / group;
        const float* q = task.q + (static_cast<int64_t>(i) * shape.n_heads + qh) * d;
        float* out = task.out + (static_cast<int64_t>(i) * shape.n_heads + qh) * d;
        const uint8_t* valid = task.valid != nullptr ? task.valid[kvh] : nullptr;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t s = 0; s < visible; ++s) {
          if (valid != nullptr && !valid[s]) continue;
          double dot = 0.0;
          for (int j = 0; j < d; ++j) {
            dot += static_cast<double>(q[j]) * KvAt(task.k[kvh], shape.kv_type, s, d, j);
          }
          scores[s] = dot * shape.scale;
          mx = std::max(mx, scores[s]);
        }
        std::fill(out, out + d, 0.f);
        if (mx == -std::numeric_limits<double>::infinity()) continue;  // nothing visible
        double sum = 0.0;
        for (int64_t s = 0; s < visible; ++s) {
          if (valid != nullptr && !valid[s]) continue;
          scores[s] = std::exp(scores[s] - mx);
          sum += scores[s];
        }
        std::vector<double> acc(d, 0.0);
        for (int64_t s = 0; s < visible; ++s) {
          if (valid != nullptr && !valid[s]) continue;
          const double p = scores[s] / sum;
          for (int j = 0; j < d; ++j) acc[j] += p * KvAt(task.v[kvh], shape.kv_type, s, d, j);
          if (task.attn_accum != nullptr) task.attn_accum[kvh][s] += static_cast<float>(p);
        }
        for (int j = 0; j < d; ++j) out[j] = static_cast<float>(acc[j]);
      }
    }
  }
}

}  // namespace skipkv::kernels::ref
