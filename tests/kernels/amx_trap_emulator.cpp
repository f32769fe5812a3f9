// The AMX instructions in a SIGILL handler (amx_trap_emulator.h says what and
// why). Everything the handler calls is async-signal-safe: memcpy/memset on
// the thread's own tile state (thread_local in the executable: no lazy
// allocation), write(2) and abort() on a fault.
#include "amx_trap_emulator.h"

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__)
#define SKIPKV_AMX_TRAP 1
#include <cpuid.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>
#else
#define SKIPKV_AMX_TRAP 0
#endif

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace skipkv::testing {

#if SKIPKV_AMX_TRAP

namespace {

// Palette 1: 8 tile registers of at most 16 rows x 64 bytes.
constexpr int kTileRegs = 8, kMaxRows = 16, kMaxColsb = 64;

// One thread's AMX state. Zero at thread start = INIT: not configured.
struct TileState {
  bool configured;
  uint8_t start_row;
  uint8_t rows[kTileRegs];
  uint16_t colsb[kTileRegs];
  uint8_t data[kTileRegs][kMaxRows][kMaxColsb];
};
thread_local TileState tls_tiles;

std::atomic<int64_t> g_emulated{0};
struct sigaction g_sigill_before;

// ---- reporting (async-signal-safe) ----

void Say(const char* s) {
  const ssize_t ignored = write(STDERR_FILENO, s, std::strlen(s));
  (void)ignored;
}

void SayHex(uint64_t v, int digits) {
  char buf[17];
  for (int i = digits - 1; i >= 0; --i, v >>= 4) buf[i] = "0123456789abcdef"[v & 15];
  buf[digits] = '\0';
  Say(buf);
}

// What the hardware would fault on (#UD, #GP), or an instruction not emulated.
[[noreturn]] void Fault(const char* what, const uint8_t* ip) {
  Say("AMX trap emulator: ");
  Say(what);
  Say(" (instruction at 0x");
  SayHex(reinterpret_cast<uint64_t>(ip), 16);
  Say(", bytes");
  for (int i = 0; i < 8; ++i) Say(" "), SayHex(ip[i], 2);
  Say(")\n");
  signal(SIGABRT, SIG_DFL);
  abort();
}

// ---- decoding: VEX (C4) map 0F38, ModRM, SIB, displacement ----

// General registers in encoding order (rax, rcx, rdx, rbx, rsp, rbp, rsi,
// rdi, r8..r15) as indices of mcontext gregs.
constexpr int kGreg[16] = {REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP, REG_RSI, REG_RDI,
                           REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15};

struct Instruction {
  const uint8_t* ip;
  int length;        // bytes, to resume after
  int pp;            // implied prefix: 0 none, 1 66, 2 F3, 3 F2
  int opcode;        // in map 0F38
  bool w, l;         // VEX.W, VEX.L
  int vvvv;          // VEX.vvvv, un-inverted (a tile register for TDPB*)
  int reg, rm;       // ModRM fields with VEX.R / VEX.B
  bool memory;       // ModRM.mod != 3
  bool sib;          // memory through a SIB byte
  uint64_t address;  // base + displacement (RIP-relative resolved)
  uint64_t stride;   // index << scale; 0 without an index (SIB index 100b)
};

// Fills `in` for a VEX map-0F38 instruction with an AMX opcode; false for
// anything else (not ours: the caller restores the previous disposition).
bool Decode(const uint8_t* ip, const greg_t* g, Instruction* in) {
  if (ip[0] != 0xC4 || (ip[1] & 0x1f) != 2) return false;
  const int opcode = ip[3];
  if (opcode != 0x49 && opcode != 0x4B && opcode != 0x5C && opcode != 0x5E && opcode != 0x6C) return false;
  const int vex_r = (~ip[1] >> 7) & 1, vex_x = (~ip[1] >> 6) & 1, vex_b = (~ip[1] >> 5) & 1;
  *in = Instruction{};
  in->ip = ip;
  in->opcode = opcode;
  in->w = (ip[2] >> 7) & 1;
  in->vvvv = (~ip[2] >> 3) & 15;
  in->l = (ip[2] >> 2) & 1;
  in->pp = ip[2] & 3;
  const uint8_t modrm = ip[4];
  const int mod = modrm >> 6;
  in->reg = ((modrm >> 3) & 7) | vex_r << 3;
  in->rm = (modrm & 7) | vex_b << 3;
  in->memory = mod != 3;
  int len = 5;
  if (in->memory) {
    uint64_t base = 0;
    bool rip_relative = false, disp32 = mod == 2;
    if ((modrm & 7) == 4) {
      in->sib = true;
      const uint8_t sib = ip[len++];
      const int index = ((sib >> 3) & 7) | vex_x << 3, base_reg = (sib & 7) | vex_b << 3;
      if (index != 4) in->stride = static_cast<uint64_t>(g[kGreg[index]]) << (sib >> 6);
      if ((sib & 7) == 5 && mod == 0) {
        disp32 = true;  // no base
      } else {
        base = static_cast<uint64_t>(g[kGreg[base_reg]]);
      }
    } else if ((modrm & 7) == 5 && mod == 0) {
      rip_relative = disp32 = true;
    } else {
      base = static_cast<uint64_t>(g[kGreg[in->rm]]);
    }
    int64_t disp = 0;
    if (mod == 1) {
      disp = static_cast<int8_t>(ip[len++]);
    } else if (disp32) {
      int32_t d;
      std::memcpy(&d, ip + len, 4);
      disp = d;
      len += 4;
    }
    if (rip_relative) base = reinterpret_cast<uint64_t>(ip + len);
    in->address = base + static_cast<uint64_t>(disp);
  }
  in->length = len;
  return true;
}

// ---- execution ----

const uint8_t* Ptr(uint64_t a) { return reinterpret_cast<const uint8_t*>(a); }

// A tile operand: configured state and a defined shape.
void NeedTile(const TileState& s, const Instruction& in, int t) {
  if (!s.configured) Fault("#UD: tile instruction before LDTILECFG", in.ip);
  if (t >= kTileRegs) Fault("#UD: tile register above tmm7", in.ip);
  if (s.rows[t] == 0 || s.colsb[t] == 0) Fault("#UD: tile register with no configured shape", in.ip);
}

// Zeroes what lies past the configured shape of tile t (every tile write does).
void ZeroOutside(TileState& s, int t) {
  for (int r = 0; r < kMaxRows; ++r) {
    const int from = r < s.rows[t] ? s.colsb[t] : 0;
    std::memset(s.data[t][r] + from, 0, kMaxColsb - from);
  }
}

// LDTILECFG m512 (palette 0 releases).
void LoadConfig(TileState& s, const Instruction& in) {
  uint8_t cfg[64];
  std::memcpy(cfg, Ptr(in.address), sizeof cfg);
  if (cfg[0] == 0) {
    s = TileState{};
    return;
  }
  if (cfg[0] != 1) Fault("#GP: LDTILECFG palette other than 0 or 1", in.ip);
  for (int i = 2; i < 16; ++i) {
    if (cfg[i] != 0) Fault("#GP: LDTILECFG reserved bytes 2..15 not zero", in.ip);
  }
  TileState next{};
  for (int t = 0; t < 16; ++t) {
    uint16_t colsb;
    std::memcpy(&colsb, cfg + 16 + 2 * t, 2);
    const uint8_t rows = cfg[48 + t];
    if (t >= kTileRegs) {
      if (colsb != 0 || rows != 0) Fault("#GP: LDTILECFG shape for a tile palette 1 lacks", in.ip);
      continue;
    }
    if (rows > kMaxRows || colsb > kMaxColsb) Fault("#GP: LDTILECFG rows > 16 or colsb > 64", in.ip);
    next.rows[t] = rows;
    next.colsb[t] = colsb;
  }
  next.configured = true;
  next.start_row = cfg[1];
  s = next;
}

// TILESTORED's and STTILECFG's counterpart for the configuration.
void StoreConfig(const TileState& s, const Instruction& in) {
  uint8_t cfg[64] = {};
  if (s.configured) {
    cfg[0] = 1;
    cfg[1] = s.start_row;
    for (int t = 0; t < kTileRegs; ++t) {
      std::memcpy(cfg + 16 + 2 * t, &s.colsb[t], 2);
      cfg[48 + t] = s.rows[t];
    }
  }
  std::memcpy(reinterpret_cast<void*>(in.address), cfg, sizeof cfg);
}

// TILELOADD / TILELOADDT1: rows start_row .. rows - 1 from address + row * stride.
void LoadTile(TileState& s, const Instruction& in) {
  const int t = in.reg;
  NeedTile(s, in, t);
  for (int r = s.start_row; r < s.rows[t]; ++r) {
    std::memcpy(s.data[t][r], Ptr(in.address + static_cast<uint64_t>(r) * in.stride), s.colsb[t]);
  }
  ZeroOutside(s, t);
  s.start_row = 0;
}

// TILESTORED: rows start_row .. rows - 1 to address + row * stride.
void StoreTile(TileState& s, const Instruction& in) {
  const int t = in.reg;
  NeedTile(s, in, t);
  for (int r = s.start_row; r < s.rows[t]; ++r) {
    std::memcpy(reinterpret_cast<void*>(in.address + static_cast<uint64_t>(r) * in.stride), s.data[t][r],
                s.colsb[t]);
  }
  s.start_row = 0;
}

// TDPB[SU][SU]D dst, a, b: for each row m of dst and dword n of it, dst[m][n]
// += the sum over k < a.colsb / 4 of the four byte products of a[m] dword k
// and b[k] dword n (signed or unsigned as named), in wrapping 32-bit adds.
void DotProduct(TileState& s, const Instruction& in, bool a_signed, bool b_signed) {
  const int dst = in.reg, a = in.rm, b = in.vvvv;
  NeedTile(s, in, dst);
  NeedTile(s, in, a);
  NeedTile(s, in, b);
  if (dst == a || dst == b || a == b) Fault("#UD: TDPB* registers alias", in.ip);
  if (s.colsb[a] % 4 != 0 || s.colsb[dst] % 4 != 0) Fault("#UD: TDPB* colsb not a multiple of 4", in.ip);
  if (s.colsb[a] / 4 != s.rows[b]) Fault("#UD: TDPB* A.colsb / 4 != B.rows", in.ip);
  if (s.colsb[dst] != s.colsb[b]) Fault("#UD: TDPB* C.colsb != B.colsb", in.ip);
  if (s.rows[dst] != s.rows[a]) Fault("#UD: TDPB* C.rows != A.rows", in.ip);
  const auto byte = [](uint8_t v, bool is_signed) {
    return is_signed ? static_cast<int32_t>(static_cast<int8_t>(v)) : static_cast<int32_t>(v);
  };
  for (int m = 0; m < s.rows[dst]; ++m) {
    for (int n = 0; n < s.colsb[dst] / 4; ++n) {
      uint32_t acc;
      std::memcpy(&acc, s.data[dst][m] + 4 * n, 4);
      for (int k = 0; k < s.colsb[a] / 4; ++k) {
        for (int i = 0; i < 4; ++i) {
          acc += static_cast<uint32_t>(byte(s.data[a][m][4 * k + i], a_signed) *
                                       byte(s.data[b][k][4 * n + i], b_signed));
        }
      }
      std::memcpy(s.data[dst][m] + 4 * n, &acc, 4);
    }
  }
  ZeroOutside(s, dst);
  s.start_row = 0;
}

void Execute(TileState& s, const Instruction& in) {
  if (in.w || in.l) Fault("#UD: AMX opcode with VEX.W1 or VEX.L1", in.ip);
  if (in.opcode != 0x5E && in.vvvv != 0) Fault("#UD: VEX.vvvv not 1111b", in.ip);
  switch (in.opcode) {
    case 0x49:
      if (in.pp == 0 && in.memory && in.reg == 0) return LoadConfig(s, in);
      if (in.pp == 1 && in.memory && in.reg == 0) return StoreConfig(s, in);
      if (in.pp == 0 && !in.memory && in.reg == 0 && in.rm == 0) {  // TILERELEASE
        s = TileState{};
        return;
      }
      if (in.pp == 3 && !in.memory && in.rm == 0) {  // TILEZERO
        NeedTile(s, in, in.reg);
        std::memset(s.data[in.reg], 0, sizeof s.data[in.reg]);
        s.start_row = 0;
        return;
      }
      break;
    case 0x4B:
      if (!in.memory || !in.sib) Fault("#UD: TILELOADD/TILESTORED without a SIB memory operand", in.ip);
      if (in.pp == 3 || in.pp == 1) return LoadTile(s, in);  // TILELOADD, TILELOADDT1
      if (in.pp == 2) return StoreTile(s, in);
      break;
    case 0x5E:
      if (in.memory) break;
      return DotProduct(s, in, /*a_signed=*/in.pp == 3 || in.pp == 2, /*b_signed=*/in.pp == 3 || in.pp == 1);
    default:
      break;
  }
  Fault("AMX instruction not emulated (BF16/FP16 dot products, or an undefined form)", in.ip);
}

void OnIllegalInstruction(int, siginfo_t*, void* context) {
  greg_t* g = static_cast<ucontext_t*>(context)->uc_mcontext.gregs;
  const auto* ip = reinterpret_cast<const uint8_t*>(g[REG_RIP]);
  Instruction in;
  if (!Decode(ip, g, &in)) {
    // Not AMX: the instruction runs again under the disposition from before.
    sigaction(SIGILL, &g_sigill_before, nullptr);
    return;
  }
  Execute(tls_tiles, in);
  g[REG_RIP] += in.length;
  g_emulated.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

bool InstallAmxTrapEmulator(std::string* why) {
  // CPUID leaf 7 EDX bit 24: AMX-TILE. Such a CPU may carry out LDTILECFG
  // while Linux keeps the tile data state from the process (TILELOADD then
  // faults): state the emulator would not see.
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) != 0 && ((d >> 24) & 1u) != 0) {
    if (why != nullptr) *why = "the CPU has AMX-TILE: its tile instructions run there, not in the emulator";
    return false;
  }
  static std::once_flag once;
  static int error = 0;
  std::call_once(once, [] {
    struct sigaction sa = {};
    sa.sa_sigaction = OnIllegalInstruction;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGILL, &sa, &g_sigill_before) != 0) error = errno;
  });
  if (error != 0) {
    if (why != nullptr) *why = std::string("sigaction(SIGILL): ") + std::strerror(error);
    return false;
  }
  return true;
}

int64_t AmxInstructionsEmulated() { return g_emulated.load(std::memory_order_relaxed); }

#else  // not x86-64 Linux with GCC

bool InstallAmxTrapEmulator(std::string* why) {
  if (why != nullptr) *why = "the AMX trap emulator needs x86-64 Linux and GCC";
  return false;
}

int64_t AmxInstructionsEmulated() { return 0; }

#endif

}  // namespace skipkv::testing
