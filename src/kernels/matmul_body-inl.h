// The per-target body of the matrix products (matmul.cpp's header says what
// they compute): included once per Highway target pass by matmul.cpp, into
// skipkv::kernels::internal::HWY_NAMESPACE, and once more by
// matmul_avx3_vnni.cpp in its AVX3 pass, into N_AVX3_VNNI with the VNNI
// kernels on (SKIPKV_MATMUL_AVX3_VNNI). The includer defines SKIPKV_MATMUL_NS.
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/simd_internal.h"
#include "util/check.h"

// The passes that run the VNNI kernels (SKIPKV_VNNI below): AVX3_DL, and
// AVX3 when matmul_avx3_vnni.cpp includes this body for AVX3 CPUs with
// AVX512_VNNI (Cascade Lake, Cooper Lake), which Highway 1.0.3 dispatches as
// AVX3 because they lack AVX3_DL's VBMI, VBMI2, BITALG and VPOPCNTDQ.
#ifndef SKIPKV_MATMUL_AVX3_VNNI
#define SKIPKV_MATMUL_AVX3_VNNI 0
#endif
#undef SKIPKV_VNNI_PASS
#define SKIPKV_VNNI_PASS (HWY_TARGET == HWY_AVX3_DL || (HWY_TARGET == HWY_AVX3 && SKIPKV_MATMUL_AVX3_VNNI))

// Clang, VNNI passes: Highway 1.0.3's target string plus the EVEX
// "avx512vnni" (see SKIPKV_VNNI below). set_macros-inl.h redefines the
// string for every pass, so this touches this pass only.
#if SKIPKV_VNNI_PASS && HWY_COMPILER_CLANG && !HWY_COMPILER_GCC_ACTUAL
#undef HWY_TARGET_STR
#if HWY_TARGET == HWY_AVX3_DL
#define HWY_TARGET_STR                                                                      \
  HWY_TARGET_STR_AVX3                                                                       \
  ",vpclmulqdq,avx512vbmi,avx512vbmi2,vaes,avxvnni,avx512bitalg,avx512vpopcntdq,avx512vnni"
#else
#define HWY_TARGET_STR HWY_TARGET_STR_AVX3 ",avx512vnni"
#endif
#endif
HWY_BEFORE_NAMESPACE();
namespace skipkv::kernels::internal {
namespace SKIPKV_MATMUL_NS {
namespace hn = hwy::HWY_NAMESPACE;

// Keeps a loaded SIMD vector (anything with a `.raw` register member, as
// Highway's Vec and our own wrappers have) in a register: an empty asm that
// claims to change it. Without it GCC and Clang fold a load that feeds several
// FMAs into each of them as a memory operand, so a tile of NR rows x NT tokens
// loads every activation vector NR times instead of once and is bound by the
// load ports, not the FMAs (a standalone probe of F16 2 x 4 tiles on Zen 5:
// 90 -> 141 GFLOP/s a core). A no-op where the constraint is unknown.
// Defined per target (inside HWY_BEFORE_NAMESPACE) so Clang accepts a 256-
// or 512-bit register constraint.
template <class V>
HWY_INLINE void KeepInRegister(V& v) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  using Raw = decltype(v.raw);
  if constexpr (sizeof(Raw) >= 16 && !std::is_array_v<Raw>) {  // SIMD registers, not emulated arrays
    auto raw = v.raw;  // a local: Clang 14 cannot tie a member operand
    asm("" : "+v"(raw));
    v.raw = raw;
  }
#elif defined(__GNUC__) && defined(__aarch64__)
  using Raw = decltype(v.raw);
  if constexpr (sizeof(Raw) >= 8 && !std::is_array_v<Raw>) {
    auto raw = v.raw;
    asm("" : "+w"(raw));
    v.raw = raw;
  }
#else
  (void)v;
#endif
}

#undef SKIPKV_X86_INT8
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)
#define SKIPKV_X86_INT8 1
#else
#define SKIPKV_X86_INT8 0
#endif
// AVX3_DL implies AVX512_VNNI (Highway's CPU check; the AVX3 VNNI pass is
// only called where the CPU reports it), but Highway 1.0.3's target strings
// do not name the EVEX "avx512vnni"; add it for these passes. GCC takes a
// target pragma. Clang applies Highway's pushed target attribute to every
// function and a second pushed attribute does not add to it, so for Clang the
// pass's target string itself is extended before HWY_BEFORE_NAMESPACE expands
// it. Other compilers use the AVX3 code path.
#undef SKIPKV_VNNI
#if SKIPKV_VNNI_PASS && HWY_COMPILER_GCC_ACTUAL
#define SKIPKV_VNNI 1
#pragma GCC target("avx512vnni")
#elif SKIPKV_VNNI_PASS && HWY_COMPILER_CLANG
#define SKIPKV_VNNI 1  // the target string was extended above HWY_BEFORE_NAMESPACE
#else
#define SKIPKV_VNNI 0
#endif

constexpr int kMaxTok = 4;  // tokens per register tile

// ---- Activation quantisation ---------------------------------------------------

// x[0..32) -> ActQ8: d = max|x| / 127, q = round-half-even(x / d).
void QuantizeQ8(const float* x, int64_t in, ActQ8* out) {
  const hn::CappedTag<float, 8> df;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t N = hn::Lanes(df);
  for (int64_t b = 0; b < in / 32; ++b) {
    const float* xb = x + b * 32;
    auto vmax = hn::Zero(df);
    for (size_t i = 0; i < 32; i += N) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, xb + i)));
    const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    const float d = amax / 127.f;
    const auto vid = hn::Set(df, d != 0.f ? 1.f / d : 0.f);
    out[b].d = d;
    for (size_t i = 0; i < 32; i += N) {
      const auto q = hn::NearestInt(hn::Mul(hn::LoadU(df, xb + i), vid));
      hn::StoreU(hn::DemoteTo(d8, q), d8, out[b].qs + i);
    }
  }
}

