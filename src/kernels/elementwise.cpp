// SIMD elementwise kernels (RmsNorm, Rope, Softmax, SiluMul, Add,
// ConvertF16ToF32, ReadSweep, FmaChains), compiled
// per Highway target. Whole vectors go through Highway; the n % lanes tail
// uses the same formula in scalar code. Rope takes its angles from
// rope_freq.h (shared with the reference), so only the rotation is SIMD.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/elementwise.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <cmath>
#include <vector>

#include "kernels/rope_freq.h"
#include "kernels/simd_internal.h"
#include "util/check.h"
#include "util/fp16.h"

HWY_BEFORE_NAMESPACE();
namespace skipkv::kernels::internal {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void RmsNormT(const float* x, const float* weight, int64_t n, float eps, float* out) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto acc0 = hn::Zero(df), acc1 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto a = hn::LoadU(df, x + i), b = hn::LoadU(df, x + i + N);
    acc0 = hn::MulAdd(a, a, acc0);
    acc1 = hn::MulAdd(b, b, acc1);
  }
  float ss = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0, acc1)));
  for (; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.f / std::sqrt(ss / static_cast<float>(n) + eps);
  const auto vinv = hn::Set(df, inv);
  i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(df, x + i), vinv), hn::LoadU(df, weight + i)), df, out + i);
  }
  for (; i < n; ++i) out[i] = x[i] * inv * weight[i];
}

// Per-thread cache of the rotation tables: the inverse frequencies change only
// with the parameters, and Q and K of a token are rotated back to back at the
// same position, so the second call reuses the cos/sin of the first.
struct RopeTables {
  RopeParams p;
  int rot = -1;
  int64_t pos = 0;
  bool have_pos = false;
  std::vector<double> inv_freq;
  std::vector<float> cos, sin;
};

bool SameRope(const RopeParams& a, const RopeParams& b) {
  return a.theta == b.theta && a.llama3_factor == b.llama3_factor &&
         a.llama3_low_freq_factor == b.llama3_low_freq_factor &&
         a.llama3_high_freq_factor == b.llama3_high_freq_factor &&
         a.llama3_original_context == b.llama3_original_context && a.linear_scale == b.linear_scale;
}

void RopeT(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p) {
  const int rot = p.rot_dim > 0 ? p.rot_dim : head_dim;
  const int half = rot / 2;
  thread_local RopeTables t;
  if (t.rot != rot || !SameRope(t.p, p)) {
    t.p = p;
    t.rot = rot;
    t.have_pos = false;
    t.inv_freq.resize(half);
    for (int i = 0; i < half; ++i) t.inv_freq[i] = RopeInvFreq(p, rot, i);
    t.cos.resize(half);
    t.sin.resize(half);
  }
  if (!t.have_pos || t.pos != pos) {
    RopeCosSinFromInvFreq(t.inv_freq.data(), half, pos, p.linear_scale, t.cos.data(), t.sin.data());
    t.pos = pos;
    t.have_pos = true;
  }
  const float* c = t.cos.data();
  const float* s = t.sin.data();
  const hn::ScalableTag<float> df;
  const int N = static_cast<int>(hn::Lanes(df));
  for (int h = 0; h < n_heads; ++h) {
    float* xh = x + static_cast<int64_t>(h) * head_dim;
    int i = 0;
    if (p.style == RopeStyle::kRotateHalf) {
      // (x[i], x[i + half]) -> (a c - b s, a s + b c)
      for (; i + N <= half; i += N) {
        const auto a = hn::LoadU(df, xh + i), b = hn::LoadU(df, xh + i + half);
        const auto vc = hn::LoadU(df, c + i), vs = hn::LoadU(df, s + i);
        hn::StoreU(hn::NegMulAdd(b, vs, hn::Mul(a, vc)), df, xh + i);
        hn::StoreU(hn::MulAdd(a, vs, hn::Mul(b, vc)), df, xh + i + half);
      }
      for (; i < half; ++i) {
        const float a = xh[i], b = xh[i + half];
        xh[i] = a * c[i] - b * s[i];
        xh[i + half] = a * s[i] + b * c[i];
      }
    } else {
      // (x[2i], x[2i + 1]) -> (a c - b s, a s + b c), de-interleaved on load.
      for (; i + N <= half; i += N) {
        hn::Vec<decltype(df)> a, b;
        hn::LoadInterleaved2(df, xh + 2 * i, a, b);
        const auto vc = hn::LoadU(df, c + i), vs = hn::LoadU(df, s + i);
        hn::StoreInterleaved2(hn::NegMulAdd(b, vs, hn::Mul(a, vc)), hn::MulAdd(a, vs, hn::Mul(b, vc)), df,
                              xh + 2 * i);
      }
      for (; i < half; ++i) {
        const float a = xh[2 * i], b = xh[2 * i + 1];
        xh[2 * i] = a * c[i] - b * s[i];
        xh[2 * i + 1] = a * s[i] + b * c[i];
      }
    }
  }
}

