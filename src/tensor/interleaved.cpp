// Q4_K, Q8_0, Q6_K, F32 and F16 <-> their 16-row interleaved blocks (see interleaved.h and the field
// comments in dtype.h).
#include "tensor/interleaved.h"

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

void PutRowQ4_K(const BlockQ4_K& w, int r, BlockQ4_Kx16& g) {
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
  // (high): the same byte moves to chunk 8 p + l / 4, slot 4 r + l % 4, four
  // consecutive bytes at a time.
  for (int p = 0; p < 4; ++p) {
    for (int c = 0; c < 8; ++c) std::memcpy(&g.qs[8 * p + c][4 * r], &w.qs[32 * p + 4 * c], 4);
  }
}

void GetRowQ4_K(const BlockQ4_Kx16& g, int r, BlockQ4_K& w) {
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
    for (int c = 0; c < 8; ++c) std::memcpy(&w.qs[32 * p + 4 * c], &g.qs[8 * p + c][4 * r], 4);
  }
}

void PutRowQ8_0(const BlockQ8_0& w, int r, BlockQ8_0x16& g) {
  g.d[r] = w.d;
  for (int c = 0; c < 8; ++c) std::memcpy(&g.qs[c][4 * r], &w.qs[4 * c], 4);
}

void GetRowQ8_0(const BlockQ8_0x16& g, int r, BlockQ8_0& w) {
  w.d = g.d[r];
  for (int c = 0; c < 8; ++c) std::memcpy(&w.qs[4 * c], &g.qs[c][4 * r], 4);
}

void PutRowQ6_K(const BlockQ6_K& w, int r, BlockQ6_Kx16& g) {
  g.d[r] = w.d;
  for (int j = 0; j < 16; ++j) g.sc[j][r] = w.scales[j];
  // The bytes named in dtype.h's BlockQ6_Kx16 comment, four at a time.
  for (int h = 0; h < 2; ++h) {
    for (int c = 0; c < 8; ++c) {
      std::memcpy(&g.qs[h][c][0][4 * r], &w.ql[64 * h + 4 * c], 4);
      std::memcpy(&g.qs[h][c][1][4 * r], &w.ql[64 * h + 32 + 4 * c], 4);
      std::memcpy(&g.qs[h][c][2][4 * r], &w.qh[32 * h + 4 * c], 4);
    }
  }
}

void GetRowQ6_K(const BlockQ6_Kx16& g, int r, BlockQ6_K& w) {
  w.d = g.d[r];
  for (int j = 0; j < 16; ++j) w.scales[j] = g.sc[j][r];
  for (int h = 0; h < 2; ++h) {
    for (int c = 0; c < 8; ++c) {
      std::memcpy(&w.ql[64 * h + 4 * c], &g.qs[h][c][0][4 * r], 4);
      std::memcpy(&w.ql[64 * h + 32 + 4 * c], &g.qs[h][c][1][4 * r], 4);
      std::memcpy(&w.qh[32 * h + 4 * c], &g.qs[h][c][2][4 * r], 4);
    }
  }
}

// Rewrites each group of 16 rows (nb blocks of File each) as nb blocks of X.
template <class File, class X, class Put>
void InterleaveGroups(uint8_t* data, int64_t rows, int64_t nb, Put put) {
  const size_t row_bytes = static_cast<size_t>(nb) * sizeof(File), group_bytes = kGroupRows * row_bytes;
  std::vector<uint8_t> rows_copy(group_bytes);
  for (int64_t g = 0; g < rows / kGroupRows; ++g) {
    uint8_t* group = data + static_cast<size_t>(g) * group_bytes;
    std::memcpy(rows_copy.data(), group, group_bytes);
    auto* out = reinterpret_cast<X*>(group);
    std::memset(out, 0, group_bytes);
    for (int r = 0; r < kGroupRows; ++r) {
      const auto* w = reinterpret_cast<const File*>(rows_copy.data() + r * row_bytes);
      for (int64_t b = 0; b < nb; ++b) put(w[b], r, out[b]);
    }
  }
}

// Row `row`'s nb blocks out of its group.
template <class File, class X, class Get>
void ExtractGroupRow(const uint8_t* data, int64_t nb, int64_t row, File* out, Get get) {
  const auto* group = reinterpret_cast<const X*>(data + static_cast<size_t>(row / kGroupRows) * kGroupRows *
                                                            static_cast<size_t>(nb) * sizeof(File));
  for (int64_t b = 0; b < nb; ++b) get(group[b], static_cast<int>(row % kGroupRows), out[b]);
}

