// Batches of interleaved Q8_0, Q4_K and Q6_K weights on AMX tiles
// (matmul_amx_x16_x86.cpp) against the interleaved kernels with AMX off, bit
// for bit: the AVX-512 VNNI kernel of the native dispatch and the scalar
// (EMU128) one, two codes that share nothing with the tile kernel and that
// kernels_matmul_test holds to its oracle. Equal bits also show that turning
// AMX on changes no result, that decode (each token alone, on the VNNI
// kernel) equals a batch token, and that results do not depend on the thread
// count, the guarded loop or the products beside them. Run three ways:
// software tiles (the kernel's scalar model of the instructions, any AVX-512
// CPU); real tiles where the CPU and Linux allow AMX; and the real tile
// instructions as compiled, trapped and emulated from the Intel SDM's
// definitions (amx_trap_emulator.h) on any AVX-512 CPU without AMX, which
// checks the encoded operands, strides and tile shapes that software tiles
// never execute. A way that cannot run here is skipped with the reason.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "amx_trap_emulator.h"
#include "kernels/ops.h"
#include "kernels/simd_internal.h"
#include "tensor/interleaved.h"
#include "tensor/quant.h"
#include "test_weights.h"
#include "util/fp16.h"
#include "util/thread_pool.h"

namespace skipkv {
namespace {

using kernels::internal::AmxMode;

// How the tile kernel runs: its software tiles, the CPU's tiles, or the tile
// instructions under the trap emulator.
enum class TileRun { kSoftware, kHardware, kTrapped };

class AmxX16Test : public ::testing::TestWithParam<TileRun> {
 protected:
  void SetUp() override {
    std::string why;
    switch (GetParam()) {
      case TileRun::kSoftware:
        on_ = AmxMode::kSoftware;
        break;
      case TileRun::kHardware:
        on_ = AmxMode::kTiles;
        break;
      case TileRun::kTrapped:
        on_ = AmxMode::kTiles;
        if (kernels::internal::SetAmxModeForTesting(AmxMode::kTiles, &why)) {
          GTEST_SKIP() << "not run here: real tiles run on this machine (the Tiles cases)";
        }
        if (!testing::InstallAmxTrapEmulator(&why)) GTEST_SKIP() << "not run here: " << why;
        if (!kernels::internal::ForceAmxTileInstructionsForTesting(&why)) {
          GTEST_SKIP() << "not run here: " << why;
        }
        return;
    }
    if (!kernels::internal::SetAmxModeForTesting(on_, &why)) GTEST_SKIP() << "not run here: " << why;
  }
  void TearDown() override {
    hwy::SetSupportedTargetsForTest(0);
    kernels::internal::SetAmxMinTokensForTesting(0);
    kernels::internal::ResetAmxModeForTesting();
  }
  void SetMode(AmxMode mode) {
    std::string why;
    if (mode == AmxMode::kTiles && GetParam() == TileRun::kTrapped) {
      ASSERT_TRUE(kernels::internal::ForceAmxTileInstructionsForTesting(&why)) << why;
    } else {
      ASSERT_TRUE(kernels::internal::SetAmxModeForTesting(mode, &why)) << why;
    }
  }
  // The mode that puts batches on tiles in this run.
  void SetTilesOn() { SetMode(on_); }
  // Under the emulator: that tile instructions were trapped since `before`.
  void ExpectEmulatedSince(int64_t before) const {
    if (GetParam() == TileRun::kTrapped) {
      EXPECT_GT(testing::AmxInstructionsEmulated(), before) << "no tile instruction was emulated";
    }
  }
  AmxMode on_ = AmxMode::kOff;
};

using testing::Weights;

// Rows of normal(0, 0.05) floats quantised to FileTypeOf(type) (or, for
// Q4_K and Q6_K with raw, random bytes: every nibble, 6-bit scale and min;
// every 6-bit quant and 8-bit scale, -128 included), interleaved when `type`
// is an interleaved type.
Weights TileTestWeights(DType type, int64_t in, int64_t rows, uint32_t seed, bool raw = false) {
  if (!raw) return testing::MakeWeights(type, in, rows, seed, 0.05f);
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(RowBytes(FileTypeOf(type), in) * rows);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.01f, 0.01f);
  if (FileTypeOf(type) == DType::kQ6_K) {
    for (auto& b : bytes) b = static_cast<uint8_t>(byte(rng));
    for (size_t blk = 0; blk < bytes.size() / sizeof(BlockQ6_K); ++blk) {
      const uint16_t d = F32ToF16(scale(rng));
      std::memcpy(bytes.data() + blk * sizeof(BlockQ6_K) + offsetof(BlockQ6_K, d), &d, 2);
    }
    return testing::WrapWeights(type, std::move(bytes), in, rows);
  }
  for (size_t blk = 0; blk < bytes.size() / sizeof(BlockQ4_K); ++blk) {
    uint8_t* p = bytes.data() + blk * sizeof(BlockQ4_K);
    const uint16_t d = F32ToF16(scale(rng)), dmin = F32ToF16(scale(rng));
    std::memcpy(p, &d, 2);
    std::memcpy(p + 2, &dmin, 2);
    for (size_t i = 4; i < sizeof(BlockQ4_K); ++i) p[i] = static_cast<uint8_t>(byte(rng));
  }
  return testing::WrapWeights(type, std::move(bytes), in, rows);
}

std::vector<float> RandomActivations(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  x[0] = 6.f;                                                  // an outlier, as activations have
  if (n > 64) std::fill(x.begin() + 32, x.begin() + 64, 0.f);  // an all-zero Q8_0 block
  return x;
}

void ExpectBitEqual(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(&got[i], &want[i], sizeof(float)))
        << what << ": element " << i << " = " << got[i] << ", want " << want[i];
  }
}

