// Eviction scores (see scores.h for the contracts and spec references).
//
// The only expensive part is the redundancy Gram matrix S = Kn·Knᵀ,
// O(N²·d) per head (N = 1152, d = 128: 170 M multiply-adds, 85 M with the
// symmetry). It runs through a register-blocked tile kernel (6 rows × 16
// columns of S per tile, the 16 columns read from a packed panel) with an
// AVX2+FMA version chosen at run time and a portable fallback. The
// reduction over d is always sequential in k, so results are deterministic
// on a given machine (the FMA and non-FMA paths differ in the last bits).
#include "kv/scores.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "util/check.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SKIPKV_KV_X86 1
#endif

namespace skipkv::kvscore {
namespace {

constexpr int kMr = 6;   // tile rows (rows of A)
constexpr int kNr = 16;  // tile columns (rows of B), one packed panel
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();
constexpr float kSimThreshold = 0.5f;  // R-KV retain-last threshold (hard-coded there)
constexpr float kNormEps = 1e-8f;      // R-KV key normalisation epsilon

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

template <typename T>
T* Grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Packs B [n][d] into panels of kNr columns: panel p holds, for every k,
// the kNr values B[p·kNr + j][k] contiguously: packed[(p·d + k)·kNr + j].
// Rows past n are zero.
void PackPanels(const float* b, int64_t n, int d, float* packed) {
  const int64_t n_panels = RoundUp(n, kNr) / kNr;
  for (int64_t p = 0; p < n_panels; ++p) {
    float* dst = packed + p * d * kNr;
    for (int j = 0; j < kNr; ++j) {
      const int64_t row = p * kNr + j;
      if (row < n) {
        const float* src = b + row * d;
        for (int k = 0; k < d; ++k) dst[k * kNr + j] = src[k];
      } else {
        for (int k = 0; k < d; ++k) dst[k * kNr + j] = 0.f;
      }
    }
  }
}

// tile[i][j] = Σ_k a[i·lda + k] · panel[k·kNr + j], i < kMr, j < kNr, k in
// order. `a` must have kMr readable rows.
void TileGeneric(const float* a, int64_t lda, const float* panel, int d, float* tile) {
  float acc[kMr][kNr] = {};
  for (int k = 0; k < d; ++k) {
    const float* bk = panel + k * kNr;
    for (int i = 0; i < kMr; ++i) {
      const float ai = a[i * lda + k];
      for (int j = 0; j < kNr; ++j) acc[i][j] += ai * bk[j];
    }
  }
  std::memcpy(tile, acc, sizeof(acc));
}

#ifdef SKIPKV_KV_X86
// c[i][0..1] = Σ_k a[i·lda + k] · panel[k·kNr + 0..15], k in order: the
// register-resident core shared by TileAvx2 and GramRowBlockAvx2.
__attribute__((target("avx2,fma"), always_inline)) inline void AccumulateTileAvx2(const float* a, int64_t lda,
                                                                                  const float* panel, int d,
                                                                                  __m256 (&c)[kMr][2]) {
  for (int i = 0; i < kMr; ++i) c[i][0] = c[i][1] = _mm256_setzero_ps();
  for (int k = 0; k < d; ++k) {
    const __m256 b0 = _mm256_loadu_ps(panel + k * kNr);
    const __m256 b1 = _mm256_loadu_ps(panel + k * kNr + 8);
    for (int i = 0; i < kMr; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i * lda + k);
      c[i][0] = _mm256_fmadd_ps(ai, b0, c[i][0]);
      c[i][1] = _mm256_fmadd_ps(ai, b1, c[i][1]);
    }
  }
}

__attribute__((target("avx2,fma"))) void TileAvx2(const float* a, int64_t lda, const float* panel, int d,
                                                  float* tile) {
  __m256 c[kMr][2];
  AccumulateTileAvx2(a, lda, panel, d, c);
  for (int i = 0; i < kMr; ++i) {
    _mm256_storeu_ps(tile + i * kNr, c[i][0]);
    _mm256_storeu_ps(tile + i * kNr + 8, c[i][1]);
  }
}
#endif

using TileFn = void (*)(const float*, int64_t, const float*, int, float*);

TileFn PickTile() {
#ifdef SKIPKV_KV_X86
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return TileAvx2;
#endif
  return TileGeneric;
}

const TileFn kTile = PickTile();

// C = A·Bᵀ with A given as `m_pad` (multiple of kMr) readable rows and B as
// packed panels of n columns; C is [m][ldc], only i < m, j < n written.
void GemmPacked(const float* a, int64_t m, const float* packed, int64_t n, int d, float* c, int64_t ldc) {
  float tile[kMr * kNr];
  for (int64_t i0 = 0; i0 < m; i0 += kMr) {
    for (int64_t j0 = 0; j0 < n; j0 += kNr) {
      kTile(a + i0 * d, d, packed + (j0 / kNr) * d * kNr, d, tile);
      const int64_t ni = std::min<int64_t>(kMr, m - i0), nj = std::min<int64_t>(kNr, n - j0);
      for (int64_t i = 0; i < ni; ++i)
        std::memcpy(c + (i0 + i) * ldc + j0, tile + i * kNr, nj * sizeof(float));
    }
  }
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

// ---- Redundancy Gram pass ------------------------------------------------------
// Accumulators of the upper-triangle pass over S = Kn·Knᵀ (see Redundancy):
// sum[r] = Σ_{c ≠ r} S[r][c]; last[r] = largest c with S[r][c] > 0.5 (or −1)
// and last_val[r] = S[r][last[r]]; row0[c] = S[0][c].
struct Gram {
  float* sum;
  float* last_val;
  float* row0;
  int32_t* last;
};

// Zeroes the entries of a tile with c ≤ a (diagonal tiles), so that every
// pair a < c is consumed exactly once.
void MaskLowerTriangle(float* tile, int64_t i0, int64_t j0) {
  for (int i = 0; i < kMr; ++i)
    for (int j = 0; j < kNr; ++j)
      if (j0 + j <= i0 + i) tile[i * kNr + j] = 0.f;
}

// Scalar epilogue of one (masked) tile: sums into row_acc (rows) and
// g.sum (columns) when do_sums, row 0, and the threshold hits. Column panels
// arrive in increasing c and row blocks in increasing a, but the hit update
// takes the max explicitly, so the order does not matter.
void TileEpilogue(const float* tile, int64_t i0, int64_t j0, const Gram& g, float* row_acc, bool do_sums) {
  if (do_sums) {
    for (int i = 0; i < kMr; ++i) {
      float rs = 0.f;
      for (int j = 0; j < kNr; ++j) rs += tile[i * kNr + j];
      row_acc[i] += rs;
    }
    for (int j = 0; j < kNr; ++j) {
      float cs = 0.f;
      for (int i = 0; i < kMr; ++i) cs += tile[i * kNr + j];
      g.sum[j0 + j] += cs;
    }
  }
  if (i0 == 0) {
    for (int j = 0; j < kNr; ++j) g.row0[j0 + j] = tile[j];  // tile[0][j] = S[0][j0 + j]
  }
  for (int i = 0; i < kMr; ++i) {
    for (int j = 0; j < kNr; ++j) {
      const float s = tile[i * kNr + j];
      if (!(s > kSimThreshold)) continue;
      const int64_t a = i0 + i, c = j0 + j;
      if (c > g.last[a]) g.last[a] = static_cast<int32_t>(c), g.last_val[a] = s;
      if (a > g.last[c]) g.last[c] = static_cast<int32_t>(a), g.last_val[c] = s;
    }
  }
}

// One row block [i0, i0 + kMr) against the column panels holding c ≥ i0.
void GramRowBlockGeneric(const float* kn, int64_t i0, const float* packed, int64_t n, int d, const Gram& g) {
  float tile[kMr * kNr];
  float row_acc[kMr] = {};
  for (int64_t j0 = (i0 / kNr) * kNr; j0 < n; j0 += kNr) {
    TileGeneric(kn + i0 * d, d, packed + (j0 / kNr) * d * kNr, d, tile);
    if (j0 < i0 + kMr) MaskLowerTriangle(tile, i0, j0);
    TileEpilogue(tile, i0, j0, g, row_acc, /*do_sums=*/true);
  }
  for (int i = 0; i < kMr; ++i) g.sum[i0 + i] += row_acc[i];
}

#ifdef SKIPKV_KV_X86
// Same contract; the off-diagonal tiles (all but one or two per block) keep
// their sums and the threshold test in registers, and only tiles with a hit
// go through the scalar epilogue.
__attribute__((target("avx2,fma"))) void GramRowBlockAvx2(const float* kn, int64_t i0, const float* packed,
                                                          int64_t n, int d, const Gram& g) {
  alignas(32) float tile[kMr * kNr];
  float row_acc[kMr] = {};  // diagonal tiles
  __m256 racc[kMr];         // off-diagonal tiles, 8 lanes per row
  for (int i = 0; i < kMr; ++i) racc[i] = _mm256_setzero_ps();
  const __m256 thr = _mm256_set1_ps(kSimThreshold);
  const float* a = kn + i0 * d;
  for (int64_t j0 = (i0 / kNr) * kNr; j0 < n; j0 += kNr) {
    const float* panel = packed + (j0 / kNr) * d * kNr;
    if (j0 < i0 + kMr || i0 == 0) {
      TileAvx2(a, d, panel, d, tile);
      if (j0 < i0 + kMr) MaskLowerTriangle(tile, i0, j0);
      TileEpilogue(tile, i0, j0, g, row_acc, /*do_sums=*/true);
      continue;
    }
    __m256 c[kMr][2];
    AccumulateTileAvx2(a, d, panel, d, c);
    // Column sums (fixed order over rows), row sums, threshold masks.
    __m256 cs0 = c[0][0], cs1 = c[0][1];
    int mask[kMr];
    int any = 0;
    for (int i = 0; i < kMr; ++i) {
      if (i > 0) {
        cs0 = _mm256_add_ps(cs0, c[i][0]);
        cs1 = _mm256_add_ps(cs1, c[i][1]);
      }
      racc[i] = _mm256_add_ps(racc[i], _mm256_add_ps(c[i][0], c[i][1]));
      mask[i] = _mm256_movemask_ps(_mm256_cmp_ps(c[i][0], thr, _CMP_GT_OQ)) |
                (_mm256_movemask_ps(_mm256_cmp_ps(c[i][1], thr, _CMP_GT_OQ)) << 8);
      any |= mask[i];
    }
    _mm256_storeu_ps(g.sum + j0, _mm256_add_ps(_mm256_loadu_ps(g.sum + j0), cs0));
    _mm256_storeu_ps(g.sum + j0 + 8, _mm256_add_ps(_mm256_loadu_ps(g.sum + j0 + 8), cs1));
    if (any) {
      // Hits, from the masks: row a's candidate is its largest hit column in
      // this tile; column c's candidate is its largest hit row. Every c > a here.
      for (int i = 0; i < kMr; ++i) {
        _mm256_store_ps(tile + i * kNr, c[i][0]);
        _mm256_store_ps(tile + i * kNr + 8, c[i][1]);
      }
      for (int i = 0; i < kMr; ++i) {
        if (!mask[i]) continue;
        const int j = 31 - __builtin_clz(static_cast<unsigned>(mask[i]));
        const int64_t a_row = i0 + i, col = j0 + j;
        if (col > g.last[a_row])
          g.last[a_row] = static_cast<int32_t>(col), g.last_val[a_row] = tile[i * kNr + j];
      }
      int pending = any;
      for (int i = kMr - 1; i >= 0 && pending; --i) {
        int bits = mask[i] & pending;
        pending &= ~bits;
        while (bits) {
          const int j = __builtin_ctz(static_cast<unsigned>(bits));
          bits &= bits - 1;
          const int64_t a_row = i0 + i, col = j0 + j;
          if (a_row > g.last[col])
            g.last[col] = static_cast<int32_t>(a_row), g.last_val[col] = tile[i * kNr + j];
        }
      }
    }
  }
  for (int i = 0; i < kMr; ++i) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, racc[i]);
    float rs = row_acc[i];
    for (float v : lanes) rs += v;
    g.sum[i0 + i] += rs;
  }
}
#endif