// x[0..256) -> Q8_K exactly as ggml's quantize_row_q8_K: the element of
// largest magnitude maps to -127, bsums = sums of 16 quants.
void QuantizeQ8K(const float* x, int64_t in, BlockQ8_K* out) {
  const hn::CappedTag<float, 8> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t N = hn::Lanes(df);
  for (int64_t b = 0; b < in / kQK_K; ++b) {
    const float* xb = x + b * kQK_K;
    auto vmax = hn::Set(df, -1e30f), vmin = hn::Set(df, 1e30f);
    for (size_t i = 0; i < kQK_K; i += N) {
      const auto v = hn::LoadU(df, xb + i);
      vmax = hn::Max(vmax, v);
      vmin = hn::Min(vmin, v);
    }
    const float mx = hn::GetLane(hn::MaxOfLanes(df, vmax));
    const float mn = hn::GetLane(hn::MinOfLanes(df, vmin));
    const float max = mx >= -mn ? mx : mn;  // signed value of largest magnitude
    if (max == 0.f) {
      std::memset(&out[b], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.f / max;
    const auto vis = hn::Set(df, iscale);
    for (int g = 0; g < kQK_K / 16; ++g) {
      auto sum = hn::Zero(di);
      for (size_t i = 0; i < 16; i += N) {
        const size_t k = g * 16 + i;
        const auto q = hn::Min(hn::NearestInt(hn::Mul(hn::LoadU(df, xb + k), vis)), hn::Set(di, 127));
        sum = hn::Add(sum, q);
        hn::StoreU(hn::DemoteTo(d8, q), d8, out[b].qs + k);
      }
      out[b].bsums[g] = static_cast<int16_t>(hn::GetLane(hn::SumOfLanes(di, sum)));
    }
    out[b].d = 1.f / iscale;
  }
}

// x -> kQ8Wide: QuantizeQ8's blocks (same scales and quants), widened.
void QuantizeQ8Wide(const float* x, int64_t in, uint8_t* out) {
  const int64_t nb = in / 32;
  float* scales = reinterpret_cast<float*>(out);
  int16_t* q = reinterpret_cast<int16_t*>(out + ActQ8WideScaleBytes(nb));
  ActQ8 block;
  for (int64_t b = 0; b < nb; ++b) {
    QuantizeQ8(x + b * 32, 32, &block);
    scales[b] = block.d;
    for (int i = 0; i < 16; ++i) {
      q[b * 32 + i] = block.qs[2 * i];
      q[b * 32 + 16 + i] = block.qs[2 * i + 1];
    }
  }
}

void QuantizeActivationsT(ActFormat f, const float* x, int64_t in, uint8_t* out) {
  if (f == ActFormat::kQ8) {
    QuantizeQ8(x, in, reinterpret_cast<ActQ8*>(out));
  } else if (f == ActFormat::kQ8Wide) {
    QuantizeQ8Wide(x, in, out);
  } else if (f == ActFormat::kQ8K) {
    QuantizeQ8K(x, in, reinterpret_cast<BlockQ8_K*>(out));
  } else if (f == ActFormat::kBF16) {
    ConvertActivationsToBf16(x, in, reinterpret_cast<uint16_t*>(out));
  } else {
    std::memcpy(out, x, static_cast<size_t>(in) * sizeof(float));
  }
}

// ---- Float weights --------------------------------------------------------------

// Loads N weights as f32; One() converts a single element (for the tail).
struct Bf16Tag {  // element type of bf16 rows (2 bytes, distinct from f16_t)
  uint16_t bits;
};
template <class WT>
struct FloatLoader;
template <>
struct FloatLoader<float> {
  template <class DF>
  static HWY_INLINE hn::Vec<DF> Load(DF df, const float* p) { return hn::LoadU(df, p); }
  static float One(float v) { return v; }
};
template <>
struct FloatLoader<f16_t> {
  template <class DF>
  static HWY_INLINE hn::Vec<DF> Load(DF df, const f16_t* p) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
  }
  static float One(f16_t v) { return F16ToF32(v); }
};
template <>
struct FloatLoader<Bf16Tag> {
  template <class DF>
  static HWY_INLINE hn::Vec<DF> Load(DF df, const Bf16Tag* p) {
    const hn::Rebind<hwy::bfloat16_t, DF> db;
    return hn::PromoteTo(df, hn::LoadU(db, reinterpret_cast<const hwy::bfloat16_t*>(p)));
  }
  static float One(const Bf16Tag& v) { return BF16ToF32(v.bits); }
};

// Float tiles: out[r * NT + t] = dot(w[r][0..in), x[t][0..in)) for r < NR,
// t < NT. Each weight vector is loaded once for NT tokens and each activation
// vector once for NR rows. One accumulator per (row, token) pair, adding the
// vectors in k order and then the in % N tail, zero-padded; every pair
// follows that FMA sequence in every tile shape and k slicing, so results do
// not depend on the tiling, the thread count or batch vs decode (they do
// depend on the target, as the vector width already makes them).
// One accumulator a pair, not two (even and odd vectors, until 2026-12-04),
// leaves registers for twice the pairs: 6 rows x 4 tokens on AVX-512 (24
// of 32 registers), 3 x 4 on AVX2 (12 of 16), against 3 x 4 and 3 x 2, so a
// step loads 10 vectors for 24 FMAs (7 for 12 on AVX2) instead of 7 for 12
// (5 for 6). A decode row is then a single FMA chain, bound by the FMA's
// latency (about 15 GB/s of f16 a core for an 8-lane chain); FloatDecodeRun
// runs several rows' chains at once instead (BENCHMARKS.md, "one
// accumulator").
template <int NR, int NT>
struct FloatAcc {
  hn::Vec<hn::ScalableTag<float>> acc[NR][NT];
};

// sum[r][t] += w[r][k..k+N) * x[t][k..k+N) for every pair: NR weights and one
// activation live at a time beside the accumulators. Loads that feed several
// FMAs stay in registers (KeepInRegister); a converting load (f16, bf16)
// cannot be folded anyway, and the asm on it made GCC store every converted
// vector to the stack.
template <int NR, int NT, class WT, class DF, class V>
HWY_INLINE void FloatStep(DF df, const WT* const* w, const float* const* x, int64_t k, V (*sum)[NT]) {
  using L = FloatLoader<WT>;
  constexpr bool kKeepW = NT > 1 && std::is_same_v<WT, float>;
  V wv[NR];
  SKIPKV_UNROLL
  for (int r = 0; r < NR; ++r) {
    wv[r] = L::Load(df, w[r] + k);
    if constexpr (kKeepW) KeepInRegister(wv[r]);
  }
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) {
    auto xv = hn::LoadU(df, x[t] + k);
    if constexpr (NR > 1) KeepInRegister(xv);
    SKIPKV_UNROLL
    for (int r = 0; r < NR; ++r) sum[r][t] = hn::MulAdd(wv[r], xv, sum[r][t]);
  }
}