std::vector<float> Product(const TensorView& v, const std::vector<float>& x, int64_t n, int threads) {
  ThreadPool pool(threads);
  std::vector<float> y(v.ne[1] * n, NAN);
  kernels::MatMul(v, x.data(), n, y.data(), pool);
  return y;
}

struct Case {
  DType type;
  int64_t rows, in, n;
  bool raw;
};

// Token counts from the smallest batch on tiles (AmxMinTokens: Q8_0 8, Q4_K
// and Q6_K 64): one tile more and one token (9, 65), a partial last tile (23, 71),
// several tiles (150), and at in = 8960 two token blocks of about 1 MiB (130
// tokens: blocks of 104 Q8_0 / 96 Q8_K rows); an odd number of Q8_0 blocks
// (in = 96: the pipeline's last block has no partner); several row groups
// per call.
TEST_P(AmxX16Test, BatchesEqualTheInterleavedKernelsBitForBit) {
  const Case cases[] = {
      {DType::kQ8_0x16, 16, 32, 8, false},     {DType::kQ8_0x16, 48, 1536, 9, false},
      {DType::kQ8_0x16, 32, 96, 23, false},    {DType::kQ8_0x16, 64, 768, 150, false},
      {DType::kQ8_0x16, 16, 8960, 130, false}, {DType::kQ4_Kx16, 16, 256, 64, false},
      {DType::kQ4_Kx16, 48, 1536, 65, false},  {DType::kQ4_Kx16, 32, 512, 71, true},
      {DType::kQ4_Kx16, 64, 768, 150, false},  {DType::kQ4_Kx16, 16, 8960, 130, false},
      {DType::kQ6_Kx16, 16, 256, 64, false},   {DType::kQ6_Kx16, 48, 1536, 65, false},
      {DType::kQ6_Kx16, 32, 512, 71, true},    {DType::kQ6_Kx16, 16, 8960, 130, false},
  };
  uint32_t seed = 100;
  for (const Case& c : cases) {
    const std::string what = std::string(DTypeName(c.type)) + " " + std::to_string(c.rows) + "x" +
                             std::to_string(c.in) + " n=" + std::to_string(c.n) + (c.raw ? " raw" : "");
    SCOPED_TRACE(what);
    const Weights w = TileTestWeights(c.type, c.in, c.rows, ++seed, c.raw);
    const auto x = RandomActivations(c.in * c.n, ++seed);
    SetMode(AmxMode::kOff);
    const auto want = Product(w.view, x, c.n, 1);
    hwy::SetSupportedTargetsForTest(HWY_EMU128);
    const auto scalar = Product(w.view, x, c.n, 2);
    hwy::SetSupportedTargetsForTest(0);
    ExpectBitEqual(scalar, want, what + ": the scalar interleaved kernel against the native one");
    SetTilesOn();
    for (const int threads : {1, 3}) {
      const int64_t calls = kernels::internal::X16AmxRowsCalls();
      const int64_t emulated = testing::AmxInstructionsEmulated();
      ExpectBitEqual(Product(w.view, x, c.n, threads), want, what + ", threads " + std::to_string(threads));
      EXPECT_GT(kernels::internal::X16AmxRowsCalls(), calls) << "the tiles did not run";
      ExpectEmulatedSince(emulated);
    }
    // Each token alone (decode: the VNNI kernel, AMX on or not) is its batch result.
    ThreadPool pool(2);
    std::vector<float> yt(c.rows);
    for (int64_t t = 0; t < c.n; t += 7) {
      kernels::MatVec(w.view, x.data() + t * c.in, yt.data(), pool);
      ExpectBitEqual(yt, std::vector<float>(want.begin() + t * c.rows, want.begin() + (t + 1) * c.rows),
                     what + ": token " + std::to_string(t) + " alone");
    }
  }
}

