// Panel products of panel_matmul.h, compiled per Highway target: the
// register tile (kTileRows rows × kPanelCols columns, accumulators held in
// registers over the whole k loop), C = A·Bᵀ built from it, and the Gram pass
// whose off-diagonal tiles keep their row sums, column sums and threshold
// test in registers (only tiles with a hit are stored and handed to the sink).
// The one-lane fallback target (HWY_SCALAR / EMU128) computes tiles with a
// plain loop instead, which the compiler vectorises for the baseline ISA
// (16 one-lane accumulators per row would live on the stack).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/panel_matmul.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <hwy/highway.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "kernels/panel_matmul.h"
#include "kernels/simd_internal.h"

#ifndef SKIPKV_KERNELS_PANEL_MATMUL_ONCE
#define SKIPKV_KERNELS_PANEL_MATMUL_ONCE
namespace skipkv::kernels::internal {
// Records (and logs when it changes) the target a panel kernel runs on.
void NotePanelTarget(const char* name);
}  // namespace skipkv::kernels::internal
#endif

HWY_BEFORE_NAMESPACE();
namespace skipkv::kernels::internal {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DP = hn::CappedTag<float, kPanelCols>;
using VP = hn::Vec<DP>;
constexpr size_t kLanes = hn::MaxLanes(DP());
constexpr int kVecs = static_cast<int>(kPanelCols / kLanes);  // vectors per tile row
static_assert(kPanelCols % kLanes == 0, "a tile row must be whole vectors");

// acc[i][v] lane l = Σ_k a[i·lda + k] · panel[k·kPanelCols + v·kLanes + l],
// k ascending, one MulAdd per step. `a` must have kTileRows readable rows.
HWY_INLINE void AccumulateTile(const float* HWY_RESTRICT a, int64_t lda, const float* HWY_RESTRICT panel, int d,
                               VP (&acc)[kTileRows][kVecs]) {
  const DP df;
  SKIPKV_UNROLL for (int i = 0; i < kTileRows; ++i) {
    SKIPKV_UNROLL for (int v = 0; v < kVecs; ++v) acc[i][v] = hn::Zero(df);
  }
  for (int k = 0; k < d; ++k) {
    VP b[kVecs];
    SKIPKV_UNROLL for (int v = 0; v < kVecs; ++v) b[v] = hn::LoadU(df, panel + k * kPanelCols + v * kLanes);
    SKIPKV_UNROLL for (int i = 0; i < kTileRows; ++i) {
      const VP ai = hn::Set(df, a[i * lda + k]);
      SKIPKV_UNROLL for (int v = 0; v < kVecs; ++v) acc[i][v] = hn::MulAdd(ai, b[v], acc[i][v]);
    }
  }
}

#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
constexpr bool kPlainTiles = true;
#else
constexpr bool kPlainTiles = false;
#endif

// tile[i·kPanelCols + j] = Σ_k a[i·lda + k] · panel[k·kPanelCols + j], k
// ascending: the same chains as AccumulateTile, as a plain loop.
void PlainTile(const float* HWY_RESTRICT a, int64_t lda, const float* HWY_RESTRICT panel, int d,
               float* HWY_RESTRICT tile) {
  float acc[kTileRows][kPanelCols] = {};
  for (int k = 0; k < d; ++k) {
    const float* bk = panel + k * kPanelCols;
    for (int i = 0; i < kTileRows; ++i) {
      const float ai = a[i * lda + k];
      for (int j = 0; j < kPanelCols; ++j) acc[i][j] += ai * bk[j];
    }
  }
  std::memcpy(tile, acc, sizeof(acc));
}

HWY_INLINE void StoreTile(const VP (&acc)[kTileRows][kVecs], float* tile) {
  const DP df;
  SKIPKV_UNROLL for (int i = 0; i < kTileRows; ++i) {
    SKIPKV_UNROLL for (int v = 0; v < kVecs; ++v) hn::StoreU(acc[i][v], df, tile + i * kPanelCols + v * kLanes);
  }
}

// Rows [i0, i0 + kTileRows) of the [n][d] matrix x, zero-padded past n into
// `tail` when the block is partial.
const float* RowBlock(const float* x, int64_t n, int d, int64_t i0, std::vector<float>& tail) {
  const int64_t rows = std::min<int64_t>(kTileRows, n - i0);
  if (rows == kTileRows) return x + i0 * d;
  tail.assign(static_cast<size_t>(kTileRows) * d, 0.f);
  std::copy(x + i0 * d, x + (i0 + rows) * d, tail.begin());
  return tail.data();
}

void MatMulABtPackedT(const float* a, int64_t m, const float* packed, int64_t n, int d, float* c, int64_t ldc) {
  NotePanelTarget(hwy::TargetName(HWY_TARGET));
  thread_local std::vector<float> tail;
  HWY_ALIGN float tile[kTileRows * kPanelCols];
  for (int64_t i0 = 0; i0 < m; i0 += kTileRows) {
    const float* rows = RowBlock(a, m, d, i0, tail);
    const int64_t ni = std::min<int64_t>(kTileRows, m - i0);
    for (int64_t j0 = 0; j0 < n; j0 += kPanelCols) {
      const float* panel = packed + (j0 / kPanelCols) * d * kPanelCols;
      if (kPlainTiles) {
        PlainTile(rows, d, panel, d, tile);
      } else {
        VP acc[kTileRows][kVecs];
        AccumulateTile(rows, d, panel, d, acc);
        StoreTile(acc, tile);
      }
      const int64_t nj = std::min<int64_t>(kPanelCols, n - j0);
      for (int64_t i = 0; i < ni; ++i) std::memcpy(c + (i0 + i) * ldc + j0, tile + i * kPanelCols, nj * sizeof(float));
    }
  }
}

// A tile on the diagonal or the edge of S (some entries are not pairs
// a < c < n): those entries are zeroed, then scalar sums and hits.
void EdgeTile(float* tile, int64_t i0, int64_t j0, int64_t n, float threshold, float* sum, float* row_acc,
              GramTileSink& sink) {
  uint32_t hits[kTileRows] = {};
  uint32_t any = 0;
  for (int i = 0; i < kTileRows; ++i) {
    for (int j = 0; j < kPanelCols; ++j) {
      const int64_t a = i0 + i, c = j0 + j;
      float& s = tile[i * kPanelCols + j];
      if (c <= a || c >= n) {
        s = 0.f;
      } else if (s > threshold) {
        hits[i] |= uint32_t{1} << j;
      }
    }
    any |= hits[i];
  }
  for (int i = 0; i < kTileRows; ++i) {
    float rs = 0.f;
    for (int j = 0; j < kPanelCols; ++j) rs += tile[i * kPanelCols + j];
    row_acc[i] += rs;
  }
  for (int j = 0; j < kPanelCols && j0 + j < n; ++j) {
    float cs = 0.f;
    for (int i = 0; i < kTileRows; ++i) cs += tile[i * kPanelCols + j];
    sum[j0 + j] += cs;
  }
  if (any) sink.OnHits(i0, j0, tile, hits);
}

// Bit j of the result: lane j of the kPanelCols-wide row (acc[0..kVecs)) > thr.
HWY_INLINE uint32_t RowHitBits(const VP (&row)[kVecs], VP thr) {
  const DP df;
  uint32_t bits = 0;
  SKIPKV_UNROLL for (int v = 0; v < kVecs; ++v) {
    uint8_t bytes[8] = {};
    hn::StoreMaskBits(df, hn::Gt(row[v], thr), bytes);
    uint32_t word = 0;
    for (size_t b = 0; b < (kLanes + 7) / 8; ++b) word |= uint32_t{bytes[b]} << (8 * b);
    bits |= word << (v * kLanes);
  }
  return bits;
}

void GramUpperPassT(const float* x, const float* packed, int64_t n, int d, float threshold, float* sum,
                    GramTileSink& sink) {
  NotePanelTarget(hwy::TargetName(HWY_TARGET));
  const DP df;
  const VP thr = hn::Set(df, threshold);
  thread_local std::vector<float> tail;
  HWY_ALIGN float tile[kTileRows * kPanelCols];
  for (int64_t i0 = 0; i0 < n; i0 += kTileRows) {
    const float* a = RowBlock(x, n, d, i0, tail);
    const bool partial_rows = i0 + kTileRows > n;
    float row_acc[kTileRows] = {};  // edge tiles
    VP racc[kTileRows];             // other tiles, lane-wise
    SKIPKV_UNROLL for (int i = 0; i < kTileRows; ++i) racc[i] = hn::Zero(df);
    // Column panels from the one holding column i0 (pairs a < c only).
    for (int64_t j0 = (i0 / kPanelCols) * kPanelCols; j0 < n; j0 += kPanelCols) {
      const float* panel = packed + (j0 / kPanelCols) * d * kPanelCols;
      if (kPlainTiles) {  // every tile through the scalar epilogue
        PlainTile(a, d, panel, d, tile);
        EdgeTile(tile, i0, j0, n, threshold, sum, row_acc, sink);
        continue;
      }
      VP acc[kTileRows][kVecs];
      AccumulateTile(a, d, panel, d, acc);
      if (partial_rows || j0 < i0 + kTileRows || j0 + kPanelCols > n) {
        StoreTile(acc, tile);
        EdgeTile(tile, i0, j0, n, threshold, sum, row_acc, sink);
        continue;
      }
      // Every entry is a pair a < c < n. Column sums in row order, row sums
      // lane-wise, threshold test on all of them at once.
      VP cs[kVecs];
      SKIPKV_UNROLL for (int v = 0; v < kVecs; ++v) cs[v] = acc[0][v];
      auto hit = hn::Gt(acc[0][0], thr);
      SKIPKV_UNROLL for (int i = 0; i < kTileRows; ++i) {
        VP rs = acc[i][0];
        SKIPKV_UNROLL for (int v = 0; v < kVecs; ++v) {
          if (i > 0) cs[v] = hn::Add(cs[v], acc[i][v]);
          if (v > 0) rs = hn::Add(rs, acc[i][v]);
          hit = hn::Or(hit, hn::Gt(acc[i][v], thr));
        }
        racc[i] = hn::Add(racc[i], rs);
      }
      SKIPKV_UNROLL for (int v = 0; v < kVecs; ++v) {
        float* s = sum + j0 + v * kLanes;
        hn::StoreU(hn::Add(hn::LoadU(df, s), cs[v]), df, s);
      }
      if (!hn::AllFalse(df, hit)) {
        uint32_t hits[kTileRows];
        SKIPKV_UNROLL for (int i = 0; i < kTileRows; ++i) hits[i] = RowHitBits(acc[i], thr);
        StoreTile(acc, tile);
        sink.OnHits(i0, j0, tile, hits);
      }
    }
    const int64_t rows = std::min<int64_t>(kTileRows, n - i0);
    for (int64_t i = 0; i < rows; ++i) {
      HWY_ALIGN float lanes[kLanes];
      hn::Store(racc[i], df, lanes);
      float rs = row_acc[i];
      for (float v : lanes) rs += v;
      sum[i0 + i] += rs;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace skipkv::kernels::internal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "util/check.h"
#include "util/logging.h"

namespace skipkv::kernels {
namespace internal {
namespace {
std::atomic<const char*> g_panel_target{""};
}  // namespace

void NotePanelTarget(const char* name) {
  // hwy::TargetName returns string literals: a pointer compare suffices.
  if (g_panel_target.exchange(name, std::memory_order_relaxed) != name) {
    SKIPKV_LOG_INFO("kernels: KV scoring on SIMD target %s", name);
  }
}

HWY_EXPORT(MatMulABtPackedT);
HWY_EXPORT(GramUpperPassT);
}  // namespace internal

int64_t PackedPanelFloats(int64_t n, int d) {
  return (n + kPanelCols - 1) / kPanelCols * kPanelCols * static_cast<int64_t>(d);
}

void PackPanels(const float* b, int64_t n, int d, float* packed) {
  const int64_t n_panels = (n + kPanelCols - 1) / kPanelCols;
  for (int64_t p = 0; p < n_panels; ++p) {
    float* dst = packed + p * d * kPanelCols;
    for (int j = 0; j < kPanelCols; ++j) {
      const int64_t row = p * kPanelCols + j;
      if (row < n) {
        const float* src = b + row * d;
        for (int k = 0; k < d; ++k) dst[k * kPanelCols + j] = src[k];
      } else {
        for (int k = 0; k < d; ++k) dst[k * kPanelCols + j] = 0.f;
      }
    }
  }
}

void MatMulABtPacked(const float* a, int64_t m, const float* packed, int64_t n, int d, float* c, int64_t ldc) {
  SKIPKV_CHECK(m >= 0 && n >= 0 && d > 0 && ldc >= n);
  if (m == 0 || n == 0) return;
  HWY_DYNAMIC_DISPATCH(internal::MatMulABtPackedT)(a, m, packed, n, d, c, ldc);
}

void MatMulABt(const float* a, int64_t m, const float* b, int64_t n, int d, float* c) {
  std::vector<float> packed(static_cast<size_t>(PackedPanelFloats(n, d)));
  PackPanels(b, n, d, packed.data());
  MatMulABtPacked(a, m, packed.data(), n, d, c, n);
}

void GramUpperPass(const float* x, const float* packed, int64_t n, int d, float threshold, float* sum,
                   GramTileSink& sink) {
  SKIPKV_CHECK(n >= 0 && d > 0);
  if (n == 0) return;
  HWY_DYNAMIC_DISPATCH(internal::GramUpperPassT)(x, packed, n, d, threshold, sum, sink);
}

const char* LastPanelTargetName() { return internal::g_panel_target.load(std::memory_order_relaxed); }

}  // namespace skipkv::kernels
#endif
