// Reference (scalar) encoders and decoders of the ggml block formats. The
// decoders are exact transcriptions of ggml's dequantize_row_* semantics; the
// encoders follow ggml's *_ref quantisers (Q4_K's scale search is a simplified
// version of make_qkx2_quants; Q6_K uses make_qx_quants as ggml does), so the
// bytes they write are valid ggml blocks that llama.cpp reads identically.
#include "tensor/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "util/check.h"

namespace skipkv {
namespace {

// Round to nearest, ties to even (ggml's nearest_int; default FP environment).
inline int NearestInt(float v) { return static_cast<int>(std::nearbyint(v)); }

// ---- F16 / BF16 ----------------------------------------------------------

void DequantF16(const f16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(src[i]);
}
void QuantF16(const float* src, f16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = F32ToF16(src[i]);
}
void DequantBF16(const bf16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = BF16ToF32(src[i]);
}
void QuantBF16(const float* src, bf16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = F32ToBF16(src[i]);
}

// ---- Q8_0: 32 x int8, value = q * d ---------------------------------------

void DequantQ8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    for (int j = 0; j < kQK8_0; ++j) y[i * kQK8_0 + j] = b[i].qs[j] * d;
  }
}

// ggml quantize_row_q8_0_ref: d = max|x| / 127, q = round(x / d) (ties away).
void QuantQ8_0(const float* x, BlockQ8_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK8_0;
    float amax = 0.f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    b[i].d = F32ToF16(d);
    for (int j = 0; j < kQK8_0; ++j) b[i].qs[j] = static_cast<int8_t>(std::roundf(xb[j] * id));
  }
}

// ---- Q4_0: 32 x 4-bit, value = (q - 8) * d --------------------------------

void DequantQ4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    float* yb = y + i * kQK4_0;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      yb[j] = ((b[i].qs[j] & 0x0f) - 8) * d;
      yb[j + kQK4_0 / 2] = ((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

// ggml quantize_row_q4_0_ref: the element of largest magnitude maps to -8.
void QuantQ4_0(const float* x, BlockQ4_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK4_0;
    float amax = 0.f, max = 0.f;
    for (int j = 0; j < kQK4_0; ++j) {
      if (std::fabs(xb[j]) > amax) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    const float d = max / -8.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    b[i].d = F32ToF16(d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(xb[j] * id + 8.5f)));
      const int q1 =
          std::min(15, static_cast<int>(static_cast<int8_t>(xb[j + kQK4_0 / 2] * id + 8.5f)));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

// ---- Q4_K -------------------------------------------------------------------

// Unpacks the 6-bit (scale, min) of sub-block j (0..7) (ggml get_scale_min_k4).
inline void GetScaleMinK4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void DequantQ4_K(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    const float dmin = F16ToF32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    // Each 32 bytes of qs hold two sub-blocks: low nibbles then high nibbles.
    for (int j = 0; j < kQK_K; j += 64) {
      const int is = j / 32;
      uint8_t sc, m;
      GetScaleMinK4(is, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      GetScaleMinK4(is + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0x0f) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
    }
  }
}

// Fits x[i] ~= scale * L[i] - min, L in [0, nmax], min >= 0 (so the offset is
// <= 0 as ggml requires), minimising the weighted squared error. Searches a
// small set of candidate inverse scales and refines each with the closed-form
// least-squares (scale, min) for its L (a simplified make_qkx2_quants).
// Returns scale; *the_min receives min (as a positive number).
float FitScaleMin(int n, int nmax, const float* x, const float* w, uint8_t* L, float* the_min) {
  float lo = x[0], hi = x[0], sum_w = 0.f, sum_x = 0.f;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0.f) lo = 0.f;
  if (hi == lo) {
    std::fill(L, L + n, 0);
    *the_min = -lo;
    return 0.f;
  }
  auto error_of = [&](float scale, float min) {  // min here is the (<= 0) offset
    float err = 0.f;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(NearestInt((x[i] - min) / scale), 0, nmax);
      const float diff = scale * l + min - x[i];
      err += w[i] * diff * diff;
    }
    return err;
  };
  float best_scale = (hi - lo) / nmax, best_min = lo;
  float best_err = error_of(best_scale, best_min);
  for (int step = -10; step <= 10; ++step) {
    const float iscale = (0.1f * step + nmax) / (hi - lo);
    float sum_l = 0.f, sum_l2 = 0.f, sum_xl = 0.f;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(NearestInt(iscale * (x[i] - lo)), 0, nmax);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0.f) continue;
    float scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (min > 0.f) {  // offset must be <= 0: refit scale with min = 0
      min = 0.f;
      scale = sum_l2 > 0.f ? sum_xl / sum_l2 : 0.f;
    }
    if (scale <= 0.f) continue;
    const float err = error_of(scale, min);
    if (err < best_err) {
      best_err = err;
      best_scale = scale;
      best_min = min;
    }
  }
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(std::clamp(NearestInt((x[i] - best_min) / best_scale), 0, nmax));
  }
  *the_min = -best_min;
  return best_scale;
}

