// The AMX trap emulator (amx_trap_emulator.h) against products worked out by
// hand, loads through every memory form of the SIB operand (disp8, disp32,
// negative, scales, r12/r13, no index), and the faults it must raise where
// the hardware would. The products
// run the real instructions: on the hardware where AMX runs, emulated
// elsewhere; the fault tests only where emulated (the hardware's #UD is a bare
// SIGILL).
#include "amx_trap_emulator.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/simd_internal.h"

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__)
#define SKIPKV_AMX_TRAP_TEST 1
#include <immintrin.h>
#else
#define SKIPKV_AMX_TRAP_TEST 0
#endif

namespace skipkv {
namespace {

#if SKIPKV_AMX_TRAP_TEST

#define AMX_TEST_ATTR __attribute__((target("amx-tile,amx-int8"), noinline))

// LDTILECFG's 64-byte operand (Intel SDM vol. 1, 18.2).
struct alignas(64) Config {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// tmm0 = C (2 x 2 int32), tmm1 = A (2 rows x 8 bytes: K = 2 dwords), tmm2 =
// B (2 rows x 8 bytes).
Config SmallConfig() {
  Config c;
  for (int t = 0; t < 3; ++t) c.rows[t] = 2, c.colsb[t] = 8;
  return c;
}

const int8_t kA[2][8] = {{1, -2, 3, -4, 5, -6, 7, -8}, {-128, 127, 0, 1, 2, 3, 4, 5}};
const int8_t kB[2][8] = {{1, 2, 3, 4, -1, -1, -1, -1}, {10, 0, -10, 0, 1, 2, 1, 2}};
const int32_t kCStart[2][2] = {{100, 200}, {300, 400}};

enum class Signs { kSS, kSU, kUS, kUU };

// C = kCStart + A . B with the named instruction; C goes back through memory
// with a stride of 12 bytes (4 unused between rows).
AMX_TEST_ATTR void RunProduct(Signs signs, int32_t out[2][3]) {
  static const Config cfg = SmallConfig();
  _tile_loadconfig(&cfg);
  _tile_loadd(0, kCStart, 8);
  _tile_loadd(1, kA, 8);
  _tile_loadd(2, kB, 8);
  switch (signs) {
    case Signs::kSS:
      _tile_dpbssd(0, 1, 2);
      break;
    case Signs::kSU:
      _tile_dpbsud(0, 1, 2);
      break;
    case Signs::kUS:
      _tile_dpbusd(0, 1, 2);
      break;
    case Signs::kUU:
      _tile_dpbuud(0, 1, 2);
      break;
  }
  _tile_stored(0, out, 12);
  _tile_release();
}

// Real tiles run here (then the emulator never fires).
bool HardwareTiles() {
  std::string why;
  const bool usable = kernels::internal::SetAmxModeForTesting(kernels::internal::AmxMode::kTiles, &why);
  kernels::internal::ResetAmxModeForTesting();
  return usable;
}

class AmxTrapEmulatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hardware_ = HardwareTiles();
    if (hardware_) return;  // the products run on the CPU's tiles
    std::string why;
    if (!testing::InstallAmxTrapEmulator(&why)) GTEST_SKIP() << "not run here: " << why;
  }
  void SkipOnHardware() {
    if (hardware_) GTEST_SKIP() << "not run here: real tiles run here, and the hardware's #UD says nothing";
  }
  bool hardware_ = false;
};

// Worked by hand: C[m][n] = start + sum over k, i < 4 of A[m][4k+i] * B[k][4n+i],
// bytes signed or unsigned (-128 = 128, -2 = 254, -10 = 246, -1 = 255, ...).
TEST_F(AmxTrapEmulatorTest, ByteDotProductsAsWorkedByHand) {
  struct Want {
    Signs signs;
    int32_t c[2][2];
  };
  const Want wants[] = {
      // SS: (1-4+9-16) + (50-70) = -30; 2 + (5-12+7-16) = -14; 130 - 20 = 110; 0 + 22.
      {Signs::kSS, {{100 - 30, 200 - 14}, {300 + 110, 400 + 22}}},
      // SU (B unsigned): -10 + (50 + 7 * 246) = 1762; -2 * 255 - 16 = -526; 130 + 1004; 0 + 22.
      {Signs::kSU, {{100 + 1762, 200 - 526}, {300 + 1134, 400 + 22}}},
      // US (A unsigned): 1526 - 20; -510 + 1008; 386 - 20; -256 + 22.
      {Signs::kUS, {{100 + 1506, 200 + 498}, {300 + 366, 400 - 234}}},
      // UU: 1526 + 1772; 255 * 510 + 1008; 386 + 1004; 255 * 256 + 22.
      {Signs::kUU, {{100 + 3298, 200 + 131058}, {300 + 1390, 400 + 65302}}},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(static_cast<int>(w.signs));
    int32_t out[2][3] = {{-1, -1, -1}, {-1, -1, -1}};
    const int64_t before = testing::AmxInstructionsEmulated();
    RunProduct(w.signs, out);
    EXPECT_EQ(out[0][0], w.c[0][0]);
    EXPECT_EQ(out[0][1], w.c[0][1]);
    EXPECT_EQ(out[1][0], w.c[1][0]);
    EXPECT_EQ(out[1][1], w.c[1][1]);
    EXPECT_EQ(out[0][2], -1) << "TILESTORED wrote past a row's configured bytes";
    EXPECT_EQ(out[1][2], -1);
    if (!hardware_) {
      EXPECT_EQ(testing::AmxInstructionsEmulated() - before, 7);  // cfg, 3 loads, dp, store, release
    }
  }
}

// tmm3: 3 rows x 5 bytes, loaded with stride 7 and stored with stride 9.
AMX_TEST_ATTR void CopyRows(const uint8_t* src, uint8_t* dst) {
  static const Config cfg = [] {
    Config c;
    c.rows[3] = 3, c.colsb[3] = 5;
    return c;
  }();
  _tile_loadconfig(&cfg);
  _tile_loadd(3, src, 7);
  _tile_stored(3, dst, 9);
  _tile_release();
}

TEST_F(AmxTrapEmulatorTest, RowsMoveWithTheirStrides) {
  uint8_t src[21], dst[27];
  for (int i = 0; i < 21; ++i) src[i] = static_cast<uint8_t>(i + 1);
  std::memset(dst, 0xEE, sizeof dst);
  CopyRows(src, dst);
  const uint8_t want[27] = {1,  2,  3,  4,  5,  0xEE, 0xEE, 0xEE, 0xEE,  // row 0 = src[0..4]
                            8,  9,  10, 11, 12, 0xEE, 0xEE, 0xEE, 0xEE,  // row 1 = src[7..11]
                            15, 16, 17, 18, 19, 0xEE, 0xEE, 0xEE, 0xEE};
  EXPECT_EQ(0, std::memcmp(dst, want, sizeof want));
}

// The memory forms a compiler may pick for TILELOADD's SIB operand, written
// out: tmm0 (4 rows x 4 bytes) loaded through each, then stored densely to
// `out` (16 bytes). Row r must come from src + first + r * step.
struct LoadForm {
  const char* name;
  int64_t first, step;
};

AMX_TEST_ATTR void LoadThroughForms(const uint8_t* src, uint8_t (*out)[16]) {
  static const Config cfg = [] {
    Config c;
    c.rows[0] = 4, c.colsb[0] = 4;
    return c;
  }();
  _tile_loadconfig(&cfg);
  int64_t four = 4, twelve = 12;
  // disp8 and scale 2: rows at src + 16 + 8 r.
  asm volatile("tileloadd 16(%0,%1,2), %%tmm0" ::"r"(src), "r"(four) : "memory");
  _tile_stored(0, out[0], 4);
  // disp32 (> 127): rows at src + 160 + 12 r.
  asm volatile("tileloadd 160(%0,%1,1), %%tmm0" ::"r"(src), "r"(twelve) : "memory");
  _tile_stored(0, out[1], 4);
  // A negative displacement, scale 8: rows at (src + 40) - 8 + 32 r.
  asm volatile("tileloadd -8(%0,%1,8), %%tmm0" ::"r"(src + 40), "r"(four) : "memory");
  _tile_stored(0, out[2], 4);
  // Base r13 (mod 00 needs a disp8 of 0) and index r12 (encoded as 100b with
  // SIB.X set: an index, not "none"): rows at src + 5 + 12 r.
  {
    register const uint8_t* base asm("r13") = src + 5;
    register int64_t index asm("r12") = 12;
    asm volatile("tileloadd (%%r13,%%r12,1), %%tmm0" ::"r"(base), "r"(index) : "memory");
  }
  _tile_stored(0, out[3], 4);
  // No index: stride 0, every row the same 4 bytes at src + 7.
  asm volatile("tileloadd 7(%0), %%tmm0" ::"r"(src) : "memory");  // SIB index 100b: none
  _tile_stored(0, out[4], 4);
  _tile_release();
}

TEST_F(AmxTrapEmulatorTest, LoadsDecodeEveryAddressingForm) {
  uint8_t src[256];
  for (int i = 0; i < 256; ++i) src[i] = static_cast<uint8_t>(i);
  uint8_t out[5][16];
  std::memset(out, 0xEE, sizeof out);
  LoadThroughForms(src, out);
  const LoadForm forms[] = {{"disp8, scale 2", 16, 8},
                            {"disp32", 160, 12},
                            {"negative disp8, scale 8", 32, 32},
                            {"base r13, index r12", 5, 12},
                            {"no index", 7, 0}};
  for (int f = 0; f < 5; ++f) {
    for (int r = 0; r < 4; ++r) {
      for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(out[f][4 * r + i], forms[f].first + r * forms[f].step + i)
            << forms[f].name << ": row " << r << " byte " << i;
      }
    }
  }
}

