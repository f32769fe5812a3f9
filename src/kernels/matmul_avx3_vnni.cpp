// The matrix products once more for AVX-512 CPUs that have AVX512_VNNI but
// not the rest of Highway's AVX3_DL target (VBMI, VBMI2, BITALG, VPOPCNTDQ,
// VAES, VPCLMULQDQ): Intel Cascade Lake and Cooper Lake, the second and third
// Xeon Scalable generations, which Highway 1.0.3 dispatches as AVX3. On AVX3
// the int8 products would take the AVX2-style maddubs/madd kernels; here the
// same body (matmul_body-inl.h) is compiled in Highway's AVX3 pass with
// avx512vnni added, so those CPUs run the vpdpbusd kernels of
// matmul_vnni-inl.h and matmul_x16-inl.h that AVX3_DL runs, with only
// AVX-512 F/BW/DQ/VL and VNNI instructions (nothing of VBMI and the others
// is enabled in this pass, so the compiler cannot emit it). Results equal
// AVX3_DL's bit for bit (the kernels' integer sums are exact and their float
// steps fixed; kernels_matmul_test runs this pass as target "AVX3_VNNI").
//
// matmul.cpp's AVX3 pass calls MatRowsAvx3Vnni when Avx3VnniAllowed(): the
// CPU reports AVX512_VNNI (CPUID.7.0:ECX[11]), and neither SKIPKV_SIMD=avx3
// (the plain AVX3 path, as on Skylake-SP) nor a test turned it off.
// AMX and the bf16 dot products stay AVX3_DL's (no CPU with either lacks it
// except Cooper Lake's AVX512_BF16, which keeps the f32 path).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul_avx3_vnni.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// (first, and a block of its own: clang-format must not sort highway.h above it)

#include <hwy/highway.h>

#if HWY_TARGET == HWY_AVX3 && (HWY_COMPILER_GCC_ACTUAL || HWY_COMPILER_CLANG)
#define SKIPKV_HAVE_AVX3_VNNI_PASS 1
#undef SKIPKV_MATMUL_NS
#define SKIPKV_MATMUL_NS N_AVX3_VNNI
#undef SKIPKV_MATMUL_AVX3_VNNI
#define SKIPKV_MATMUL_AVX3_VNNI 1
#include "kernels/matmul_body-inl.h"
#undef SKIPKV_MATMUL_AVX3_VNNI
#endif

#if HWY_ONCE
#include <atomic>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

#include "kernels/simd_internal.h"
#include "util/check.h"

namespace skipkv::kernels::internal {
namespace {

// SKIPKV_SIMD=avx3 clears it at start-up (ops.cpp); constant-initialised, so
// that static initialisation in any order sees it.
std::atomic<bool> g_startup_allowed{true};
// SetAvx3VnniForTest: -1 follows g_startup_allowed, 0 off, 1 on.
std::atomic<int> g_test_mode{-1};

bool CpuHasAvx512Vnni() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool has = [] {  // asked once: CPUID traps to the hypervisor in a VM
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
    return ((c >> 11) & 1u) != 0;
  }();
  return has;
#else
  return false;
#endif
}

}  // namespace

bool Avx3VnniCpu() { return CpuHasAvx512Vnni() && Avx3VnniCompiled(); }

bool Avx3VnniCompiled() {
#if defined(SKIPKV_HAVE_AVX3_VNNI_PASS)
  return true;
#else
  return false;
#endif
}

bool Avx3VnniAllowed() {
  const int mode = g_test_mode.load(std::memory_order_relaxed);
  const bool wanted = mode < 0 ? g_startup_allowed.load(std::memory_order_relaxed) : mode > 0;
  return wanted && Avx3VnniCpu();
}

void DisableAvx3VnniAtStartup() { g_startup_allowed.store(false, std::memory_order_relaxed); }
void SetAvx3VnniForTest(int mode) { g_test_mode.store(mode < 0 ? -1 : mode > 0 ? 1 : 0); }

void MatRowsAvx3Vnni(const MatArgs& a, int64_t row_begin, int64_t row_end) {
#if defined(SKIPKV_HAVE_AVX3_VNNI_PASS)
  N_AVX3_VNNI::MatRowsT(a, row_begin, row_end);
#else
  (void)a, (void)row_begin, (void)row_end;
  SKIPKV_CHECK_MSG(false, "MatRowsAvx3Vnni: the AVX3 VNNI pass is not compiled here");
#endif
}

}  // namespace skipkv::kernels::internal
#endif  // HWY_ONCE