// Float rows (E: the element's bits, uint32_t for F32, uint16_t for F16) take
// one element as the block: block k of a group holds element k of its 16 rows.
template <class E>
struct FloatX16 {
  E v[kGroupRows];
};
template <class E>
void PutRowFloat(const E& w, int r, FloatX16<E>& g) {
  g.v[r] = w;
}
template <class E>
void GetRowFloat(const FloatX16<E>& g, int r, E& w) {
  w = g.v[r];
}

}  // namespace

std::optional<DType> InterleavedType(DType file_type) {
  switch (file_type) {
    case DType::kQ4_K:
      return DType::kQ4_Kx16;
    case DType::kQ8_0:
      return DType::kQ8_0x16;
    case DType::kQ6_K:
      return DType::kQ6_Kx16;
    case DType::kF32:
      return DType::kF32x16;
    case DType::kF16:
      return DType::kF16x16;
    default:
      return std::nullopt;
  }
}

DType FileTypeOf(DType t) {
  switch (t) {
    case DType::kQ4_Kx16:
      return DType::kQ4_K;
    case DType::kQ8_0x16:
      return DType::kQ8_0;
    case DType::kQ6_Kx16:
      return DType::kQ6_K;
    case DType::kF32x16:
      return DType::kF32;
    case DType::kF16x16:
      return DType::kF16;
    default:
      return t;
  }
}

bool CanInterleave(DType t, int64_t rows, int64_t in) {
  return InterleavedType(t).has_value() && rows > 0 && rows % kGroupRows == 0 && in > 0 &&
         in % BlockSize(t) == 0;
}

void InterleaveRows(DType t, uint8_t* data, int64_t rows, int64_t in) {
  SKIPKV_CHECK_MSG(CanInterleave(t, rows, in),
                   "InterleaveRows: Q4_K, Q6_K, Q8_0, F32 or F16, rows a multiple of 16, whole blocks");
  const int64_t nb = in / BlockSize(t);
  if (t == DType::kF32) {
    InterleaveGroups<uint32_t, FloatX16<uint32_t>>(data, rows, nb, PutRowFloat<uint32_t>);
  } else if (t == DType::kF16) {
    InterleaveGroups<uint16_t, FloatX16<uint16_t>>(data, rows, nb, PutRowFloat<uint16_t>);
  } else if (t == DType::kQ4_K) {
    InterleaveGroups<BlockQ4_K, BlockQ4_Kx16>(data, rows, nb, PutRowQ4_K);
  } else if (t == DType::kQ6_K) {
    InterleaveGroups<BlockQ6_K, BlockQ6_Kx16>(data, rows, nb, PutRowQ6_K);
  } else {
    InterleaveGroups<BlockQ8_0, BlockQ8_0x16>(data, rows, nb, PutRowQ8_0);
  }
}

void ExtractRow(DType x, const uint8_t* data, int64_t in, int64_t row, void* out) {
  const DType file = FileTypeOf(x);
  SKIPKV_CHECK_MSG(file != x && in > 0 && in % BlockSize(file) == 0 && row >= 0,
                   "ExtractRow: not an interleaved matrix");
  const int64_t nb = in / BlockSize(file);
  if (file == DType::kF32) {
    ExtractGroupRow<uint32_t, FloatX16<uint32_t>>(data, nb, row, static_cast<uint32_t*>(out),
                                                  GetRowFloat<uint32_t>);
  } else if (file == DType::kF16) {
    ExtractGroupRow<uint16_t, FloatX16<uint16_t>>(data, nb, row, static_cast<uint16_t*>(out),
                                                  GetRowFloat<uint16_t>);
  } else if (x == DType::kQ4_Kx16) {
    ExtractGroupRow<BlockQ4_K, BlockQ4_Kx16>(data, nb, row, static_cast<BlockQ4_K*>(out), GetRowQ4_K);
  } else if (x == DType::kQ6_Kx16) {
    ExtractGroupRow<BlockQ6_K, BlockQ6_Kx16>(data, nb, row, static_cast<BlockQ6_K*>(out), GetRowQ6_K);
  } else {
    ExtractGroupRow<BlockQ8_0, BlockQ8_0x16>(data, nb, row, static_cast<BlockQ8_0*>(out), GetRowQ8_0);
  }
}

}  // namespace skipkv