void SoftmaxT(float* x, int64_t n) {
  if (n <= 0) return;
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto vmax = hn::Set(df, x[0]);
  int64_t i = 0;
  for (; i + N <= n; i += N) vmax = hn::Max(vmax, hn::LoadU(df, x + i));
  float mx = hn::GetLane(hn::MaxOfLanes(df, vmax));
  for (; i < n; ++i) mx = std::max(mx, x[i]);
  const auto vm = hn::Set(df, mx);
  auto vsum = hn::Zero(df);
  i = 0;
  for (; i + N <= n; i += N) {
    const auto e = hn::CallExp(df, hn::Sub(hn::LoadU(df, x + i), vm));
    vsum = hn::Add(vsum, e);
    hn::StoreU(e, df, x + i);
  }
  float sum = hn::GetLane(hn::SumOfLanes(df, vsum));
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = 1.f / sum;
  const auto vinv = hn::Set(df, inv);
  i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(df, x + i), vinv), df, x + i);
  for (; i < n; ++i) x[i] *= inv;
}

// silu(g) * u = g / (1 + exp(-g)) * u; exp's argument is capped at 88 (its
// valid range ends at 104), where g / (1 + e^88) is already ~0.
void SiluMulT(const float* gate, const float* up, float* out, int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto one = hn::Set(df, 1.f), cap = hn::Set(df, 88.f);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto g = hn::LoadU(df, gate + i);
    const auto e = hn::CallExp(df, hn::Min(hn::Neg(g), cap));
    hn::StoreU(hn::Mul(hn::Div(g, hn::Add(one, e)), hn::LoadU(df, up + i)), df, out + i);
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.f + std::exp(-gate[i])) * up[i];
}

void AddT(float* y, const float* x, int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Add(hn::LoadU(df, y + i), hn::LoadU(df, x + i)), df, y + i);
  for (; i < n; ++i) y[i] += x[i];
}

// f16 bits -> f32. The AVX2 and AVX-512 targets have F16C (vcvtph2ps, exact).
// Elsewhere Highway 1.0's emulated PromoteTo maps infinities and NaNs to
// finite numbers, so the bits are converted here: the exponent-and-mantissa
// field shifted into place and scaled by 2^(127 − 15) is exact for zeros,
// subnormals and normals; exponent 31 (inf / NaN) keeps its mantissa under
// an all-ones f32 exponent.
void ConvertF16ToF32T(const uint16_t* src, float* dst, int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(src + i))), df, dst + i);
  }
#else
  const hn::RebindToSigned<decltype(df)> di;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const auto sign_bit = hn::Set(di, 0x8000), exp_mant = hn::Set(di, 0x7fff);
  const auto max_finite = hn::Set(di, 0x7bff), inf_f32 = hn::Set(di, 0x7f800000);
  const auto scale = hn::Set(df, 0x1p112f);  // 2^(127 − 15)
  for (; i + N <= n; i += N) {
    const auto h = hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(du16, src + i)));
    const auto em = hn::And(h, exp_mant);
    const auto shifted = hn::ShiftLeft<13>(em);
    const auto finite = hn::BitCast(di, hn::Mul(hn::BitCast(df, shifted), scale));
    const auto mag = hn::IfThenElse(hn::Gt(em, max_finite), hn::Or(shifted, inf_f32), finite);
    hn::StoreU(hn::BitCast(df, hn::Or(mag, hn::ShiftLeft<16>(hn::And(h, sign_bit)))), df, dst + i);
  }