// Smaller batches take the interleaved VNNI kernel.
TEST_P(AmxX16Test, SmallerBatchesStayOffTheTiles) {
  for (const DType type : {DType::kQ8_0x16, DType::kQ4_Kx16, DType::kQ6_Kx16}) {
    SCOPED_TRACE(DTypeName(type));
    const Weights w = TileTestWeights(type, 512, 32, 7);
    const int64_t n = kernels::internal::AmxMinTokens(type) - 1;
    const auto x = RandomActivations(512 * n, 8);
    SetMode(AmxMode::kOff);
    const auto want = Product(w.view, x, n, 2);
    SetTilesOn();
    const int64_t calls = kernels::internal::X16AmxRowsCalls();
    const int64_t emulated = testing::AmxInstructionsEmulated();
    ExpectBitEqual(Product(w.view, x, n, 2), want, std::to_string(n) + " tokens");
    EXPECT_EQ(kernels::internal::X16AmxRowsCalls(), calls);
    EXPECT_EQ(testing::AmxInstructionsEmulated(), emulated);
  }
}

// With the threshold lowered (SetAmxMinTokensForTesting, as bench_amx does to
// time the tiles below it), smaller batches run on the tiles with the same
// results: Q8_0 with fewer tokens than one tile (all in the zero-padded last
// group), Q4_K at 16 (a batched decode step).
TEST_P(AmxX16Test, BatchesBelowTheThresholdOnTilesWhenLowered) {
  struct Small {
    DType type;
    int64_t n;
  };
  for (const Small c : {Small{DType::kQ8_0x16, 3}, Small{DType::kQ4_Kx16, 16}, Small{DType::kQ4_Kx16, 5},
                        Small{DType::kQ6_Kx16, 16}, Small{DType::kQ6_Kx16, 3}}) {
    const std::string what = std::string(DTypeName(c.type)) + " n=" + std::to_string(c.n);
    SCOPED_TRACE(what);
    const Weights w = TileTestWeights(c.type, 768, 48, 40 + static_cast<uint32_t>(c.n));
    const auto x = RandomActivations(768 * c.n, 50 + static_cast<uint32_t>(c.n));
    SetMode(AmxMode::kOff);
    const auto want = Product(w.view, x, c.n, 2);
    SetTilesOn();
    kernels::internal::SetAmxMinTokensForTesting(c.n);
    const int64_t calls = kernels::internal::X16AmxRowsCalls();
    const int64_t emulated = testing::AmxInstructionsEmulated();
    const auto got = Product(w.view, x, c.n, 2);
    kernels::internal::SetAmxMinTokensForTesting(0);
    ExpectBitEqual(got, want, what);
    EXPECT_GT(kernels::internal::X16AmxRowsCalls(), calls) << "the tiles did not run";
    ExpectEmulatedSince(emulated);
  }
  EXPECT_EQ(kernels::internal::AmxMinTokens(DType::kQ4_Kx16), 64) << "the defaults are back";
  EXPECT_EQ(kernels::internal::AmxMinTokens(DType::kQ6_Kx16), 64);
  EXPECT_EQ(kernels::internal::AmxMinTokens(DType::kQ8_0x16), 8);
}

