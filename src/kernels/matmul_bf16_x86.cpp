// BF16-weight products as bf16 dot products, on x86 CPUs with AVX512_BF16
// (Zen 4/5, Cooper Lake, Sapphire Rapids and later): vdpbf16ps multiplies 32
// bf16 pairs per instruction and adds them into 16 f32 lanes, so a weight
// cache line costs one instruction instead of a widening conversion and two
// FMAs. That conversion made the f32 path (matmul.cpp, FloatRows<Bf16Tag>)
// compute- and latency-bound at about 60 % of the memory bandwidth in decode.
//
// Numerics (the deviation from the f32 path): activations are rounded to bf16
// (round to nearest even, as vcvtneps2bf16 does) before the products, like
// llama.cpp, whose BF16 matmuls take bf16 activations. Each bf16 x bf16
// product is exact in f32; vdpbf16ps adds the two products of a lane pair one
// after the other into the lane's f32 accumulator, with round to nearest and
// subnormal inputs and outputs flushed to zero. So a result equals the f32
// dot product of the weights and the bf16-rounded activations up to
// summation order (tests/kernels/matmul_test.cpp checks exactly that against
// the scalar reference on independently rounded activations).
//
// Determinism: every (row, token) pair follows the same instruction sequence
// whatever the tile it falls in (two accumulators, vectors of 32 elements
// alternating between them, a masked tail into the second, one final
// reduction), so results do not depend on tiling or the thread count.
//
// Dispatch: used when the CPU reports AVX512_BF16 and the Highway dispatch
// runs AVX3_DL (so SKIPKV_SIMD=avx3 or avx2, and the kernel tests' target
// selection, fall back to the f32 path). Other CPUs and architectures compile
// stubs that report false.
#include "kernels/simd_internal.h"
#include "util/check.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SKIPKV_BF16_X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define SKIPKV_BF16_X86 0
#endif

#include <algorithm>

namespace skipkv::kernels::internal {

#if SKIPKV_BF16_X86

namespace {

#define SKIPKV_BF16_ATTR __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

// CPUID leaf 7 sub-leaf 1, EAX bit 5: AVX512_BF16. Asked once (CPUID traps
// to the hypervisor in a VM). The OS's AVX-512 state support is implied by
// the AVX3_DL dispatch that Bf16DotActive also requires.
bool CpuHasAvx512Bf16() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d) == 0) return false;
    return ((a >> 5) & 1u) != 0;
  }();
  return has;
}

SKIPKV_BF16_ATTR inline __m512 Dot(__m512 acc, __m512i w, __m512i x) {
  return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)x);
}

// Sum of the 16 lanes in a fixed order. Zero-masked shuffle and extract:
// GCC 12 warns (-Wuninitialized) about the undefined pass-through operand of
// the unmasked forms, _mm512_reduce_add_ps and _mm512_castps512_ps256 too.
SKIPKV_BF16_ATTR inline float HSum(__m512 v) {
  const __m512 h = _mm512_add_ps(v, _mm512_maskz_shuffle_f32x4(0xFFFF, v, v, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 s = _mm512_maskz_extractf32x8_ps(0xFF, h, 0);
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}

// out[r * NT + t] = dot(w[r][0..in), x[t][0..in)), bf16 elements.
template <int NR, int NT>
SKIPKV_BF16_ATTR inline void TileDot(const uint16_t* const* w, const uint16_t* const* x, int64_t in, float* out) {
  constexpr int64_t kV = 32;  // bf16 elements per zmm
  __m512 acc0[NR][NT], acc1[NR][NT];
  SKIPKV_UNROLL
  for (int r = 0; r < NR; ++r) {
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) acc0[r][t] = acc1[r][t] = _mm512_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 2 * kV <= in; i += 2 * kV) {
    __m512i w0[NR], w1[NR];
    SKIPKV_UNROLL
    for (int r = 0; r < NR; ++r) {
      w0[r] = _mm512_loadu_si512(w[r] + i);
      w1[r] = _mm512_loadu_si512(w[r] + i + kV);
    }
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      const __m512i x0 = _mm512_loadu_si512(x[t] + i), x1 = _mm512_loadu_si512(x[t] + i + kV);
      SKIPKV_UNROLL
      for (int r = 0; r < NR; ++r) {
        acc0[r][t] = Dot(acc0[r][t], w0[r], x0);
        acc1[r][t] = Dot(acc1[r][t], w1[r], x1);
      }
    }
  }
  if (i + kV <= in) {
    __m512i w0[NR];
    SKIPKV_UNROLL
    for (int r = 0; r < NR; ++r) w0[r] = _mm512_loadu_si512(w[r] + i);
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      const __m512i x0 = _mm512_loadu_si512(x[t] + i);
      SKIPKV_UNROLL
      for (int r = 0; r < NR; ++r) acc0[r][t] = Dot(acc0[r][t], w0[r], x0);
    }
    i += kV;
  }
  if (i < in) {  // masked tail: lanes past `in` load as zero and add nothing
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (in - i)) - 1);
    __m512i w0[NR];
    SKIPKV_UNROLL
    for (int r = 0; r < NR; ++r) w0[r] = _mm512_maskz_loadu_epi16(m, w[r] + i);
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      const __m512i x0 = _mm512_maskz_loadu_epi16(m, x[t] + i);
      SKIPKV_UNROLL
      for (int r = 0; r < NR; ++r) acc1[r][t] = Dot(acc1[r][t], w0[r], x0);
    }
  }
  SKIPKV_UNROLL
  for (int r = 0; r < NR; ++r) {
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) out[r * NT + t] = HSum(_mm512_add_ps(acc0[r][t], acc1[r][t]));
  }
}