// Adds elements [k0, k1) of every pair into `acc`. k0 is a multiple of N; k1
// is too, or k1 == in, and then the tail goes in as well.
// kAheadBytes > 0: at the start of every 64-byte line of each weight row,
// prefetch the line kAheadBytes further on (FloatDecodeParts).
template <int NR, int NT, class WT, int64_t kAheadBytes = 0>
HWY_INLINE void FloatTileSpan(const WT* const* w, const float* const* x, int64_t k0, int64_t k1, int64_t in,
                              FloatAcc<NR, NT>& acc) {
  using L = FloatLoader<WT>;
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = k0;
  if constexpr (kAheadBytes > 0) {
    constexpr int64_t kAhead = kAheadBytes / static_cast<int64_t>(sizeof(WT)), kLine = 64 / sizeof(WT);
    for (; i + N <= k1; i += N) {
      if (i % kLine == 0) {
        SKIPKV_UNROLL
        for (int r = 0; r < NR; ++r) hwy::Prefetch(w[r] + i + kAhead);
      }
      FloatStep<NR, NT, WT>(df, w, x, i, acc.acc);
    }
  }
  for (; i + N <= k1; i += N) FloatStep<NR, NT, WT>(df, w, x, i, acc.acc);
  if (k1 != in || i == in) return;
  alignas(64) float wt[NR][64] = {};  // 64 >= lanes of any target
  alignas(64) float xt[64] = {};
  for (int r = 0; r < NR; ++r) {
    for (int64_t k = i; k < in; ++k) wt[r][k - i] = L::One(w[r][k]);
  }
  for (int t = 0; t < NT; ++t) {
    for (int64_t k = i; k < in; ++k) xt[k - i] = x[t][k];
    const auto xv = hn::Load(df, xt);
    for (int r = 0; r < NR; ++r) acc.acc[r][t] = hn::MulAdd(hn::Load(df, wt[r]), xv, acc.acc[r][t]);
  }
}

// The pair's result: the sum of its accumulator's lanes.
template <int NR, int NT>
HWY_INLINE float FloatPairSum(const FloatAcc<NR, NT>& acc, int i, int t) {
  const hn::ScalableTag<float> df;
  return hn::GetLane(hn::SumOfLanes(df, acc.acc[i][t]));
}

template <int NR, int NT>
HWY_INLINE void FloatTileStore(const MatArgs& a, int64_t r, int64_t t0, const FloatAcc<NR, NT>& acc) {
  float out[NR * NT];
  SKIPKV_UNROLL
  for (int i = 0; i < NR; ++i) {
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) out[i * NT + t] = FloatPairSum(acc, i, t);
  }
  StoreTile<NR, NT>(a, r, t0, out);
}

// Rows [r, r + NR) x tokens [t0, t0 + NT), all `in` elements: FloatRows
// never slices k (TileCacheBlock then passes k0 = 0, k1 = in and no stash).
template <int NR, int NT, class WT>
HWY_NOINLINE void FloatTile(const MatArgs& a, int64_t r, int64_t t0, int64_t k0, int64_t k1) {
  SKIPKV_DCHECK(k0 == 0 && k1 == a.in);
  const WT* w[NR];
  const float* x[NT];
  RowPointers(a.w, a.w_row_bytes, r, w);
  RowPointers(a.act, a.act_row_bytes, t0, x);
  const hn::ScalableTag<float> df;
  FloatAcc<NR, NT> acc;
  SKIPKV_UNROLL
  for (int i = 0; i < NR; ++i) {
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) acc.acc[i][t] = hn::Zero(df);
  }
  FloatTileSpan<NR, NT, WT>(w, x, k0, k1, a.in, acc);
  FloatTileStore<NR, NT>(a, r, t0, acc);
}

constexpr bool kFloatAvx512 = HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL;

// Rows [r0, r1) of a float-weight matmul: cache blocks (ForEachCacheBlock;
// token blocks a multiple of 4, row slices a multiple of 8 tiles) and their
// tiles (TileCacheBlock): 6 rows x 4 tokens on AVX-512, 3 x 4 on other
// targets (see FloatAcc), each over all `in` elements. No k slices: at the
// FFN down projection's 8,960 inputs a tile reads its 4 tokens' activations
// (140 KiB of f32) from L2, about 11 bytes a vector FMA, which L2 delivers.
// Slices of 1,536 elements (until 2026-12-07) kept them in L1 but cost 2-16 %
// on Zen 5 (F32, F16, AVX2 BF16; n = 128 and 512; 1 and 2 threads), below
// llama.cpp's down projection (BENCHMARKS.md, "FMA roof"). The bf16 dot
// product tiles, at twice the rate, still slice (matmul_bf16_x86.cpp).
// Each tile is its own function: inlined into this loop nest, GCC kept half
// the accumulators of a 2 x 4 tile on the stack.
// F16 8960x1536 n=128 on Zen 5: 195 -> 339 GFLOP/s; the FFN down projection
// (1536x8960): 189 -> 320 (BENCHMARKS.md).
// Decode (one token) over rows [rb, re), TileCacheBlock's `run`: each row
// exactly as FloatTile<1, 1> computes it (same FloatTileSpan, same
// reduction). S FMA chains overlap, one per part of the range cut in S equal
// parts (2 with 16 lanes, 4 with 8): step i computes row i of every part, so
// each part is read as one sequential stream. (S adjacent rows at a time make
// S streams that each skip rows, which the hardware prefetcher follows badly;
// see TileCacheBlock.) Rows left over after S equal parts go one at a time.
// Where a token's activations exceed kDecodeRowActBytes (the FFN down
// projection's 8,960 f32 inputs), the weight streams evict them from L1 and
// every step reads them from L2 again: S = 6 parts then share each
// activation load between 6 rows (AVX2 1536 x 8960 F16 decode: see
// BENCHMARKS.md, "one accumulator"). With 2 or 4 parts each part's stream
// is prefetched 2,048 bytes ahead in software: on Zen 5 (AVX2, cold
// 8960 x 1536 F16 and BF16, five rounds) a median 35.0 GB/s on one thread
// and 66.9 on two with it, against 33.3 and 55.3 without; 512 and 4,096
// bytes were slower, 1,024 to 3,072 alike; AVX2 F16 / BF16 decoded
// 1.06-1.14x faster end to end. On the long rows of 6 parts it was no
// better (BENCHMARKS.md, "sixteenth session").
template <int S, class WT>
HWY_INLINE void FloatDecodeParts(const MatArgs& a, int64_t rb, int64_t re, int64_t t) {
  const hn::ScalableTag<float> df;
  const float* x[1] = {reinterpret_cast<const float*>(a.act + static_cast<size_t>(t) * a.act_row_bytes)};
  float* y = a.y + t * a.y_stride;
  const auto row = [&](int64_t r) {
    return reinterpret_cast<const WT*>(a.w + static_cast<size_t>(r) * a.w_row_bytes);
  };
  const int64_t part = (re - rb) / S;
  for (int64_t i = 0; i < part; ++i) {
    const WT* w[S];
    FloatAcc<S, 1> acc;
    SKIPKV_UNROLL
    for (int s = 0; s < S; ++s) {
      w[s] = row(rb + s * part + i);
      acc.acc[s][0] = hn::Zero(df);
    }
    // Short rows (2 or 4 parts) prefetch 2 KiB ahead on each part's stream.
    FloatTileSpan<S, 1, WT, S == 6 ? 0 : 2048>(w, x, 0, a.in, a.in, acc);
    SKIPKV_UNROLL
    for (int s = 0; s < S; ++s) y[rb + s * part + i] = FloatPairSum(acc, s, 0);
  }
  for (int64_t r = rb + S * part; r < re; ++r) {
    const WT* w[1] = {row(r)};
    FloatAcc<1, 1> acc;
    acc.acc[0][0] = hn::Zero(df);
    FloatTileSpan<1, 1, WT>(w, x, 0, a.in, a.in, acc);
    y[r] = FloatPairSum(acc, 0, 0);
  }
}

