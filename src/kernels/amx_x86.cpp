// Whether the AMX tile kernels (matmul_amx_x16_x86.cpp) run: the CPU's
// AMX-TILE and AMX-INT8 (CPUID leaf 7), Linux's permission for the tile data
// state (arch_prctl ARCH_REQ_XCOMP_PERM, Linux 5.16+; a VM or kernel may
// refuse it), the AVX3_DL dispatch, and the opt-in SKIPKV_AMX=1 until the
// tiles have been measured on an AMX CPU (BENCHMARKS.md, issue 40). Tests
// force a mode: software tiles (TDPBSSD's definition in scalar code) on any
// AVX-512 CPU, real tiles where usable, or the real tile instructions on any
// AVX-512 CPU under a test's SIGILL emulator. Other architectures and compilers
// report AMX off.
#include "kernels/simd_internal.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SKIPKV_AMX_X86 1
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define SKIPKV_AMX_X86 0
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace skipkv::kernels::internal {

namespace {
std::atomic<int64_t> g_min_tokens_for_testing{0};  // 0: the defaults
}  // namespace

int64_t AmxMinTokens(DType t) {
  const int64_t forced = g_min_tokens_for_testing.load(std::memory_order_relaxed);
  if (forced > 0) return forced;
  return t == DType::kQ8_0x16 ? 8 : 64;
}

void SetAmxMinTokensForTesting(int64_t n) {
  g_min_tokens_for_testing.store(std::max<int64_t>(n, 0), std::memory_order_relaxed);
}

#if SKIPKV_AMX_X86

namespace {

// CPUID leaf 7 sub-leaf 0, EDX bits 24 (AMX-TILE) and 25 (AMX-INT8).
bool CpuHasAmxInt8() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  return ((d >> 24) & 1u) != 0 && ((d >> 25) & 1u) != 0;
}

// What the tile kernels' AVX-512 epilogue needs (every AMX CPU has it too).
bool CpuHasAvx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vnni");
}

// Whether real tiles can run here, and if not why (asked once: the
// permission request is process-wide).
const std::string& AmxUnavailableReason() {
  static const std::string why = []() -> std::string {
    if (!CpuHasAmxInt8()) return "the CPU reports no AMX-TILE/AMX-INT8";
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtileData = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) != 0) {
      return std::string("Linux refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM: ") +
             std::strerror(errno) + ")";
    }
    return "";
  }();
  return why;
}

std::atomic<int> g_forced_mode{-1};  // SetAmxModeForTesting; -1 = decide from the machine

AmxMode DefaultMode() {
  static const AmxMode mode = [] {
    const char* env = std::getenv("SKIPKV_AMX");
    if (env == nullptr || std::strcmp(env, "1") != 0) return AmxMode::kOff;
    if (!DispatchIsAvx3Dl() || !AmxUnavailableReason().empty()) return AmxMode::kOff;
    return AmxMode::kTiles;
  }();
  return mode;
}

}  // namespace

AmxMode AmxTileMode() {
  const int forced = g_forced_mode.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<AmxMode>(forced) : DefaultMode();
}

bool SetAmxModeForTesting(AmxMode mode, std::string* why) {
  if (mode == AmxMode::kTiles && !AmxUnavailableReason().empty()) {
    if (why != nullptr) *why = AmxUnavailableReason();
    return false;
  }
  if (mode == AmxMode::kSoftware && !CpuHasAvx512()) {
    if (why != nullptr) *why = "software tiles need AVX-512 (F, BW, VL, DQ, VNNI)";
    return false;
  }
  g_forced_mode.store(static_cast<int>(mode), std::memory_order_relaxed);
  return true;
}

bool ForceAmxTileInstructionsForTesting(std::string* why) {
  if (!CpuHasAvx512()) {
    if (why != nullptr) *why = "the tile kernels' epilogue needs AVX-512 (F, BW, VL, DQ, VNNI)";
    return false;
  }
  g_forced_mode.store(static_cast<int>(AmxMode::kTiles), std::memory_order_relaxed);
  return true;
}

void ResetAmxModeForTesting() { g_forced_mode.store(-1, std::memory_order_relaxed); }

std::string AmxStatus() {
  switch (AmxTileMode()) {
    case AmxMode::kTiles:
      return "on (batches of interleaved Q8_0, Q4_K, Q6_K weights)";
    case AmxMode::kSoftware:
      return "software tiles (testing)";
    case AmxMode::kOff:
      break;
  }
  if (!AmxUnavailableReason().empty()) return "off (" + AmxUnavailableReason() + ")";
  const char* env = std::getenv("SKIPKV_AMX");
  if (env == nullptr || std::strcmp(env, "1") != 0) return "off (usable here; opt in with SKIPKV_AMX=1)";
  return "off (the SIMD dispatch is not AVX3_DL)";
}

#else  // not x86-64 with GCC: no AMX path

AmxMode AmxTileMode() { return AmxMode::kOff; }
bool SetAmxModeForTesting(AmxMode mode, std::string* why) {
  if (mode == AmxMode::kOff) return true;
  if (why != nullptr) *why = "AMX is compiled only for x86-64 with GCC";
  return false;
}
bool ForceAmxTileInstructionsForTesting(std::string* why) {
  if (why != nullptr) *why = "AMX is compiled only for x86-64 with GCC";
  return false;
}
void ResetAmxModeForTesting() {}
std::string AmxStatus() { return "off (not compiled for this architecture or compiler)"; }

#endif

}  // namespace skipkv::kernels::internal
