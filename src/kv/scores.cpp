// Eviction scores (see scores.h for the contracts and spec references).
//
// The only expensive part is the redundancy Gram matrix S = Kn·Knᵀ,
// O(N²·d) per head (N = 1152, d = 128: 170 M multiply-adds, 85 M with the
// symmetry). Its products, and the query × key logits of the importance
// score, run in the panel kernels of kernels/panel_matmul.h (Highway,
// dispatched at run time and capped by SKIPKV_SIMD like every kernel); what
// stays here is R-KV's own part: key normalisation, the retain-last edit
// (RetainLastSink, fed the tiles with a similarity above 0.5) and the
// softmax over the column means. Results are deterministic on a given
// target (the FMA and non-FMA targets differ in the last bits).
#include "kv/scores.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/panel_matmul.h"
#include "util/check.h"

namespace skipkv::kvscore {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();
constexpr float kSimThreshold = 0.5f;  // R-KV retain-last threshold (hard-coded there)
constexpr float kNormEps = 1e-8f;      // R-KV key normalisation epsilon

template <typename T>
T* Grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// In-place softmax over n values (f32, max-subtracted). All −inf → zeros.
void SoftmaxInPlace(float* x, int64_t n) {
  float mx = kNegInf;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
  if (mx == kNegInf) {
    std::fill(x, x + n, 0.f);
    return;
  }
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

// R-KV's retain-last edit, as tiles with a hit arrive from the Gram pass
// (kernels::GramUpperPass): last[r] = largest c with S[r][c] > 0.5 (or −1),
// last_val[r] = S[r][last[r]]. Every hit has a < c; row a's candidate in a
// tile is its highest hit column, column c's its highest hit row.
class RetainLastSink final : public kernels::GramTileSink {
 public:
  RetainLastSink(int32_t* last, float* last_val) : last_(last), last_val_(last_val) {}
  void OnHits(int64_t i0, int64_t j0, const float* tile, const uint32_t* hits) override {
    constexpr int kCols = kernels::kPanelCols;
    uint32_t pending = 0;
    for (int i = 0; i < kernels::kTileRows; ++i) {
      pending |= hits[i];
      if (!hits[i]) continue;
      const int j = 31 - __builtin_clz(hits[i]);
      const int64_t a = i0 + i, c = j0 + j;
      if (c > last_[a]) last_[a] = static_cast<int32_t>(c), last_val_[a] = tile[i * kCols + j];
    }
    for (int i = kernels::kTileRows - 1; i >= 0 && pending; --i) {
      uint32_t bits = hits[i] & pending;
      pending &= ~bits;
      while (bits) {
        const int j = __builtin_ctz(bits);
        bits &= bits - 1;
        const int64_t a = i0 + i, c = j0 + j;
        if (a > last_[c]) last_[c] = static_cast<int32_t>(a), last_val_[c] = tile[i * kCols + j];
      }
    }
  }

 private:
  int32_t* last_;
  float* last_val_;
};

}  // namespace

void AttentionImportance(const float* q, int group, int n_q, const float* k, int64_t n_cand, int d,
                         const uint8_t* valid, float* out, KvScratch& scratch) {
  SKIPKV_CHECK(group > 0 && n_q > 0 && d > 0 && n_cand >= 0);
  if (n_cand == 0) return;
  const int64_t rows = static_cast<int64_t>(group) * n_q;
  // logits [rows][n_cand] = q · kᵀ (unscaled).
  float* packed = Grow(scratch.packed, kernels::PackedPanelFloats(n_cand, d));
  kernels::PackPanels(k, n_cand, d, packed);
  float* logits = Grow(scratch.product, rows * n_cand);
  kernels::MatMulABtPacked(q, rows, packed, n_cand, d, logits, n_cand);

  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  float* lmax = Grow(scratch.row_max, n_cand);  // L[w][:] for the current window row
  std::fill(out, out + n_cand, 0.f);
  for (int w = 0; w < n_q; ++w) {
    // GQA max on the (scaled) logits of the group's query heads g for row w.
    for (int64_t n = 0; n < n_cand; ++n) {
      float m = kNegInf;
      for (int g = 0; g < group; ++g)
        m = std::max(m, logits[(static_cast<int64_t>(g) * n_q + w) * n_cand + n] * scale);
      lmax[n] = (valid && !valid[n]) ? kNegInf : m;
    }
    SoftmaxInPlace(lmax, n_cand);
    for (int64_t n = 0; n < n_cand; ++n) out[n] += lmax[n];
  }
  const float inv = 1.f / static_cast<float>(n_q);
  for (int64_t n = 0; n < n_cand; ++n) out[n] *= inv;
}

void MaxPool1d(const float* in, int64_t n, int kernel, float* out) {
  SKIPKV_CHECK(kernel >= 1 && kernel % 2 == 1);
  const int64_t half = kernel / 2;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t lo = std::max<int64_t>(0, i - half), hi = std::min<int64_t>(n - 1, i + half);
    float m = kNegInf;
    for (int64_t j = lo; j <= hi; ++j) m = std::max(m, in[j]);
    out[i] = m;
  }
}

