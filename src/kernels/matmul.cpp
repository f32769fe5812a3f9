// SIMD matrix products for every weight type, compiled once per Highway target
// (foreach_target) and picked at run time. Each weight row is loaded (and
// unpacked) once per group of up to 4 tokens; float batches go in tiles of
// 6 rows x 4 tokens on AVX-512 (3 x 4 on AVX2), see FloatRows.
//   F32/F16/BF16: f32 FMA, weights converted on load (BF16 on CPUs with
//                 AVX512_BF16: bf16 dot products, matmul_bf16_x86.cpp).
//   Q8_0/Q4_0:    activations quantised to ActQ8 (32 x int8 + f32 scale).
//   Q4_K/Q6_K:    activations quantised to Q8_K; min/offset terms via bsums.
// The int8 inner products use AVX-512 vpdpbusd where the CPU has VNNI, AVX2
// maddubs/madd on other x86 CPUs (Highway 1.0.3 has no u8 x i8 pairwise
// multiply-add) and a widening Highway fallback elsewhere.
// Determinism: each (token, row) result follows the same operation sequence
// whatever the tile it falls in, so results do not depend on chunking.
// The per-target code is matmul_body-inl.h; matmul_avx3_vnni.cpp compiles it
// once more for AVX3 CPUs with AVX512_VNNI (Cascade Lake, Cooper Lake).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#undef SKIPKV_MATMUL_NS
#define SKIPKV_MATMUL_NS HWY_NAMESPACE
#include "kernels/matmul_body-inl.h"

#if HWY_ONCE
namespace skipkv::kernels::internal {
HWY_EXPORT(QuantizeActivationsT);
HWY_EXPORT(MatRowsT);
HWY_EXPORT(TargetNameT);
HWY_EXPORT(DispatchIsAvx3DlT);
HWY_EXPORT(Q8WideActiveT);
HWY_EXPORT(FloatX16PreferredT);
HWY_EXPORT(Int8VnniActiveT);

const char* TargetNameSimd() { return HWY_DYNAMIC_DISPATCH(TargetNameT)(); }
bool DispatchIsAvx3Dl() { return HWY_DYNAMIC_DISPATCH(DispatchIsAvx3DlT)(); }
bool Q8WideActive() { return HWY_DYNAMIC_DISPATCH(Q8WideActiveT)(); }
bool FloatX16Preferred() { return HWY_DYNAMIC_DISPATCH(FloatX16PreferredT)(); }
bool Int8VnniActive() { return HWY_DYNAMIC_DISPATCH(Int8VnniActiveT)(); }

void QuantizeActivations(ActFormat f, const float* x, int64_t in, uint8_t* out) {
  HWY_DYNAMIC_DISPATCH(QuantizeActivationsT)(f, x, in, out);
}
void MatRows(const MatArgs& a, int64_t row_begin, int64_t row_end) {
  HWY_DYNAMIC_DISPATCH(MatRowsT)(a, row_begin, row_end);
}
}  // namespace skipkv::kernels::internal
#endif