using GramRowBlockFn = void (*)(const float*, int64_t, const float*, int64_t, int, const Gram&);

GramRowBlockFn PickGramRowBlock() {
#ifdef SKIPKV_KV_X86
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return GramRowBlockAvx2;
#endif
  return GramRowBlockGeneric;
}

const GramRowBlockFn kGramRowBlock = PickGramRowBlock();

}  // namespace

void MatMulABt(const float* a, int64_t m, const float* b, int64_t n, int d, float* c) {
  std::vector<float> a_pad(RoundUp(m, kMr) * d, 0.f);
  std::copy(a, a + m * d, a_pad.begin());
  std::vector<float> packed(RoundUp(n, kNr) * d);
  PackPanels(b, n, d, packed.data());
  GemmPacked(a_pad.data(), m, packed.data(), n, d, c, n);
}

void AttentionImportance(const float* q, int group, int n_q, const float* k, int64_t n_cand, int d,
                         const uint8_t* valid, float* out, KvScratch& scratch) {
  SKIPKV_CHECK(group > 0 && n_q > 0 && d > 0 && n_cand >= 0);
  if (n_cand == 0) return;
  const int64_t rows = static_cast<int64_t>(group) * n_q;
  // Query rows padded to the tile height; logits [rows][n_cand].
  float* qa = Grow(scratch.lhs, RoundUp(rows, kMr) * d);
  std::copy(q, q + rows * d, qa);
  std::fill(qa + rows * d, qa + RoundUp(rows, kMr) * d, 0.f);
  float* packed = Grow(scratch.packed, RoundUp(n_cand, kNr) * d);
  PackPanels(k, n_cand, d, packed);
  float* logits = Grow(scratch.product, rows * n_cand);
  GemmPacked(qa, rows, packed, n_cand, d, logits, n_cand);

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
  // Rows padded for both the row blocks (kMr) and the column panels (kNr);
  // padding rows are zero, so they add nothing and never pass the threshold.
  const int64_t n_rows = std::max(RoundUp(n, kMr), RoundUp(n, kNr));
  // Kn: row-normalised keys, zero for invalid slots.
  float* kn = Grow(scratch.lhs, n_rows * d);
  std::fill(kn + n * d, kn + n_rows * d, 0.f);
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
  float* packed = Grow(scratch.packed, n_rows * d);
  PackPanels(kn, n, d, packed);

  Gram g{Grow(scratch.product, n_rows), Grow(scratch.last_val, n_rows), Grow(scratch.row_max, n_rows),
         Grow(scratch.idx, n_rows)};
  std::fill(g.sum, g.sum + n_rows, 0.f);
  std::fill(g.row0, g.row0 + n_rows, 0.f);
  std::fill(g.last, g.last + n_rows, -1);
  // Upper triangle, one row block at a time (see the Gram helpers above).
  for (int64_t i0 = 0; i0 < n; i0 += kMr) kGramRowBlock(kn, i0, packed, n, d, g);
  float* sum = g.sum;
  const float* last_val = g.last_val;
  const float* row0 = g.row0;
  const int32_t* last = g.last;

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
                  const int32_t* gen_pos, const uint8_t* valid, bool padded, std::span<float> score) {
  for (const SlotScoreAdjuster* adj : adjusters) {
    if (adj) adj->Adjust(layer, kv_head, std::span<const int32_t>(gen_pos, score.size()), score);
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
