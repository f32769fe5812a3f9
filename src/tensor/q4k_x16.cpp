// Q4_K <-> BlockQ4_Kx16 (see q4k_x16.h and the field comments in dtype.h).
#include "tensor/q4k_x16.h"

#include <cstring>
#include <vector>

#include "util/check.h"

namespace skipkv {
namespace {

constexpr int kGroupRows = 16;

// Sub-block j's 6-bit (scale, min) from a Q4_K scale record (ggml get_scale_min_k4).
void ScaleMin(const uint8_t* q, int j, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// The inverse of ScaleMin over all eight sub-blocks.
void PackScaleMin(const uint8_t* sc, const uint8_t* m, uint8_t* q) {
  std::memset(q, 0, kKScaleBytes);
  for (int j = 0; j < 4; ++j) {
    q[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    q[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
  }
}

void PutRow(const BlockQ4_K& w, int r, BlockQ4_Kx16& g) {
  g.d[r] = w.d;
  g.dmin[r] = w.dmin;
  g.sc_hi[r] = 0;
  g.m_hi[r] = 0;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    ScaleMin(w.scales, j, &sc, &m);
    const int at = (j / 2) * kGroupRows + r, shift = 4 * (j % 2);
    g.sc_lo[at] = static_cast<uint8_t>((g.sc_lo[at] & ~(0x0f << shift)) | ((sc & 0x0f) << shift));
    g.m_lo[at] = static_cast<uint8_t>((g.m_lo[at] & ~(0x0f << shift)) | ((m & 0x0f) << shift));
    g.sc_hi[r] = static_cast<uint16_t>(g.sc_hi[r] | ((sc >> 4) << (2 * j)));
    g.m_hi[r] = static_cast<uint16_t>(g.m_hi[r] | ((m >> 4) << (2 * j)));
  }
  // Q4_K's qs[32 p + l] holds element 64 p + l (low nibble) and 64 p + 32 + l
  // (high): the same byte moves to chunk 8 p + l / 4, slot 4 r + l % 4.
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) g.qs[8 * p + l / 4][4 * r + l % 4] = w.qs[32 * p + l];
  }
}

void GetRow(const BlockQ4_Kx16& g, int r, BlockQ4_K& w) {
  w.d = g.d[r];
  w.dmin = g.dmin[r];
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    const int at = (j / 2) * kGroupRows + r, shift = 4 * (j % 2);
    sc[j] = static_cast<uint8_t>(((g.sc_lo[at] >> shift) & 0x0f) | (((g.sc_hi[r] >> (2 * j)) & 3) << 4));
    m[j] = static_cast<uint8_t>(((g.m_lo[at] >> shift) & 0x0f) | (((g.m_hi[r] >> (2 * j)) & 3) << 4));
  }
  PackScaleMin(sc, m, w.scales);
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) w.qs[32 * p + l] = g.qs[8 * p + l / 4][4 * r + l % 4];
  }
}

}  // namespace

bool CanInterleaveQ4K(int64_t rows, int64_t in) {
  return rows > 0 && rows % kGroupRows == 0 && in > 0 && in % kQK_K == 0;
}

void InterleaveQ4KRows(uint8_t* data, int64_t rows, int64_t in) {
  SKIPKV_CHECK_MSG(CanInterleaveQ4K(rows, in), "InterleaveQ4KRows: rows must be a multiple of 16, in of 256");
  const int64_t nb = in / kQK_K;
  const size_t row_bytes = RowBytes(DType::kQ4_K, in), group_bytes = kGroupRows * row_bytes;
  std::vector<uint8_t> rows_copy(group_bytes);
  for (int64_t g = 0; g < rows / kGroupRows; ++g) {
    uint8_t* group = data + static_cast<size_t>(g) * group_bytes;
    std::memcpy(rows_copy.data(), group, group_bytes);
    auto* out = reinterpret_cast<BlockQ4_Kx16*>(group);
    std::memset(out, 0, group_bytes);
    for (int r = 0; r < kGroupRows; ++r) {
      const auto* w = reinterpret_cast<const BlockQ4_K*>(rows_copy.data() + r * row_bytes);
      for (int64_t b = 0; b < nb; ++b) PutRow(w[b], r, out[b]);
    }
  }
}

void ExtractQ4KRow(const uint8_t* data, int64_t in, int64_t row, BlockQ4_K* out) {
  SKIPKV_CHECK(in > 0 && in % kQK_K == 0 && row >= 0);
  const int64_t nb = in / kQK_K;
  const auto* group = reinterpret_cast<const BlockQ4_Kx16*>(
      data + static_cast<size_t>(row / kGroupRows) * kGroupRows * RowBytes(DType::kQ4_K, in));
  for (int64_t b = 0; b < nb; ++b) GetRow(group[b], static_cast<int>(row % kGroupRows), out[b]);
}

}  // namespace skipkv