template <class WT>
HWY_NOINLINE void FloatDecodeRun(const MatArgs& a, int64_t rb, int64_t re, int64_t t) {
  if (a.act_row_bytes > kDecodeRowActBytes) return FloatDecodeParts<6, WT>(a, rb, re, t);
  FloatDecodeParts<kFloatAvx512 ? 2 : 4, WT>(a, rb, re, t);
}

template <class WT>
void FloatRows(const MatArgs& a, int64_t r0, int64_t r1) {
  constexpr int kRows = kFloatAvx512 ? 6 : 3, kTokens = 4;
  const auto tile = [&](auto nr, int64_t r, int64_t t, int64_t nt, int64_t k0, int64_t k1, float*) {
    constexpr int NR = decltype(nr)::value;
    WithTileTokens<kTokens>(nt, [&](auto ntc) { FloatTile<NR, decltype(ntc)::value, WT>(a, r, t, k0, k1); });
  };
  const auto run = [&](int64_t rb, int64_t re, int64_t t) { FloatDecodeRun<WT>(a, rb, re, t); };
  ForEachCacheBlock(
      a, r0, r1, 4,
      [&](int64_t rb, int64_t re, int64_t tb, int64_t te) {
        TileCacheBlock<kRows, kTokens, /*kRunWideDecode=*/true>(a, rb, re, tb, te, /*kslice=*/a.in, tile,
                                                                run);
      },
      8 * kRows);
}

// ---- int8 helpers ---------------------------------------------------------------

#if SKIPKV_X86_INT8
HWY_INLINE float HSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
HWY_INLINE float HSum128(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
HWY_INLINE float F16Scalar(f16_t h) { return _cvtsh_ss(h); }
// sum over pairs of u8 x s8 -> 8 x i32 (a in [0, 255], b in [-127, 127];
// pair sums stay below 2^15 for our ranges: q <= 63 or the sign trick).
HWY_INLINE __m256i MulSumU8I8(__m256i a, __m256i b) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1));
}
// sum over pairs of s8 x s8 -> 8 x i32 (both in [-127, 127]): |a| * sign(b, a).
HWY_INLINE __m256i MulSumI8I8(__m256i a, __m256i b) {
  return MulSumU8I8(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}
// Q4_K's 12 scale bytes -> i16 lanes 0..7: the 8 sub-block scales, 8..15: the
// 8 mins (the unpacking of get_scale_min_k4), in ten vector operations:
//   sc[0..3] = s[0..3] & 63          sc[4..7] = (s[8..11] & 15) | (s[0..3] >> 6) << 4
//   m[0..3]  = s[4..7] & 63          m[4..7]  = (s[8..11] >> 4) | (s[4..7] >> 6) << 4
// `scales` must have 16 readable bytes (in a block, the first 4 quant bytes
// follow the 12 scale bytes); the extra bytes are never used.
HWY_INLINE __m256i Q4KScalesMins16(const uint8_t* scales) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales));
  // a: the byte holding each result's low bits; hb: the byte whose top 2 bits
  // are the result's bits 4-5 (none for the first four of each half).
  const __m128i a = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i hb = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
  const __m128i low = _mm_and_si128(a, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0));
  const __m128i high_nibble = _mm_and_si128(_mm_srli_epi16(a, 4),
                                            _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15));
  const __m128i top2 = _mm_and_si128(_mm_srli_epi16(hb, 2), _mm_set1_epi8(0x30));
  return _mm256_cvtepu8_epi16(_mm_or_si128(_mm_or_si128(low, high_nibble), top2));
}
// The 8 mins of Q4KScalesMins16's result (i16 lanes 8..15), each repeated
// for the two bsums (groups of 16) of its 32-element sub-block: i16 lane k =
// m_{k/2}. madd with a Q8_K block's 16 bsums then gives 8 x i32 lanes
// m_j * (bsum_2j + bsum_2j+1) with no horizontal add (vphaddw is slow: about
// 2 cycles a call on Zen 4).
HWY_INLINE __m256i Q4KMinsPerBsum(__m256i sm16) {
  const __m256i mins = _mm256_permute4x64_epi64(sm16, 0xEE);  // the mins in both 128-bit lanes
  return _mm256_shuffle_epi8(mins, _mm256_setr_epi8(0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 8, 9, 8, 9, 10,
                                                    11, 10, 11, 12, 13, 12, 13, 14, 15, 14, 15));
}
#else
HWY_INLINE float F16Scalar(f16_t h) { return F16ToF32(h); }
// Portable: sum_k a[k] * b[k] for k < n (n a multiple of 8) as i32 lanes.
using DI32 = hn::CappedTag<int32_t, 8>;
HWY_INLINE hn::Vec<DI32> DotI8(const int8_t* a, const int8_t* b, int n) {
  const DI32 di;
  const hn::Rebind<int8_t, DI32> d8;
  auto sum = hn::Zero(di);
  for (int k = 0; k < n; k += static_cast<int>(hn::Lanes(di))) {
    sum = hn::Add(sum, hn::Mul(hn::PromoteTo(di, hn::LoadU(d8, a + k)),
                               hn::PromoteTo(di, hn::LoadU(d8, b + k))));
  }
  return sum;
}
HWY_INLINE float HSumPortable(hn::Vec<hn::CappedTag<float, 8>> v) {
  return hn::GetLane(hn::SumOfLanes(hn::CappedTag<float, 8>(), v));
}
#endif