// In one group with file-layout Q8_0 and Q6_K (which never use the tiles), on
// the ordinary and the guarded loop (n <= 16: Q8_0x16 on tiles, Q4_Kx16 and
// Q6_Kx16 not; n = 70: all three on tiles, a thread switching between the
// two tile configurations), each product gives what it gives alone with AMX off.
TEST_P(AmxX16Test, GroupWithFileLayoutProducts) {
  const int64_t in = 512;
  const Weights q8x = TileTestWeights(DType::kQ8_0x16, in, 48, 21),
                q4x = TileTestWeights(DType::kQ4_Kx16, in, 32, 22),
                q6x = TileTestWeights(DType::kQ6_Kx16, in, 32, 25);
  const Weights q8 = TileTestWeights(DType::kQ8_0, in, 24, 23),
                q6 = TileTestWeights(DType::kQ6_K, in, 40, 24);
  for (const int64_t n : {int64_t{12}, int64_t{70}}) {
    const auto x = RandomActivations(in * n, 30 + static_cast<uint32_t>(n));
    SetMode(AmxMode::kOff);
    const auto want8x = Product(q8x.view, x, n, 1), want4x = Product(q4x.view, x, n, 1);
    const auto want6 = Product(q6.view, x, n, 1), want8 = Product(q8.view, x, n, 1);
    const auto want6x = Product(q6x.view, x, n, 1);
    SetTilesOn();
    const int64_t emulated = testing::AmxInstructionsEmulated();
    for (const bool guarded : {false, true}) {
      const std::string what = "n=" + std::to_string(n) + (guarded ? " guarded" : "");
      ThreadPool pool(3);
      pool.SetBackupExecution(guarded);
      std::vector<float> y8x(48 * n, NAN), y4x(32 * n, NAN), y8(24 * n, NAN), y6(40 * n, NAN),
          y6x(32 * n, NAN);
      const kernels::MatMulOut outs[] = {{&q8x.view, y8x.data()},
                                         {&q8.view, y8.data()},
                                         {&q4x.view, y4x.data()},
                                         {&q6x.view, y6x.data()},
                                         {&q6.view, y6.data()}};
      kernels::MatMulGroup(outs, x.data(), n, pool);
      ExpectBitEqual(y8x, want8x, "Q8_0x16 " + what);
      ExpectBitEqual(y4x, want4x, "Q4_Kx16 " + what);
      ExpectBitEqual(y8, want8, "Q8_0 " + what);
      ExpectBitEqual(y6, want6, "Q6_K " + what);
      ExpectBitEqual(y6x, want6x, "Q6_Kx16 " + what);
    }
    ExpectEmulatedSince(emulated);
  }
}

std::string RunName(TileRun run) {
  switch (run) {
    case TileRun::kSoftware:
      return "SoftwareTiles";
    case TileRun::kHardware:
      return "Tiles";
    case TileRun::kTrapped:
      break;
  }
  return "TrappedTileInstructions";
}
void PrintTo(TileRun run, std::ostream* os) { *os << RunName(run); }

INSTANTIATE_TEST_SUITE_P(Modes, AmxX16Test,
                         ::testing::Values(TileRun::kSoftware, TileRun::kHardware, TileRun::kTrapped),
                         [](const ::testing::TestParamInfo<TileRun>& info) { return RunName(info.param); });

}  // namespace
}  // namespace skipkv
