// Dense f32 products of small operands, as the KV eviction scores need them
// (kv/scores.cpp): C = A·Bᵀ with B packed into column panels (query × key
// logits), and the strict upper triangle of a symmetric product S = X·Xᵀ with
// its row/column sums and threshold hits fused in (R-KV's key similarity).
// Highway kernels under the same run-time dispatch as ops.h (SKIPKV_SIMD caps
// them too); the scalar oracles are in ref:: (panel_matmul_ref.cpp).
#pragma once

#include <cstdint>

namespace skipkv::kernels {

// ---- Packed right-hand side -------------------------------------------------
// B [n][d] (row-major) is packed into panels of kPanelCols rows, each panel
// holding, for every k, the kPanelCols values B[p·kPanelCols + j][k]
// contiguously:  packed[(p·d + k)·kPanelCols + j];  rows past n are zero.
constexpr int kPanelCols = 16;
// Rows of A (or X) per register tile: a tile is kTileRows × kPanelCols.
constexpr int kTileRows = 6;

// Floats of the packed form of n rows of d floats.
int64_t PackedPanelFloats(int64_t n, int d);
void PackPanels(const float* b, int64_t n, int d, float* packed);

// ---- C = A·Bᵀ ---------------------------------------------------------------
// C[i][j] = Σ_k A[i][k]·B[j][k] for i < m, j < n, written at c[i·ldc + j];
// A: [m][d] row-major, packed: PackPanels(B, n, d). Every C[i][j] is one
// multiply-add chain over k in ascending order (fused where the target has
// FMA), so on a given target it does not depend on i, j, m or n: the same
// two rows give the same bits in any call (GramUpperPass included).
void MatMulABtPacked(const float* a, int64_t m, const float* packed, int64_t n, int d, float* c, int64_t ldc);
// Convenience form that packs B itself (allocates; tests and one-off use).
void MatMulABt(const float* a, int64_t m, const float* b, int64_t n, int d, float* c);

// ---- Strict upper triangle of S = X·Xᵀ -----------------------------------
// Receives the tiles of GramUpperPass that hold at least one hit. tile:
// [kTileRows][kPanelCols], tile[i·kPanelCols + j] = S[i0 + i][j0 + j] (entries
// outside the strict upper triangle or past n are unspecified); hits[i] bit j
// is set iff i0 + i < j0 + j < n and S[i0 + i][j0 + j] > threshold (a NaN is
// never a hit). Tiles arrive with i0 ascending, then j0 ascending.
class GramTileSink {
 public:
  virtual void OnHits(int64_t i0, int64_t j0, const float* tile, const uint32_t* hits) = 0;

 protected:
  ~GramTileSink() = default;
};

// One pass over the pairs a < c of S = X·Xᵀ, X: [n][d] row-major, packed:
// PackPanels(X, n, d). Adds each S[a][c] to both row sums, so that afterwards
//   sum[r] += Σ_{c ≠ r} S[r][c]   for r < n   (sum: [n], added into)
// and calls sink.OnHits for every tile with a hit. Cost n²·d/2
// multiply-adds. Summation order is fixed per target (results do not depend
// on anything but the inputs and the target); single-threaded.
void GramUpperPass(const float* x, const float* packed, int64_t n, int d, float threshold, float* sum,
                   GramTileSink& sink);

// Highway name of the target that the last MatMulABtPacked / GramUpperPass
// call (of any thread) ran on, or "" before the first: the proof that
// SKIPKV_SIMD reaches the KV scoring path. Each change is also logged at info
// level ("kernels: KV scoring on SIMD target ...").
const char* LastPanelTargetName();

namespace ref {
// Scalar oracles with the same contracts: sums in double, plain loops, no
// packing tricks (packed is read through its documented layout).
void MatMulABtPacked(const float* a, int64_t m, const float* packed, int64_t n, int d, float* c, int64_t ldc);
void GramUpperPass(const float* x, const float* packed, int64_t n, int d, float threshold, float* sum,
                   GramTileSink& sink);
}  // namespace ref

}  // namespace skipkv::kernels