template <int NR, int NT>
SKIPKV_BF16_ATTR void Tile(const MatArgs& a, int64_t r, int64_t t0) {
  const uint16_t* w[NR];
  const uint16_t* x[NT];
  RowPointers(a.w, a.w_row_bytes, r, w);
  RowPointers(a.act, a.act_row_bytes, t0, x);
  float out[NR * NT];
  TileDot<NR, NT>(w, x, a.in, out);
  StoreTile<NR, NT>(a, r, t0, out);
}

template <int NR>
SKIPKV_BF16_ATTR void TokenRange(const MatArgs& a, int64_t r, int64_t tb, int64_t te) {
  int64_t t = tb;
  for (; t + 4 <= te; t += 4) Tile<NR, 4>(a, r, t);
  switch (te - t) {
    case 3: Tile<NR, 3>(a, r, t); break;
    case 2: Tile<NR, 2>(a, r, t); break;
    case 1: Tile<NR, 1>(a, r, t); break;
    default: break;
  }
}

SKIPKV_BF16_ATTR void ConvertRow(const float* x, int64_t in, uint16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= in; i += 16) {
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), (__m256i)v);
  }
  if (i < in) {
    const __mmask16 m = static_cast<__mmask16>((1u << (in - i)) - 1);
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i));
    _mm256_mask_storeu_epi16(out + i, m, (__m256i)v);
  }
}

}  // namespace

bool Bf16DotActive() { return CpuHasAvx512Bf16() && DispatchIsAvx3Dl(); }

void ConvertActivationsToBf16(const float* x, int64_t in, uint16_t* out) {
  SKIPKV_CHECK(CpuHasAvx512Bf16());
  ConvertRow(x, in, out);
}

// Cache-blocked (ForEachCacheBlock). Fewer than 4 tokens
// (decode): one row at a time, one sequential weight stream per thread (see
// FloatRows in matmul.cpp); batches: rows two at a time against up to 4
// tokens (16 accumulators), a last odd row alone.
void Bf16MatRows(const MatArgs& a, int64_t r0, int64_t r1) {
  SKIPKV_CHECK(CpuHasAvx512Bf16() && a.type == DType::kBF16);
  ForEachCacheBlock(a, r0, r1, 4, [&](int64_t rb, int64_t re, int64_t tb, int64_t te) {
    int64_t r = rb;
    if (te - tb >= 4) {
      for (; r + 2 <= re; r += 2) TokenRange<2>(a, r, tb, te);
    }
    for (; r < re; ++r) TokenRange<1>(a, r, tb, te);
  });
}

#else  // not x86-64 with GCC/Clang: the f32 path serves BF16 weights

bool Bf16DotActive() { return false; }
void ConvertActivationsToBf16(const float*, int64_t, uint16_t*) {
  SKIPKV_CHECK_MSG(false, "bf16 dot products are not compiled for this architecture");
}
void Bf16MatRows(const MatArgs&, int64_t, int64_t) {
  SKIPKV_CHECK_MSG(false, "bf16 dot products are not compiled for this architecture");
}

#endif

}  // namespace skipkv::kernels::internal