void QuantQ4_K(const float* x, BlockQ4_K* b, int64_t nb) {
  uint8_t L[kQK_K];
  float weights[32], scales[8], mins[8];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max_scale = 0.f, max_min = 0.f;
    for (int j = 0; j < 8; ++j) {
      const float* xs = x + 32 * j;
      float sum_x2 = 0.f;
      for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);  // as ggml
      scales[j] = FitScaleMin(32, 15, xs, weights, L + 32 * j, &mins[j]);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    // Super-block scales first (f16), then each sub-block's 6-bit (scale, min)
    // chosen among floor/ceil of the ideal values by the weighted error they
    // give (ggml rounds to nearest only, which can clip the top quant).
    b[i].d = F32ToF16(max_scale / 63.f);
    b[i].dmin = F32ToF16(max_min / 63.f);
    const float d = F16ToF32(b[i].d), dmin = F16ToF32(b[i].dmin);
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; ++j) {
      const float* xs = x + 32 * j;
      float sum_x2 = 0.f;
      for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
      const float av_x = std::sqrt(sum_x2 / 32);
      const float fs = d > 0.f ? scales[j] / d : 0.f;
      const float fm = dmin > 0.f ? mins[j] / dmin : 0.f;
      float best_err = std::numeric_limits<float>::infinity();
      for (int cs = 0; cs < 2; ++cs) {
        for (int cm = 0; cm < 2; ++cm) {
          const int s6 = std::clamp(static_cast<int>(cs ? std::ceil(fs) : std::floor(fs)), 0, 63);
          const int m6 = std::clamp(static_cast<int>(cm ? std::ceil(fm) : std::floor(fm)), 0, 63);
          const float dj = d * s6, mj = dmin * m6;
          float err = 0.f;
          for (int l = 0; l < 32; ++l) {
            const int q = dj != 0.f ? std::clamp(NearestInt((xs[l] + mj) / dj), 0, 15) : 0;
            const float diff = dj * q - mj - xs[l];
            err += (av_x + std::fabs(xs[l])) * diff * diff;
          }
          if (err < best_err) {
            best_err = err;
            ls[j] = static_cast<uint8_t>(s6);
            lm[j] = static_cast<uint8_t>(m6);
          }
        }
      }
    }
    std::memset(b[i].scales, 0, sizeof(b[i].scales));
    for (int j = 0; j < 8; ++j) {
      if (j < 4) {
        b[i].scales[j] = ls[j];
        b[i].scales[j + 4] = lm[j];
      } else {
        b[i].scales[j + 4] = (ls[j] & 0x0f) | ((lm[j] & 0x0f) << 4);
        b[i].scales[j - 4] |= ((ls[j] >> 4) << 6);
        b[i].scales[j] |= ((lm[j] >> 4) << 6);
      }
    }
    // Quantise against the scales as actually stored.
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      GetScaleMinK4(j, b[i].scales, &sc, &m);
      const float dj = d * sc;
      const float mj = dmin * m;
      for (int l = 0; l < 32; ++l) {
        L[32 * j + l] =
            dj != 0.f ? static_cast<uint8_t>(std::clamp(NearestInt((x[32 * j + l] + mj) / dj), 0, 15))
                      : 0;
      }
    }
    uint8_t* q = b[i].qs;
    for (int j = 0; j < kQK_K; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

// ---- Q6_K -------------------------------------------------------------------

void DequantQ6_K(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    // Each half (128 values) uses 64 bytes of ql, 32 of qh and 8 scales.
    for (int n = 0; n < kQK_K; n += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

// ggml make_qx_quants(n, nmax, x, L, rmse_type = 1): symmetric fit x ~= s*l,
// l in [-nmax, nmax-1], weights x^2, search over 19 inverse scales. L receives
// l + nmax. Returns the scale (signed).
float MakeQxQuants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0.f, amax = 0.f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < 1e-30f) {
    std::fill(L, L + n, 0);
    return 0.f;
  }
  auto fit = [&](float iscale, float* sumlx, float* suml2, bool store) {
    *sumlx = 0.f;
    *suml2 = 0.f;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
      if (store) L[i] = static_cast<int8_t>(l + nmax);
      const float w = x[i] * x[i];
      *sumlx += w * x[i] * l;
      *suml2 += w * l * l;
    }
  };
  float sumlx, suml2;
  float iscale = -nmax / max;
  fit(iscale, &sumlx, &suml2, true);
  float scale = suml2 > 0.f ? sumlx / suml2 : 0.f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    fit(iscale, &sumlx, &suml2, false);
    if (suml2 > 0.f && sumlx * sumlx > best * suml2) {
      fit(iscale, &sumlx, &suml2, true);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

void QuantQ6_K(const float* x, BlockQ6_K* b, int64_t nb) {
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max_scale = 0.f, max_abs_scale = 0.f;
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      scales[ib] = MakeQxQuants(16, 32, x + 16 * ib, L + 16 * ib);
      if (std::fabs(scales[ib]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[ib]);
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < 1e-30f) {
      std::memset(&b[i], 0, sizeof(BlockQ6_K));
      continue;
    }
    const float iscale = -128.f / max_scale;
    b[i].d = F32ToF16(1.f / iscale);
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      b[i].scales[ib] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[ib])));
    }
    const float d0 = F16ToF32(b[i].d);
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = d0 * b[i].scales[j];
      if (d == 0.f) {
        for (int ii = 0; ii < 16; ++ii) L[16 * j + ii] = 32;
        continue;
      }
      for (int ii = 0; ii < 16; ++ii) {
        const int l = std::clamp(NearestInt(x[16 * j + ii] / d), -32, 31);
        L[16 * j + ii] = static_cast<int8_t>(l + 32);
      }
    }
    uint8_t* ql = b[i].ql;
    uint8_t* qh = b[i].qh;
    for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = L[j + l] & 0x0f;
        const uint8_t q2 = L[j + l + 32] & 0x0f;
        const uint8_t q3 = L[j + l + 64] & 0x0f;
        const uint8_t q4 = L[j + l + 96] & 0x0f;
        ql[l] = q1 | (q3 << 4);
        ql[l + 32] = q2 | (q4 << 4);
        qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                     ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