// Unpacks Q4_K's 12 scale bytes into sc[0..8) and m[0..8) (get_scale_min_k4).
HWY_INLINE void UnpackQ4KScales(const uint8_t* s, uint8_t* sc, uint8_t* m) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    m[j] = s[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    m[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// ---- Q8_0 and Q4_0 x ActQ8 -----------------------------------------------------

// A block's 32 quants as signed bytes, element order: Q8_0's as stored, Q4_0's
// nibbles - 8 (low nibbles are elements 0..15, high nibbles 16..31). The
// portable versions return a pointer, to the block or to `tmp`.
#if SKIPKV_X86_INT8
HWY_INLINE __m256i BlockQuants(const BlockQ8_0& w) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs));
}
HWY_INLINE __m256i BlockQuants(const BlockQ4_0& w) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs));
  const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0f));
  return _mm256_sub_epi8(q, _mm256_set1_epi8(8));  // [-8, 7]
}
#else
HWY_INLINE const int8_t* BlockQuants(const BlockQ8_0& w, int8_t*) { return w.qs; }
HWY_INLINE const int8_t* BlockQuants(const BlockQ4_0& w, int8_t* tmp) {
  for (int j = 0; j < 16; ++j) {
    tmp[j] = static_cast<int8_t>((w.qs[j] & 0x0f) - 8);
    tmp[j + 16] = static_cast<int8_t>((w.qs[j] >> 4) - 8);
  }
  return tmp;
}
#endif

// Q8_0 or Q4_0 rows (Block) against NT tokens' ActQ8 rows: per block the
// int32 dot of the quants, scaled by d_w * d_a into 8 f32 lanes, summed last.
template <int NT, class Block>
HWY_INLINE void Int8BlockRowDot(const Block* w, const ActQ8* const* a, int64_t nb, float* out) {
#if SKIPKV_X86_INT8
  __m256 acc[NT];
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i qw = BlockQuants(w[b]);
    const float dw = F16Scalar(w[b].d);
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].qs));
      const __m256 p = _mm256_cvtepi32_ps(MulSumI8I8(qw, qa));
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * a[t][b].d), p, acc[t]);
    }
  }
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = HSum(acc[t]);
#else
  const hn::CappedTag<float, 8> df;
  hn::Vec<decltype(df)> acc[NT];
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = hn::Zero(df);
  int8_t tmp[32];
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* qw = BlockQuants(w[b], tmp);
    const float dw = F16Scalar(w[b].d);
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      const auto p = hn::ConvertTo(df, DotI8(qw, a[t][b].qs, 32));
      acc[t] = hn::MulAdd(hn::Set(df, dw * a[t][b].d), p, acc[t]);
    }
  }
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = HSumPortable(acc[t]);
#endif
}

#if SKIPKV_X86_INT8 && !SKIPKV_VNNI
// Q8_0 rows against kQ8Wide activations (batches on AVX2/AVX3). Per weight
// block, its even- and odd-indexed quants as int16 (shifts of the 16-bit
// lanes), reused by the NT tokens; per (block, token) two vpmaddwd and an add
// give int32 lane j = sum of w[i] * a[i] over i in [4j, 4j + 4): the lanes of
// Int8BlockRowDot's vpmaddubsw + vpmaddwd, followed by the same conversion, scale
// and FMA, so the result is bit-identical to Int8BlockRowDot's.
template <int NT>
HWY_INLINE void Q8_0RowDotWide(const BlockQ8_0* w, const uint8_t* const* a, int64_t nb, float* out) {
  const float* scale[NT];
  const int16_t* q[NT];
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) {
    scale[t] = reinterpret_cast<const float*>(a[t]);
    q[t] = reinterpret_cast<const int16_t*>(a[t] + ActQ8WideScaleBytes(nb));
  }
  __m256 acc[NT];
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i qw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs));
    const __m256i even = _mm256_srai_epi16(_mm256_slli_epi16(qw, 8), 8);
    const __m256i odd = _mm256_srai_epi16(qw, 8);
    const float dw = F16Scalar(w[b].d);
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      const auto* qa = reinterpret_cast<const __m256i*>(q[t] + b * 32);
      const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(even, _mm256_loadu_si256(qa)),
                                         _mm256_madd_epi16(odd, _mm256_loadu_si256(qa + 1)));
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * scale[t][b]), _mm256_cvtepi32_ps(s), acc[t]);
    }
  }
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = HSum(acc[t]);
}
#endif

// ---- Q4_K x Q8_K ----------------------------------------------------------------
// dot = sum_b [ d*da * sum_j sc_j * (q_j . y_j)  -  dmin*da * sum_j m_j * bsum32_j ]