AMX_TEST_ATTR void ZeroBeforeConfig() { _tile_zero(0); }

AMX_TEST_ATTR void ProductWithShapes(const Config* cfg) {
  _tile_loadconfig(cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_dpbssd(0, 1, 2);
  _tile_release();
}

AMX_TEST_ATTR void AliasedProduct() {
  static const Config cfg = SmallConfig();
  _tile_loadconfig(&cfg);
  // tdpbssd tmm0, tmm0, tmm2 (the assembler refuses to encode it): VEX C4,
  // map 0F38 (E2), vvvv = ~2 and pp = F2 (6B), opcode 5E, ModRM reg 0 rm 0 (C0).
  asm volatile(".byte 0xc4, 0xe2, 0x6b, 0x5e, 0xc0");
}

AMX_TEST_ATTR void LoadConfig(const Config* cfg) { _tile_loadconfig(cfg); }

void UndefinedInstruction() { asm volatile("ud2"); }

// What the hardware faults on, the emulator reports and aborts on.
TEST_F(AmxTrapEmulatorTest, FaultsWhereTheHardwareWould) {
  SkipOnHardware();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(ZeroBeforeConfig(), "before LDTILECFG");
  Config k_mismatch = SmallConfig();
  k_mismatch.colsb[1] = 16;  // A: K = 4 dwords, B: 2 rows
  EXPECT_DEATH(ProductWithShapes(&k_mismatch), "A.colsb / 4 != B.rows");
  Config n_mismatch = SmallConfig();
  n_mismatch.colsb[0] = 4;
  EXPECT_DEATH(ProductWithShapes(&n_mismatch), "C.colsb != B.colsb");
  Config m_mismatch = SmallConfig();
  m_mismatch.rows[0] = 3;
  EXPECT_DEATH(ProductWithShapes(&m_mismatch), "C.rows != A.rows");
  EXPECT_DEATH(AliasedProduct(), "registers alias");
  Config palette2 = SmallConfig();
  palette2.palette = 2;
  EXPECT_DEATH(LoadConfig(&palette2), "palette");
  Config too_wide = SmallConfig();
  too_wide.colsb[2] = 65;
  EXPECT_DEATH(LoadConfig(&too_wide), "colsb > 64");
  Config tile9 = SmallConfig();
  tile9.rows[9] = 1, tile9.colsb[9] = 4;
  EXPECT_DEATH(LoadConfig(&tile9), "palette 1 lacks");
  // Not AMX: dies of SIGILL as without the emulator.
  EXPECT_EXIT(UndefinedInstruction(), ::testing::KilledBySignal(SIGILL), "");
}

#else

TEST(AmxTrapEmulatorTest, NotCompiledHere) { GTEST_SKIP() << "not run here: needs x86-64 Linux and GCC"; }

#endif

}  // namespace
}  // namespace skipkv