void Redundancy(const float* k, int64_t n, int d, const uint8_t* valid, float* out, KvScratch& scratch) {
  SKIPKV_CHECK(n > 0 && d > 0);
  // Kn: row-normalised keys, zero for invalid slots (so they add nothing
  // to the sums and never pass the threshold).
  float* kn = Grow(scratch.lhs, n * d);
  for (int64_t r = 0; r < n; ++r) {
    const float* src = k + r * d;
    float* dst = kn + r * d;
    if (valid && !valid[r]) {
      std::fill(dst, dst + d, 0.f);
      continue;
    }
    double ss = 0;
    for (int i = 0; i < d; ++i) ss += static_cast<double>(src[i]) * src[i];
    const float inv = 1.f / (static_cast<float>(std::sqrt(ss)) + kNormEps);
    for (int i = 0; i < d; ++i) dst[i] = src[i] * inv;
  }
  float* packed = Grow(scratch.packed, kernels::PackedPanelFloats(n, d));
  kernels::PackPanels(kn, n, d, packed);

  // sum[r] = Σ_{c ≠ r} S[r][c]; last / last_val: the retain-last edits;
  // row0[c] = S[0][c] (the same products as the pass, bit for bit).
  float* sum = Grow(scratch.product, n);
  float* last_val = Grow(scratch.last_val, n);
  float* row0 = Grow(scratch.row_max, n);
  int32_t* last = Grow(scratch.idx, n);
  std::fill(sum, sum + n, 0.f);
  std::fill(last, last + n, -1);
  RetainLastSink sink(last, last_val);
  kernels::GramUpperPass(kn, packed, n, d, kSimThreshold, sum, sink);
  kernels::MatMulABtPacked(kn, 1, packed, n, d, row0, n);

  // Column sums of the edited S: S is symmetric, so Σ_a S[a][n] (a ≠ n) is
  // sum[n]; then each row a's retain-last edit removes S[a][j*] from column j*.
  for (int64_t a = 0; a < n; ++a) {
    if (last[a] >= 0) {
      sum[last[a]] -= last_val[a];
    } else if (a != 0) {
      sum[0] -= row0[a];  // no similar key: R-KV zeroes column 0 (S[a][0] = S[0][a])
    }
  }
  const float inv_n = 1.f / static_cast<float>(n);
  for (int64_t i = 0; i < n; ++i) out[i] = sum[i] * inv_n;
  SoftmaxInPlace(out, n);
}

void MixScores(const float* imp, const float* red, int64_t n, float lambda, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = lambda * imp[i] - (1.f - lambda) * red[i];
}

void FinishScores(std::span<const SlotScoreAdjuster* const> adjusters, int layer, int kv_head,
                  std::span<const int32_t> gen_pos, const uint8_t* valid, bool padded, std::span<float> score) {
  SKIPKV_CHECK(gen_pos.size() >= score.size());
  for (const SlotScoreAdjuster* adj : adjusters) {
    if (adj) adj->Adjust(layer, kv_head, gen_pos, score);
  }
  if (padded) {
    for (size_t i = 0; i < score.size(); ++i)
      if (!valid[i]) score[i] = kPosInf;
  }
}

void SelectTopKPlusRecent(std::span<const float> score, int64_t n_slots, int64_t recent, int64_t budget,
                          std::vector<int32_t>* keep, KvScratch& scratch) {
  SKIPKV_CHECK(n_slots >= budget && budget >= recent && recent >= 0);
  const int64_t n_cand = n_slots - recent;
  SKIPKV_CHECK(static_cast<int64_t>(score.size()) >= n_cand);
  const int64_t k = budget - recent;
  keep->clear();
  keep->reserve(budget);
  if (k == n_cand) {
    for (int64_t i = 0; i < n_cand; ++i) keep->push_back(static_cast<int32_t>(i));
  } else if (k > 0) {
    int32_t* idx = Grow(scratch.idx, n_cand);
    for (int64_t i = 0; i < n_cand; ++i) idx[i] = static_cast<int32_t>(i);
    auto key = [&](int32_t i) { return std::isnan(score[i]) ? kNegInf : score[i]; };
    // Higher score first; equal scores: lower slot (= lower gen_pos) first.
    auto better = [&](int32_t x, int32_t y) {
      const float sx = key(x), sy = key(y);
      return sx > sy || (sx == sy && x < y);
    };
    std::nth_element(idx, idx + (k - 1), idx + n_cand, better);
    std::sort(idx, idx + k);
    keep->assign(idx, idx + k);
  }
  for (int64_t i = n_cand; i < n_slots; ++i) keep->push_back(static_cast<int32_t>(i));
}

}  // namespace skipkv::kvscore