template <int NT>
HWY_INLINE void Q4_KRowDot(const BlockQ4_K* w, const BlockQ8_K* const* a, int64_t nb, float* out) {
#if SKIPKV_X86_INT8
  __m256 acc[NT], accm[NT];
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) {
    acc[t] = _mm256_setzero_ps();
    accm[t] = _mm256_setzero_ps();
  }
  const __m256i lo4 = _mm256_set1_epi8(0x0f);
  // shuffle_epi8 controls that broadcast 16-bit lane k of a 128-bit half.
  __m256i pick[8];
  for (int k = 0; k < 8; ++k) pick[k] = _mm256_set1_epi16(static_cast<int16_t>(((2 * k + 1) << 8) | (2 * k)));
  for (int64_t b = 0; b < nb; ++b) {
    const float d = F16Scalar(w[b].d), dmin = F16Scalar(w[b].dmin);
    const __m256i sm16 = Q4KScalesMins16(w[b].scales);
    const __m256i mins = Q4KMinsPerBsum(sm16);
    const __m256i scales16 = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm16));
    // Integer sums per token: sumi[t], and for one token (decode) a second
    // chain sumi2 taking the high nibbles (exact, so the order does not matter).
    __m256i sumi[NT], sumi2 = _mm256_setzero_si256();
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      // Mins: the 16 bsums times their sub-block's min -> 8 x i32 (exact).
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].bsums));
      const __m256 pm = _mm256_cvtepi32_ps(_mm256_madd_epi16(mins, bs));
      accm[t] = _mm256_fmadd_ps(_mm256_set1_ps(dmin * a[t][b].d), pm, accm[t]);
      sumi[t] = _mm256_setzero_si256();
    }
    for (int j = 0; j < 4; ++j) {  // 64 elements: sub-blocks 2j (low nibbles), 2j+1 (high)
      const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * j));
      const __m256i ql = _mm256_and_si256(q4, lo4);
      const __m256i qh = _mm256_and_si256(_mm256_srli_epi16(q4, 4), lo4);
      const __m256i s0 = _mm256_shuffle_epi8(scales16, pick[2 * j]);
      const __m256i s1 = _mm256_shuffle_epi8(scales16, pick[2 * j + 1]);
      SKIPKV_UNROLL
      for (int t = 0; t < NT; ++t) {
        const int8_t* y = a[t][b].qs + 64 * j;
        const __m256i p0 = _mm256_maddubs_epi16(ql, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y)));
        const __m256i p1 =
            _mm256_maddubs_epi16(qh, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 32)));
        if constexpr (NT == 1) {
          sumi[0] = _mm256_add_epi32(sumi[0], _mm256_madd_epi16(p0, s0));
          sumi2 = _mm256_add_epi32(sumi2, _mm256_madd_epi16(p1, s1));
        } else {
          sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(_mm256_madd_epi16(p0, s0),
                                                               _mm256_madd_epi16(p1, s1)));
        }
      }
    }
    if constexpr (NT == 1) sumi[0] = _mm256_add_epi32(sumi[0], sumi2);
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * a[t][b].d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
    }
  }
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = HSum(acc[t]) - HSum(accm[t]);
#else
  const hn::CappedTag<float, 8> df;
  const DI32 di;
  hn::Vec<decltype(df)> acc[NT];
  float accm[NT];
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) {
    acc[t] = hn::Zero(df);
    accm[t] = 0.f;
  }
  int8_t q[kQK_K];
  uint8_t sc[8], m[8];
  for (int64_t b = 0; b < nb; ++b) {
    const float d = F16Scalar(w[b].d), dmin = F16Scalar(w[b].dmin);
    UnpackQ4KScales(w[b].scales, sc, m);
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        q[64 * j + l] = static_cast<int8_t>(w[b].qs[32 * j + l] & 0x0f);
        q[64 * j + 32 + l] = static_cast<int8_t>(w[b].qs[32 * j + l] >> 4);
      }
    }
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      auto sumi = hn::Zero(di);
      int msum = 0;
      SKIPKV_UNROLL
      for (int j = 0; j < 8; ++j) {
        sumi = hn::Add(sumi, hn::Mul(hn::Set(di, sc[j]), DotI8(q + 32 * j, a[t][b].qs + 32 * j, 32)));
        msum += m[j] * (a[t][b].bsums[2 * j] + a[t][b].bsums[2 * j + 1]);
      }
      acc[t] = hn::MulAdd(hn::Set(df, d * a[t][b].d), hn::ConvertTo(df, sumi), acc[t]);
      accm[t] += dmin * a[t][b].d * static_cast<float>(msum);
    }
  }
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = HSumPortable(acc[t]) - accm[t];
#endif
}

#if SKIPKV_X86_INT8
// ---- Q4_K x Q8_K, one token (decode) on AVX2: a run of rows ----------------------
// Q4_KRowDot<1> inlined in the loop over rows (no call per row; its constants
// leave the loop), so a decode result equals the token's result in a batch
// bit for bit.
HWY_INLINE void Q4_KRowsDot1(const uint8_t* w0, size_t w_row_bytes, int64_t rows, const BlockQ8_K* y, int64_t nb,
                             float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    Q4_KRowDot<1>(reinterpret_cast<const BlockQ4_K*>(w0 + static_cast<size_t>(r) * w_row_bytes), &y, nb, &out[r]);
  }
}
#endif

// ---- Q6_K x Q8_K ----------------------------------------------------------------
// dot = sum_b d*da * [ sum_g sc_g * (q_g . y_g)  -  32 * sum_g sc_g * bsum_g ],
// q in [0, 63] unsigned, groups g of 16.

template <int NT>
HWY_INLINE void Q6_KRowDot(const BlockQ6_K* w, const BlockQ8_K* const* a, int64_t nb, float* out) {
#if SKIPKV_X86_INT8
  __m256 acc[NT];
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i lo4 = _mm256_set1_epi8(0x0f), lo2 = _mm256_set1_epi8(0x03);
  // shuffle_epi8 controls: low lane broadcasts i16 lane 2g, high lane 2g + 1.
  __m256i pick_pair[4];
  for (int g = 0; g < 4; ++g) {
    pick_pair[g] = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(((4 * g + 3) << 8) | (4 * g + 2))),
                                    _mm_set1_epi16(static_cast<int16_t>(((4 * g + 1) << 8) | (4 * g))));
  }
  for (int64_t b = 0; b < nb; ++b) {
    const float d = F16Scalar(w[b].d);
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales)));
    // Integer sums per token: sumi[t], and for one token (decode) a second
    // chain sumi2 taking the odd groups (exact, so the order does not matter).
    __m256i sumi[NT], sumi2 = _mm256_setzero_si256();
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].bsums));
      sumi[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5));
    }
    SKIPKV_UNROLL
    for (int h = 0; h < 2; ++h) {  // 128 elements: 64 bytes of ql, 32 of qh, 8 scales
      const uint8_t* ql = w[b].ql + 64 * h;
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh + 32 * h));
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(l0, lo4), _mm256_slli_epi16(_mm256_and_si256(hb, lo2), 4));
      q[1] = _mm256_or_si256(_mm256_and_si256(l1, lo4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), lo2), 4));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), lo4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), lo2), 4));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), lo4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), lo2), 4));
      // This half's 8 scales (i16) in both 128-bit lanes.
      const __m256i sc_half = _mm256_broadcastsi128_si256(h == 0 ? _mm256_castsi256_si128(sc16)
                                                                 : _mm256_extracti128_si256(sc16, 1));
      SKIPKV_UNROLL
      for (int g = 0; g < 4; ++g) {
        // Elements 0..15 of the group use scale 2g (low lane), 16..31 use 2g + 1.
        const __m256i s = _mm256_shuffle_epi8(sc_half, pick_pair[g]);
        SKIPKV_UNROLL
        for (int t = 0; t < NT; ++t) {
          const __m256i y =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].qs + 128 * h + 32 * g));
          __m256i& chain = NT == 1 && (g & 1) ? sumi2 : sumi[t];
          chain = _mm256_add_epi32(chain, _mm256_madd_epi16(_mm256_maddubs_epi16(q[g], y), s));
        }
      }
    }
    if constexpr (NT == 1) sumi[0] = _mm256_add_epi32(sumi[0], sumi2);
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * a[t][b].d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
    }
  }
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = HSum(acc[t]);
#else
  const hn::CappedTag<float, 8> df;
  const DI32 di;
  hn::Vec<decltype(df)> acc[NT];
  float accm[NT];
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) {
    acc[t] = hn::Zero(df);
    accm[t] = 0.f;
  }
  int8_t q[kQK_K];
  for (int64_t b = 0; b < nb; ++b) {
    const float d = F16Scalar(w[b].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w[b].ql + 64 * h;
      const uint8_t* qh = w[b].qh + 32 * h;
      int8_t* qq = q + 128 * h;
      for (int l = 0; l < 32; ++l) {
        qq[l] = static_cast<int8_t>((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4));
        qq[l + 32] = static_cast<int8_t>((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4));
        qq[l + 64] = static_cast<int8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
        qq[l + 96] = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
      }
    }
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      auto sumi = hn::Zero(di);
      int offset = 0;
      for (int g = 0; g < 16; ++g) {
        sumi = hn::Add(sumi, hn::Mul(hn::Set(di, w[b].scales[g]), DotI8(q + 16 * g, a[t][b].qs + 16 * g, 16)));
        offset += w[b].scales[g] * a[t][b].bsums[g];
      }
      acc[t] = hn::MulAdd(hn::Set(df, d * a[t][b].d), hn::ConvertTo(df, sumi), acc[t]);
      accm[t] += 32.f * d * a[t][b].d * static_cast<float>(offset);
    }
  }
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = HSumPortable(acc[t]) - accm[t];
#endif
}

