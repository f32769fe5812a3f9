// Runs kernel tests once per Highway target compiled into skipkv_kernels and
// supported by this CPU: each target is selected with
// hwy::SetSupportedTargetsForTest and confirmed through SimdTargetName().
// The matrix-product tests add "AVX3_VNNI" (kAvx3VnniTarget): AVX3 with the
// AVX512_VNNI int8 kernels of matmul_avx3_vnni.cpp, where the CPU has VNNI;
// plain AVX3 then runs with them off (a Skylake-SP's path).
#pragma once

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "kernels/simd_internal.h"

namespace skipkv::testing {

// A pseudo-target: HWY_AVX3 plus a bit no Highway 1.0.3 target uses.
inline constexpr int64_t kAvx3VnniBit = int64_t{1} << 40;
inline constexpr int64_t kAvx3VnniTarget = int64_t{HWY_AVX3} | kAvx3VnniBit;

// Selects target t (0: back to the CPU's best); AVX3 runs its VNNI kernels
// only for kAvx3VnniTarget.
inline void SelectSimdTarget(int64_t t) {
  hwy::SetSupportedTargetsForTest(t & ~kAvx3VnniBit);
  kernels::internal::SetAvx3VnniForTest(t == 0 ? -1 : (t & kAvx3VnniBit) != 0 ? 1 : 0);
}

inline std::vector<int64_t> CompiledSimdTargets() {
  std::vector<int64_t> out;
  const int64_t supported = hwy::SupportedTargets();
  for (int64_t t : {int64_t{HWY_AVX3_DL}, int64_t{HWY_AVX3}, int64_t{HWY_AVX2}, int64_t{HWY_SSE4},
                    int64_t{HWY_SSSE3}, int64_t{HWY_NEON}, int64_t{HWY_EMU128}, int64_t{HWY_SCALAR}}) {
    if ((supported & t) == 0) continue;
    hwy::SetSupportedTargetsForTest(t);
    if (std::string(kernels::SimdTargetName()) == hwy::TargetName(t)) out.push_back(t);
  }
  hwy::SetSupportedTargetsForTest(0);
  return out;
}

// CompiledSimdTargets() with kAvx3VnniTarget after AVX3 where the CPU can run it.
inline std::vector<int64_t> CompiledMatMulTargets() {
  std::vector<int64_t> out;
  for (int64_t t : CompiledSimdTargets()) {
    out.push_back(t);
    if (t == HWY_AVX3 && kernels::internal::Avx3VnniCpu()) out.push_back(kAvx3VnniTarget);
  }
  return out;
}

// Fixture base: selects the target for the duration of one test.
class SimdTargetTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    SelectSimdTarget(GetParam());
    ASSERT_STREQ(kernels::SimdTargetName(), hwy::TargetName(GetParam() & ~kAvx3VnniBit));
    ASSERT_EQ(kernels::internal::Int8VnniActive(),
              GetParam() == HWY_AVX3_DL || GetParam() == kAvx3VnniTarget);
  }
  void TearDown() override { SelectSimdTarget(0); }
};

inline std::string TargetParamName(const ::testing::TestParamInfo<int64_t>& info) {
  return info.param == kAvx3VnniTarget ? "AVX3_VNNI" : hwy::TargetName(info.param);
}

}  // namespace skipkv::testing
