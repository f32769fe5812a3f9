// BF16-weight products as bf16 dot products, on x86 CPUs with AVX512_BF16
// (Zen 4/5, Cooper Lake, Sapphire Rapids and later): vdpbf16ps multiplies 32
// bf16 pairs per instruction and adds them into 16 f32 lanes, so a weight
// cache line costs one instruction instead of a widening conversion and two
// FMAs. That conversion made the f32 path (matmul_body-inl.h, FloatRows<Bf16Tag>)
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

// Keeps a loaded vector in a register (see KeepInRegister in matmul_body-inl.h).
SKIPKV_BF16_ATTR inline void Keep(__m512i& v) { asm("" : "+v"(v)); }

template <int NR, int NT>
struct Acc {
  __m512 acc0[NR][NT], acc1[NR][NT];
};

// Adds bf16 elements [k0, k1) of every (row, token) pair into `acc`: k0 is a
// multiple of 64 (two vectors); k1 is too, or k1 == in, and then the last
// odd vector and the masked tail go in as well.
template <int NR, int NT>
SKIPKV_BF16_ATTR inline void Span(const uint16_t* const* w, const uint16_t* const* x, int64_t k0, int64_t k1,
                                  int64_t in, Acc<NR, NT>& acc) {
  constexpr int64_t kV = 32;  // bf16 elements per zmm
  int64_t i = k0;
  for (; i + 2 * kV <= k1; i += 2 * kV) {
    // The even vector into acc0, then the odd one into acc1: NR weights and
    // one activation live at a time beside the accumulators.
    SKIPKV_UNROLL
    for (int h = 0; h < 2; ++h) {
      __m512(*sum)[NT] = h == 0 ? acc.acc0 : acc.acc1;
      __m512i wv[NR];
      SKIPKV_UNROLL
      for (int r = 0; r < NR; ++r) wv[r] = _mm512_loadu_si512(w[r] + i + h * kV);
      SKIPKV_UNROLL
      for (int t = 0; t < NT; ++t) {
        __m512i xv = _mm512_loadu_si512(x[t] + i + h * kV);
        if constexpr (NR > 1) Keep(xv);
        SKIPKV_UNROLL
        for (int r = 0; r < NR; ++r) sum[r][t] = Dot(sum[r][t], wv[r], xv);
      }
    }
  }
  if (k1 != in) return;
  if (i + kV <= in) {
    __m512i w0[NR];
    SKIPKV_UNROLL
    for (int r = 0; r < NR; ++r) w0[r] = _mm512_loadu_si512(w[r] + i);
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      __m512i x0 = _mm512_loadu_si512(x[t] + i);
      if constexpr (NR > 1) Keep(x0);
      SKIPKV_UNROLL
      for (int r = 0; r < NR; ++r) acc.acc0[r][t] = Dot(acc.acc0[r][t], w0[r], x0);
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
      for (int r = 0; r < NR; ++r) acc.acc1[r][t] = Dot(acc.acc1[r][t], w0[r], x0);
    }
  }
}

template <int NR, int NT>
SKIPKV_BF16_ATTR inline void Store(const MatArgs& a, int64_t r, int64_t t0, const Acc<NR, NT>& acc) {
  float out[NR * NT];
  SKIPKV_UNROLL
  for (int i = 0; i < NR; ++i) {
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) out[i * NT + t] = HSum(_mm512_add_ps(acc.acc0[i][t], acc.acc1[i][t]));
  }
  StoreTile<NR, NT>(a, r, t0, out);
}

// Elements [k0, k1) of rows [r, r + NR) x tokens [t0, t0 + NT), with the
// accumulators in `stash` between k slices (TileCacheBlock's contract).
template <int NR, int NT>
SKIPKV_BF16_ATTR __attribute__((noinline)) void Tile(const MatArgs& a, int64_t r, int64_t t0, int64_t k0,
                                                     int64_t k1, float* stash) {
  const uint16_t* w[NR];
  const uint16_t* x[NT];
  RowPointers(a.w, a.w_row_bytes, r, w);
  RowPointers(a.act, a.act_row_bytes, t0, x);
  Acc<NR, NT> acc;
  SKIPKV_UNROLL
  for (int i = 0; i < NR; ++i) {
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      const float* s = k0 > 0 ? TileStashPair(stash, i, t) : nullptr;
      acc.acc0[i][t] = s != nullptr ? _mm512_loadu_ps(s) : _mm512_setzero_ps();
      acc.acc1[i][t] = s != nullptr ? _mm512_loadu_ps(s + kTileStashLanes) : _mm512_setzero_ps();
    }
  }
  Span<NR, NT>(w, x, k0, k1, a.in, acc);
  if (k1 == a.in) return Store<NR, NT>(a, r, t0, acc);
  SKIPKV_UNROLL
  for (int i = 0; i < NR; ++i) {
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      float* s = TileStashPair(stash, i, t);
      _mm512_storeu_ps(s, acc.acc0[i][t]);
      _mm512_storeu_ps(s + kTileStashLanes, acc.acc1[i][t]);
    }
  }
}

// Decode (one token) over rows [rb, re), TileCacheBlock's `run`: each row
// exactly as Tile<1, 1> computes it (same Span, same reduction), in one loop
// instead of a call per row (as FloatDecodeRun in matmul_body-inl.h).
SKIPKV_BF16_ATTR __attribute__((noinline)) void DecodeRun(const MatArgs& a, int64_t rb, int64_t re, int64_t t) {
  const uint16_t* x[1] = {reinterpret_cast<const uint16_t*>(a.act + static_cast<size_t>(t) * a.act_row_bytes)};
  float* y = a.y + t * a.y_stride;
  for (int64_t r = rb; r < re; ++r) {
    const uint16_t* w[1];
    RowPointers(a.w, a.w_row_bytes, r, w);
    Acc<1, 1> acc;
    acc.acc0[0][0] = _mm512_setzero_ps();
    acc.acc1[0][0] = _mm512_setzero_ps();
    Span<1, 1>(w, x, 0, a.in, a.in, acc);
    y[r] = HSum(_mm512_add_ps(acc.acc0[0][0], acc.acc1[0][0]));
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

// Cache blocks (ForEachCacheBlock; row slices of 24) and their tiles
// (TileCacheBlock, simd_internal.h): decode one row at a time (DecodeRun; 3-row tiles
// where a token's activations exceed kDecodeRowActBytes), batches in
// tiles of 3 rows x 4 tokens (24 accumulators), k slices of 3,072 elements
// (4 tokens of bf16 activations in 24 KiB) where `in` is longer.
void Bf16MatRows(const MatArgs& a, int64_t r0, int64_t r1) {
  SKIPKV_CHECK(CpuHasAvx512Bf16() && a.type == DType::kBF16);
  constexpr int64_t kSlice = (24 << 10) / (4 * sizeof(uint16_t));
  static_assert(kSlice % 64 == 0);
  const auto tile = [&](auto nr, int64_t r, int64_t t, int64_t nt, int64_t k0, int64_t k1, float* stash) {
    constexpr int NR = decltype(nr)::value;
    WithTileTokens<4>(nt, [&](auto ntc) { Tile<NR, decltype(ntc)::value>(a, r, t, k0, k1, stash); });
  };
  const auto run = [&](int64_t rb, int64_t re, int64_t t) { DecodeRun(a, rb, re, t); };
  ForEachCacheBlock(a, r0, r1, 4, [&](int64_t rb, int64_t re, int64_t tb, int64_t te) {
    TileCacheBlock<3, 4>(a, rb, re, tb, te, kSlice, tile, run);
  }, 24);
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