#if SKIPKV_X86_INT8
// Every line of block b + ahead (ahead > 0; blocks need not be 64-byte
// aligned, hence the last byte's line too). A prefetch never faults: past the
// end of the matrix it costs only the instruction. The one-token kernels'
// distances: DecodePrefetchBlocks (simd_internal.h).
template <class Block>
HWY_INLINE void PrefetchBlockAhead(const Block* w, int64_t b, int64_t ahead) {
  if (ahead <= 0) return;
  const uintptr_t p = reinterpret_cast<uintptr_t>(w) + static_cast<uintptr_t>(b + ahead) * sizeof(Block);
  for (uintptr_t l = 0; l < sizeof(Block); l += 64)
    _mm_prefetch(reinterpret_cast<const char*>(p + l), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(p + sizeof(Block) - 1), _MM_HINT_T0);
}
#endif

#include "kernels/matmul_float_x16-inl.h"
#include "kernels/matmul_vnni-inl.h"
#include "kernels/matmul_x16-inl.h"

// ---- Row-range driver -----------------------------------------------------------

// One quantised weight row against tokens [t0, t0 + NT).
template <int NT>
void RowTile(const MatArgs& a, int64_t r, int64_t t0) {
  const uint8_t* wrow = a.w + static_cast<size_t>(r) * a.w_row_bytes;
  const uint8_t* act[NT];
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) act[t] = a.act + static_cast<size_t>(t0 + t) * a.act_row_bytes;
  float out[NT];
  switch (a.type) {
    case DType::kQ8_0:
#if SKIPKV_X86_INT8 && !SKIPKV_VNNI
      if (a.act_format == ActFormat::kQ8Wide) {
        Q8_0RowDotWide<NT>(reinterpret_cast<const BlockQ8_0*>(wrow), act, a.in / 32, out);
        break;
      }
#endif
      SKIPKV_CHECK_MSG(a.act_format == ActFormat::kQ8, "MatRows: Q8_0 activations in an unexpected format");
      Int8BlockRowDot<NT>(reinterpret_cast<const BlockQ8_0*>(wrow),
                          reinterpret_cast<const ActQ8* const*>(act), a.in / 32, out);
      break;
    case DType::kQ4_0:
      Int8BlockRowDot<NT>(reinterpret_cast<const BlockQ4_0*>(wrow),
                          reinterpret_cast<const ActQ8* const*>(act), a.in / 32, out);
      break;
#if SKIPKV_VNNI
    case DType::kQ4_K:
      Q4_KRowDotVnni<NT>(reinterpret_cast<const BlockQ4_K*>(wrow), reinterpret_cast<const BlockQ8_K* const*>(act),
                         a.in / kQK_K, out);
      break;
    case DType::kQ6_K:
      Q6_KRowDotVnni<NT>(reinterpret_cast<const BlockQ6_K*>(wrow), reinterpret_cast<const BlockQ8_K* const*>(act),
                         a.in / kQK_K, out);
      break;
#else
    case DType::kQ4_K:
      Q4_KRowDot<NT>(reinterpret_cast<const BlockQ4_K*>(wrow), reinterpret_cast<const BlockQ8_K* const*>(act),
                     a.in / kQK_K, out);
      break;
    case DType::kQ6_K:
      Q6_KRowDot<NT>(reinterpret_cast<const BlockQ6_K*>(wrow), reinterpret_cast<const BlockQ8_K* const*>(act),
                     a.in / kQK_K, out);
      break;
#endif
    default:
      SKIPKV_CHECK_MSG(false, "MatRows: unsupported weight type");
  }
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) a.y[(t0 + t) * a.y_stride + r] = out[t];
}

#if SKIPKV_VNNI
// Q8_0 / Q4_0 rows [r, r + NR) against tokens [t0, t0 + NT).
template <class W, int NR, int NT>
void Int8Tile(const MatArgs& a, int64_t r, int64_t t0) {
  const typename W::Block* w[NR];
  const ActQ8* x[NT];
  RowPointers(a.w, a.w_row_bytes, r, w);
  RowPointers(a.act, a.act_row_bytes, t0, x);
  float out[NR * NT];
  Int8TileVnni<W, NR, NT>(w, x, a.in / 32, out);
  StoreTile<NR, NT>(a, r, t0, out);
}
template <class W, int NR>
void Int8TokenRange(const MatArgs& a, int64_t r, int64_t tb, int64_t te) {
  int64_t t = tb;
  for (; t + 4 <= te; t += 4) Int8Tile<W, NR, 4>(a, r, t);
  switch (te - t) {
    case 3: Int8Tile<W, NR, 3>(a, r, t); break;
    case 2: Int8Tile<W, NR, 2>(a, r, t); break;
    case 1: Int8Tile<W, NR, 1>(a, r, t); break;
    default: break;
  }
}
// Batches: rows in groups of 4 x tokens in groups of 4 (16 zmm accumulators);
// fewer than 4 tokens (decode): one row at a time, which streams the weights
// fastest. The per-pair arithmetic is the same either way.
template <class W>
void Int8RowsVnni(const MatArgs& a, int64_t r0, int64_t r1) {
  ForEachCacheBlock(a, r0, r1, 4, [&](int64_t rb, int64_t re, int64_t tb, int64_t te) {
    int64_t r = rb;
    if (te - tb >= 4) {
      for (; r + 4 <= re; r += 4) Int8TokenRange<W, 4>(a, r, tb, te);
    }
    for (; r < re; ++r) Int8TokenRange<W, 1>(a, r, tb, te);
  });
}
#endif