#endif
  for (; i < n; ++i) dst[i] = F16ToF32(src[i]);
}

uint64_t ReadSweepT(const uint64_t* words, int64_t n) {
  const hn::ScalableTag<uint64_t> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    a0 = hn::Xor(a0, hn::LoadU(d, words + i));
    a1 = hn::Xor(a1, hn::LoadU(d, words + i + N));
    a2 = hn::Xor(a2, hn::LoadU(d, words + i + 2 * N));
    a3 = hn::Xor(a3, hn::LoadU(d, words + i + 3 * N));
  }
  for (; i + N <= n; i += N) a0 = hn::Xor(a0, hn::LoadU(d, words + i));
  HWY_ALIGN uint64_t lanes[HWY_MAX_BYTES / sizeof(uint64_t)];
  hn::Store(hn::Xor(hn::Xor(a0, a1), hn::Xor(a2, a3)), d, lanes);
  uint64_t x = 0;
  for (int64_t k = 0; k < N; ++k) x ^= lanes[k];
  for (; i < n; ++i) x ^= words[i];
  return x;
}

// kFmaChains chains of x = x * m + c in the widest vectors, nothing else:
// no loads, so the loop runs at the FMA units' rate. Twelve chains keep two
// FMA pipes of 4-cycle latency busy (8 would do) and, with m and c, fit the
// 16 registers of AVX2.
int64_t FmaChainValuesT() { return kFmaChains * static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>())); }

void FmaChainsT(int64_t steps, float* out) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto m = hn::Set(df, kFmaChainMul), c = hn::Set(df, kFmaChainAdd);
  hn::Vec<decltype(df)> x[kFmaChains];
  HWY_ALIGN float start[HWY_MAX_BYTES / sizeof(float)];
  for (int i = 0; i < kFmaChains; ++i) {
    for (int64_t j = 0; j < N; ++j) start[j] = FmaChainStart(i * N + j);
    x[i] = hn::Load(df, start);
  }
  for (int64_t s = 0; s < steps; ++s) {
    SKIPKV_UNROLL
    for (int i = 0; i < kFmaChains; ++i) x[i] = hn::MulAdd(x[i], m, c);
  }
  for (int i = 0; i < kFmaChains; ++i) hn::StoreU(x[i], df, out + i * N);
}

}  // namespace HWY_NAMESPACE
}  // namespace skipkv::kernels::internal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace skipkv::kernels::internal {
HWY_EXPORT(RmsNormT);
HWY_EXPORT(RopeT);
HWY_EXPORT(SoftmaxT);
HWY_EXPORT(SiluMulT);
HWY_EXPORT(AddT);
HWY_EXPORT(ConvertF16ToF32T);
HWY_EXPORT(ReadSweepT);
HWY_EXPORT(FmaChainValuesT);
HWY_EXPORT(FmaChainsT);

void RmsNormSimd(const float* x, const float* weight, int64_t n, float eps, float* out) {
  HWY_DYNAMIC_DISPATCH(RmsNormT)(x, weight, n, eps, out);
}
void RopeSimd(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p) {
  HWY_DYNAMIC_DISPATCH(RopeT)(x, n_heads, head_dim, pos, p);
}
void SoftmaxSimd(float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(SoftmaxT)(x, n); }
void SiluMulSimd(const float* gate, const float* up, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SiluMulT)(gate, up, out, n);
}
void AddSimd(float* y, const float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(AddT)(y, x, n); }
void ConvertF16ToF32Simd(const uint16_t* src, float* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(ConvertF16ToF32T)(src, dst, n);
}
uint64_t ReadSweepSimd(const uint64_t* words, int64_t n) { return HWY_DYNAMIC_DISPATCH(ReadSweepT)(words, n); }
int64_t FmaChainValuesSimd() { return HWY_DYNAMIC_DISPATCH(FmaChainValuesT)(); }
void FmaChainsSimd(int64_t steps, float* out) { HWY_DYNAMIC_DISPATCH(FmaChainsT)(steps, out); }
}  // namespace skipkv::kernels::internal
#endif