// ---- Q8_K: 256 x int8, f32 d, bsums of 16 --------------------------------

void DequantQ8_K(const BlockQ8_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    for (int j = 0; j < kQK_K; ++j) y[i * kQK_K + j] = b[i].d * b[i].qs[j];
  }
}

// ggml quantize_row_q8_K_ref: the element of largest magnitude maps to -127
// (so q is in [-127, 127], never -128), ties to even.
void QuantQ8_K(const float* x, BlockQ8_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max = 0.f, amax = 0.f;
    for (int j = 0; j < kQK_K; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax == 0.f) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j) {
      b[i].qs[j] = static_cast<int8_t>(std::min(127, NearestInt(iscale * x[j])));
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += b[i].qs[j * 16 + ii];
      b[i].bsums[j] = static_cast<int16_t>(sum);
    }
    b[i].d = 1.f / iscale;
  }
}

}  // namespace

bool IsQuantizable(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_K:
    case DType::kQ6_K:
    case DType::kQ8_K:
      return true;
    default:
      return false;
  }
}

void DequantizeRow(DType t, const void* src, float* dst, int64_t n) {
  SKIPKV_CHECK_MSG(IsQuantizable(t), DTypeName(t));
  SKIPKV_CHECK(n % BlockSize(t) == 0);
  const int64_t nb = n / BlockSize(t);
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      break;
    case DType::kF16:
      DequantF16(static_cast<const f16_t*>(src), dst, n);
      break;
    case DType::kBF16:
      DequantBF16(static_cast<const bf16_t*>(src), dst, n);
      break;
    case DType::kQ8_0:
      DequantQ8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
      break;
    case DType::kQ4_0:
      DequantQ4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
      break;
    case DType::kQ4_K:
      DequantQ4_K(static_cast<const BlockQ4_K*>(src), dst, nb);
      break;
    case DType::kQ6_K:
      DequantQ6_K(static_cast<const BlockQ6_K*>(src), dst, nb);
      break;
    case DType::kQ8_K:
      DequantQ8_K(static_cast<const BlockQ8_K*>(src), dst, nb);
      break;
    default:
      SKIPKV_CHECK(false);
  }
}

void QuantizeRow(DType t, const float* src, void* dst, int64_t n) {
  SKIPKV_CHECK_MSG(IsQuantizable(t), DTypeName(t));
  SKIPKV_CHECK(n % BlockSize(t) == 0);
  const int64_t nb = n / BlockSize(t);
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      break;
    case DType::kF16:
      QuantF16(src, static_cast<f16_t*>(dst), n);
      break;
    case DType::kBF16:
      QuantBF16(src, static_cast<bf16_t*>(dst), n);
      break;
    case DType::kQ8_0:
      QuantQ8_0(src, static_cast<BlockQ8_0*>(dst), nb);
      break;
    case DType::kQ4_0:
      QuantQ4_0(src, static_cast<BlockQ4_0*>(dst), nb);
      break;
    case DType::kQ4_K:
      QuantQ4_K(src, static_cast<BlockQ4_K*>(dst), nb);
      break;
    case DType::kQ6_K:
      QuantQ6_K(src, static_cast<BlockQ6_K*>(dst), nb);
      break;
    case DType::kQ8_K:
      QuantQ8_K(src, static_cast<BlockQ8_K*>(dst), nb);
      break;
    default:
      SKIPKV_CHECK(false);
  }
}

}  // namespace skipkv