#if SKIPKV_X86_INT8
// Q4_K decode: rows [rb, re) against the single token t (Q4_KRowsDotVnni1 on
// AVX-512 VNNI, Q4_KRowsDot1 on AVX2); false when the row is too long for the
// on-stack pair sums (VNNI; on AVX2 the same limit keeps one code path).
HWY_INLINE bool Q4_KDecodeRows(const MatArgs& a, int64_t rb, int64_t re, int64_t t) {
  constexpr int64_t kMaxBlocks = 128;  // in <= 32,768
  const int64_t nb = a.in / kQK_K;
  if (nb > kMaxBlocks) return false;
  const auto* y = reinterpret_cast<const BlockQ8_K*>(a.act + static_cast<size_t>(t) * a.act_row_bytes);
#if SKIPKV_VNNI
  __m128i bs32[kMaxBlocks];
  Q8KPairSums(y, nb, bs32);
#endif
  constexpr int64_t kRun = 32;  // rows per output staging run
  float out[kRun];
  for (int64_t r = rb; r < re; r += kRun) {
    const int64_t n = std::min(kRun, re - r);
#if SKIPKV_VNNI
    Q4_KRowsDotVnni1(a.w + static_cast<size_t>(r) * a.w_row_bytes, a.w_row_bytes, n, y, bs32, nb, out);
#else
    Q4_KRowsDot1(a.w + static_cast<size_t>(r) * a.w_row_bytes, a.w_row_bytes, n, y, nb, out);
#endif
    for (int64_t i = 0; i < n; ++i) a.y[t * a.y_stride + r + i] = out[i];
  }
  return true;
}
#endif

// RowTile<N> for rem = N, N - 1, ..., 1 tokens (the tail of a token tile).
template <int N>
HWY_INLINE void RowTileTail(const MatArgs& a, int64_t r, int64_t t, int64_t rem) {
  if constexpr (N > 0) {
    if (rem == N) return RowTile<N>(a, r, t);
    RowTileTail<N - 1>(a, r, t, rem);
  }
}

// One weight row at a time against tokens in tiles of kTok, cache-blocked
// (ForEachCacheBlock): per row kTok tokens share each unpacked weight block.
template <int kTok>
void RowsInTokenTiles(const MatArgs& a, int64_t r0, int64_t r1) {
  ForEachCacheBlock(a, r0, r1, kTok, [&](int64_t rb, int64_t re, int64_t tb, int64_t te) {
    int64_t r = rb;
#if SKIPKV_X86_INT8
    // Decode: a run of rows shares the token's set-up (Q4_KDecodeRows).
    if (a.type == DType::kQ4_K && te - tb == 1 && Q4_KDecodeRows(a, rb, re, tb)) return;
#endif
#if SKIPKV_VNNI
    if (a.type == DType::kQ6_K && te - tb == 1) {  // inlined per row: the constants leave the loop
      const auto* y = reinterpret_cast<const BlockQ8_K*>(a.act + static_cast<size_t>(tb) * a.act_row_bytes);
      for (; r < re; ++r) {
        Q6_KRowDotVnni<1>(reinterpret_cast<const BlockQ6_K*>(a.w + static_cast<size_t>(r) * a.w_row_bytes),
                          &y, a.in / kQK_K, &a.y[tb * a.y_stride + r]);
      }
      return;
    }
#endif
    for (; r < re; ++r) {
      int64_t t = tb;
      for (; t + kTok <= te; t += kTok) RowTile<kTok>(a, r, t);
      RowTileTail<kTok - 1>(a, r, t, te - t);
    }
  });
}

// True in matmul.cpp's AVX3 pass where the products go to the AVX3 VNNI
// pass instead (Avx3VnniAllowed: the CPU has AVX512_VNNI and nothing turned
// it off); activations are then formatted for the VNNI kernels.
HWY_INLINE bool RoutedToAvx3Vnni() {
#if HWY_TARGET == HWY_AVX3 && !SKIPKV_MATMUL_AVX3_VNNI
  return Avx3VnniAllowed();
#else
  return false;
#endif
}

// Rows [r0, r1) for all tokens. Float types tile rows too (FloatRows); on
// VNNI, Q8_0/Q4_0 take 4-row x 4-token tiles and the K-quants 8-token tiles
// (their unpacked row block, 8 zmm, is reused by 8 token accumulators);
// otherwise int8 types take 4 tokens per weight row.
void MatRowsT(const MatArgs& a, int64_t r0, int64_t r1) {
  if (RoutedToAvx3Vnni()) return MatRowsAvx3Vnni(a, r0, r1);
  switch (a.type) {
    case DType::kF32: return FloatRows<float>(a, r0, r1);
    case DType::kF16: return FloatRows<f16_t>(a, r0, r1);
    case DType::kBF16: return FloatRows<Bf16Tag>(a, r0, r1);
    case DType::kF32x16: return FloatX16Rows<float>(a, r0, r1);
    case DType::kF16x16: return FloatX16Rows<f16_t>(a, r0, r1);
    case DType::kQ4_Kx16: return X16Rows<Q4_Kx16Kind>(a, r0, r1);
    case DType::kQ8_0x16: return X16Rows<Q8_0x16Kind>(a, r0, r1);
    case DType::kQ6_Kx16:
      return X16Rows<Q6_Kx16Kind>(a, r0, r1);
#if SKIPKV_VNNI
    case DType::kQ8_0: return Int8RowsVnni<Q8_0Vnni>(a, r0, r1);
    case DType::kQ4_0: return Int8RowsVnni<Q4_0Vnni>(a, r0, r1);
    case DType::kQ4_K:
    case DType::kQ6_K: return RowsInTokenTiles<8>(a, r0, r1);
#endif
    default: return RowsInTokenTiles<kMaxTok>(a, r0, r1);
  }
}

const char* TargetNameT() { return hwy::TargetName(HWY_TARGET); }
bool DispatchIsAvx3DlT() { return HWY_TARGET == HWY_AVX3_DL; }
bool Q8WideActiveT() { return SKIPKV_X86_INT8 && !SKIPKV_VNNI && !RoutedToAvx3Vnni(); }
bool Int8VnniActiveT() { return SKIPKV_VNNI || RoutedToAvx3Vnni(); }
bool FloatX16PreferredT() { return kFloatAvx512; }

}  // namespace SKIPKV_MATMUL_NS
}  // namespace skipkv::kernels::internal
HWY_AFTER_NAMESPACE();
