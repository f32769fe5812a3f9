// Runs kernel tests once per Highway target compiled into skipkv_kernels and
// supported by this CPU: each target is selected with
// hwy::SetSupportedTargetsForTest and confirmed through SimdTargetName().
#pragma once

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace skipkv::testing {

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

// Fixture base: selects the target for the duration of one test.
class SimdTargetTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    hwy::SetSupportedTargetsForTest(GetParam());
    ASSERT_STREQ(kernels::SimdTargetName(), hwy::TargetName(GetParam()));
  }
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }
};

inline std::string TargetParamName(const ::testing::TestParamInfo<int64_t>& info) {
  return hwy::TargetName(info.param);
}

}  // namespace skipkv::testing
