// kernels::ref oracles of panel_matmul.h: plain loops in double precision
// that read the packed operand through its documented layout, and a Gram
// pass that visits the same tiles as the SIMD one but computes every entry
// and sum independently of it. Single-threaded, slow, obviously right.
#include <algorithm>
#include <vector>

#include "kernels/panel_matmul.h"
#include "util/check.h"

namespace skipkv::kernels::ref {
namespace {

// B[j][k] from its packed form.
inline float PackedAt(const float* packed, int d, int64_t j, int k) {
  return packed[((j / kPanelCols) * d + k) * kPanelCols + j % kPanelCols];
}

}  // namespace

void MatMulABtPacked(const float* a, int64_t m, const float* packed, int64_t n, int d, float* c, int64_t ldc) {
  SKIPKV_CHECK(m >= 0 && n >= 0 && d > 0 && ldc >= n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int k = 0; k < d; ++k) acc += static_cast<double>(a[i * d + k]) * PackedAt(packed, d, j, k);
      c[i * ldc + j] = static_cast<float>(acc);
    }
  }
}

void GramUpperPass(const float* x, const float* packed, int64_t n, int d, float threshold, float* sum,
                   GramTileSink& sink) {
  SKIPKV_CHECK(n >= 0 && d > 0);
  // S in full (double), from the rows of x; the packed copy is cross-checked.
  std::vector<double> s(static_cast<size_t>(n * n), 0.0);
  for (int64_t a = 0; a < n; ++a) {
    for (int64_t c = 0; c < n; ++c) {
      double acc = 0.0;
      for (int k = 0; k < d; ++k) {
        SKIPKV_CHECK(x[c * d + k] == PackedAt(packed, d, c, k));
        acc += static_cast<double>(x[a * d + k]) * x[c * d + k];
      }
      s[a * n + c] = acc;
    }
  }
  std::vector<double> acc(static_cast<size_t>(n), 0.0);
  for (int64_t a = 0; a < n; ++a)
    for (int64_t c = a + 1; c < n; ++c) acc[a] += s[a * n + c], acc[c] += s[a * n + c];
  for (int64_t r = 0; r < n; ++r) sum[r] += static_cast<float>(acc[r]);
  // Tiles in the documented order; entries outside a < c < n are zero.
  float tile[kTileRows * kPanelCols];
  for (int64_t i0 = 0; i0 < n; i0 += kTileRows) {
    for (int64_t j0 = (i0 / kPanelCols) * kPanelCols; j0 < n; j0 += kPanelCols) {
      uint32_t hits[kTileRows] = {};
      bool any = false;
      for (int i = 0; i < kTileRows; ++i) {
        for (int j = 0; j < kPanelCols; ++j) {
          const int64_t a = i0 + i, c = j0 + j;
          const bool pair = a < c && c < n;
          const float v = pair ? static_cast<float>(s[a * n + c]) : 0.f;
          tile[i * kPanelCols + j] = v;
          if (pair && v > threshold) hits[i] |= uint32_t{1} << j, any = true;
        }
      }
      if (any) sink.OnHits(i0, j0, tile, hits);
    }
  }
}

}  // namespace skipkv::kernels::ref
