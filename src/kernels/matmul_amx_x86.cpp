// Q8_0- and Q4_K-weight products on Intel AMX (Sapphire Rapids and later): TDPBSSD
// multiplies a 16 x 32 int8 tile of weights by a 32 x 16 int8 tile of
// activations into 16 x 16 exact int32 block sums in one instruction, where
// AVX-512 VNNI needs 16 instructions and leaves 4-element lanes to add up.
//
// Numerics (the formulation, the same for every token count, tile and thread
// count, so a batch token equals its one-token decode bit for bit):
//   y[t][r] = for each 32-block b in order: acc = fma(float(isum_b), dw_b * da_b, acc)
// with isum_b the exact int32 dot product of the block's quants, dw_b the
// weight row's f16 scale as f32 and da_b the token's ActQ8 scale (activations
// quantised exactly as for the VNNI kernel). The VNNI kernel (matmul_vnni-inl.h)
// converts 4-element int32 lanes to f32 instead, so the two paths agree to
// float rounding, not bit for bit; this one is closer to the exact product.
//
// Layout: weights are read in place (a tile row is a row's 32 quants of one
// block, stride = the row's bytes). Activations are quantised once per call
// into ActFormat::kQ8Tiles: per group of 16 tokens, per block, the B tile in
// AMX's VNNI layout (8 rows of 64 bytes, B[k][4t + j] = q[token t][4k + j],
// absent tokens zero), then the group's 16 f32 scales per block.
//
// Q4_K weights (the bulk of a Q4_K_M file) take TDPBUSD (u8 x s8): a 16 x 32
// tile of unpacked nibbles (0..15) of one 32-element sub-block of 16 rows
// times the sub-block's 32 Q8_K quants of 16 tokens. Numerics, again one
// formulation for every token count, tile and thread count: activations are
// quantised to Q8_K exactly as for the AVX-512 kernel (QuantizeQ8K: d f32,
// qs in [-127, 127], bsums of 16). Per 256-superblock b of a weight row, in
// order,
//   S_b = sum_s sc_s * isum_s           (exact int32; isum_s = the exact int32
//                                        dot of sub-block s's 32 nibbles with
//                                        the token's 32 quants)
//   M_b = sum_s m_s * (bsums[2s] + bsums[2s + 1])                (exact int32)
//   acc = fma(float(S_b), d_w * d_a, acc)
//   acc = fma(float(M_b), -(dmin_w * d_a), acc)
// with sc_s, m_s the 6-bit scales and mins (get_scale_min_k4), d_w, dmin_w the
// superblock's f16 scales as f32, d_a the token's Q8_K scale; products of two
// floats are rounded to f32, float(int32) rounds to nearest even. The
// AVX-512 kernel sums in other orders (8 float lanes, a separate min
// accumulator), so the two agree to float rounding, not bit for bit.
// int32 ranges: |isum_s| <= 32 * 15 * 127 = 60,960 (also each TDPBUSD
// partial sum); |S_b| <= 8 * 63 * 60,960 = 30,723,840; |bsums[2s] +
// bsums[2s + 1]| <= 32 * 127 = 4,064 (fits int16); |M_b| <= 8 * 63 * 4,064 =
// 2,048,256: all far below 2^31.
// Layout: per 16-row group the nibbles are unpacked once (for each block of
// token groups, see Q4KAmxRows) into [superblock][sub-block][16 rows][32]
// bytes and the scales, mins, d and dmin into small tables; activations are
// ActFormat::kQ8KTiles (simd_internal.h), scattered from QuantizeQ8K's blocks.
//
// Dispatch: opt-in with SKIPKV_AMX=1 until the path has been measured and its
// tests run on an AMX machine (BENCHMARKS.md, "Intel AMX"); then on when the
// CPU has AMX-TILE and AMX-INT8, Linux grants the tile data state (arch_prctl
// ARCH_REQ_XCOMP_PERM, Linux 5.16+) and the Highway dispatch runs AVX3_DL
// (SKIPKV_SIMD caps turn it off too); both types at once. Tests may run the
// same kernels on software tiles (TDPBSSD's and TDPBUSD's definitions in
// scalar code) on any AVX-512 CPU, and
// on real tiles wherever they are usable, whatever SKIPKV_AMX says. Other
// architectures and compilers compile stubs.
#include "kernels/simd_internal.h"
#include "util/check.h"
#include "util/logging.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SKIPKV_AMX_X86 1
#include <cpuid.h>
#include <immintrin.h>
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
#include <mutex>
#include <string>
#include <vector>

namespace skipkv::kernels::internal {

#if SKIPKV_AMX_X86

namespace {

#define SKIPKV_AMX_ATTR __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c,fma,amx-tile,amx-int8")))

constexpr int kGroup = 16;             // tokens per activation tile group, rows per weight tile
constexpr size_t kBlockTileBytes = 512;  // one block of a group: 8 x 64 int8

// CPUID leaf 7 sub-leaf 0, EDX bits 24 (AMX-TILE) and 25 (AMX-INT8).
bool CpuHasAmxInt8() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  return ((d >> 24) & 1u) != 0 && ((d >> 25) & 1u) != 0;
}

bool CpuHasAvx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
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

struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// tmm0 = C (16 weight rows x 16 tokens, int32), tmm1 = A (16 weight rows x
// 32 quants), tmm2 = B (8 x 64: the group's block in VNNI layout).
struct HardTiles {
  static SKIPKV_AMX_ATTR void Configure() {
    TileConfig cfg;
    cfg.rows[0] = 16, cfg.colsb[0] = 64;
    cfg.rows[1] = 16, cfg.colsb[1] = 32;
    cfg.rows[2] = 8, cfg.colsb[2] = 64;
    _tile_loadconfig(&cfg);
  }
  static SKIPKV_AMX_ATTR void Release() { _tile_release(); }
  // c[i * 16 + t] = sum_k w[i * w_stride + k] * q[token t][k], k < 32.
  static SKIPKV_AMX_ATTR inline void BlockDot(const int8_t* w, size_t w_stride, const int8_t* b, int32_t* c) {
    _tile_zero(0);
    _tile_loadd(1, w, w_stride);
    _tile_loadd(2, b, 64);
    _tile_dpbssd(0, 1, 2);
    _tile_stored(0, c, 64);
  }
  // The same with unsigned weights (TDPBUSD): w[i * w_stride + k] in 0..255.
  static SKIPKV_AMX_ATTR inline void BlockDotU8(const uint8_t* w, size_t w_stride, const int8_t* b,
                                                int32_t* c) {
    _tile_zero(0);
    _tile_loadd(1, w, w_stride);
    _tile_loadd(2, b, 64);
    _tile_dpbusd(0, 1, 2);
    _tile_stored(0, c, 64);
  }
};

// TDPBSSD's definition in scalar code, for tests on CPUs without AMX.
struct SoftTiles {
  static void Configure() {}
  static void Release() {}
  static SKIPKV_AMX_ATTR inline void BlockDot(const int8_t* w, size_t w_stride, const int8_t* b, int32_t* c) {
    for (int i = 0; i < 16; ++i) {
      for (int t = 0; t < 16; ++t) {
        int32_t s = 0;
        for (int k = 0; k < 8; ++k) {
          for (int j = 0; j < 4; ++j) s += int32_t{w[i * w_stride + 4 * k + j]} * int32_t{b[k * 64 + 4 * t + j]};
        }
        c[i * 16 + t] = s;
      }
    }
  }
  // TDPBUSD: the weights as unsigned bytes, the activations signed.
  static SKIPKV_AMX_ATTR inline void BlockDotU8(const uint8_t* w, size_t w_stride, const int8_t* b,
                                                int32_t* c) {
    for (int i = 0; i < 16; ++i) {
      for (int t = 0; t < 16; ++t) {
        int32_t s = 0;
        for (int k = 0; k < 8; ++k) {
          for (int j = 0; j < 4; ++j)
            s += int32_t{w[i * w_stride + 4 * k + j]} * int32_t{b[k * 64 + 4 * t + j]};
        }
        c[i * 16 + t] = s;
      }
    }
  }
};

// Rows [r0, r1) x every token (see the file comment). A partial group of
// rows (fewer than 16 left) is copied into a zero-padded buffer first, so the
// weight tile never reads past the rows it was given.
template <class Tiles>
SKIPKV_AMX_ATTR void AmxRows(const MatArgs& a, int64_t r0, int64_t r1) {
  const int64_t nb = a.in / 32;
  const int64_t groups = (a.n + kGroup - 1) / kGroup;
  const size_t group_bytes = ActBytes(ActFormat::kQ8Tiles, a.in, kGroup);
  thread_local std::vector<float> dws;        // [16 rows][nb]: the weight scales as f32
  thread_local std::vector<uint8_t> padded;   // [16][w_row_bytes]: a partial row group
  dws.resize(static_cast<size_t>(kGroup * nb));
  alignas(64) int32_t c[kGroup * kGroup];
  alignas(64) float out[kGroup * kGroup];
  // Token groups in blocks of about 1 MiB of activations (they stay in L2
  // while the thread's rows pass); rows are the inner loop within a block.
  const int64_t groups_per_block = std::max<int64_t>(1, static_cast<int64_t>((size_t{1} << 20) / group_bytes));
  Tiles::Configure();
  for (int64_t gb = 0; gb < groups; gb += groups_per_block) {
    const int64_t ge = std::min(groups, gb + groups_per_block);
    for (int64_t r = r0; r < r1; r += kGroup) {
      const int64_t m = std::min<int64_t>(kGroup, r1 - r);
      const uint8_t* w = a.w + static_cast<size_t>(r) * a.w_row_bytes;
      if (m < kGroup) {
        padded.assign(kGroup * a.w_row_bytes, 0);
        std::memcpy(padded.data(), w, static_cast<size_t>(m) * a.w_row_bytes);
        w = padded.data();
      }
      for (int i = 0; i < kGroup; ++i) {
        const auto* blocks = reinterpret_cast<const BlockQ8_0*>(w + i * a.w_row_bytes);
        for (int64_t b = 0; b < nb; ++b) dws[i * nb + b] = _cvtsh_ss(blocks[b].d);
      }
      for (int64_t g = gb; g < ge; ++g) {
        const uint8_t* act = a.act + static_cast<size_t>(g) * group_bytes;
        const float* das = reinterpret_cast<const float*>(act + static_cast<size_t>(nb) * kBlockTileBytes);
        __m512 acc[kGroup];
        for (int i = 0; i < kGroup; ++i) acc[i] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
          Tiles::BlockDot(reinterpret_cast<const int8_t*>(w + b * sizeof(BlockQ8_0) + offsetof(BlockQ8_0, qs)),
                          a.w_row_bytes, reinterpret_cast<const int8_t*>(act + b * kBlockTileBytes), c);
          const __m512 da = _mm512_loadu_ps(das + b * kGroup);
          for (int i = 0; i < kGroup; ++i) {
            const __m512 s = _mm512_mul_ps(_mm512_set1_ps(dws[i * nb + b]), da);
            acc[i] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_load_si512(c + kGroup * i)), s, acc[i]);
          }
        }
        for (int i = 0; i < kGroup; ++i) _mm512_store_ps(out + kGroup * i, acc[i]);
        const int64_t t0 = g * kGroup, tn = std::min<int64_t>(kGroup, a.n - t0);
        for (int64_t t = 0; t < tn; ++t) {
          float* yt = a.y + (t0 + t) * a.y_stride + r;
          for (int64_t i = 0; i < m; ++i) yt[i] = out[i * kGroup + t];
        }
      }
    }
  }
  Tiles::Release();
}

// Q4_K's 12 scale bytes -> the 8 6-bit scales and mins (get_scale_min_k4).
void UnpackScalesMins(const uint8_t* q, uint8_t* sc, uint8_t* m) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = q[j] & 63;
    m[j] = q[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
    m[j] = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Per 16-row group of Q4_K weights, unpacked once and read by every token
// group: nib[(b * 8 + s) * 512 + i * 32 + l] = element 32 s + l of row i's
// superblock b (an A tile, stride 32); sc[(i * nsb + b) * 8 + s] the scales
// as int32; mpair[(i * nsb + b) * 4 + p] = m_{2p} | m_{2p + 1} << 16 (the
// int16 pair vpmaddwd takes); d, dmin[i * nsb + b] as f32. Rows past m
// (a partial group) are zero.
struct Q4KRowGroup {
  std::vector<uint8_t> nib;
  std::vector<int32_t> sc, mpair;
  std::vector<float> d, dmin;
};

SKIPKV_AMX_ATTR void UnpackQ4KRows(const uint8_t* w, size_t w_row_bytes, int64_t m, int64_t nsb,
                                   Q4KRowGroup& g) {
  g.nib.assign(static_cast<size_t>(nsb) * 8 * 512, 0);
  g.sc.assign(static_cast<size_t>(kGroup * nsb * 8), 0);
  g.mpair.assign(static_cast<size_t>(kGroup * nsb * 4), 0);
  g.d.assign(static_cast<size_t>(kGroup * nsb), 0.f);
  g.dmin.assign(static_cast<size_t>(kGroup * nsb), 0.f);
  const __m256i lo4 = _mm256_set1_epi8(0x0f);
  for (int64_t i = 0; i < m; ++i) {
    const auto* blocks = reinterpret_cast<const BlockQ4_K*>(w + static_cast<size_t>(i) * w_row_bytes);
    for (int64_t b = 0; b < nsb; ++b) {
      const BlockQ4_K& blk = blocks[b];
      const size_t ib = static_cast<size_t>(i * nsb + b);
      g.d[ib] = _cvtsh_ss(blk.d);
      g.dmin[ib] = _cvtsh_ss(blk.dmin);
      uint8_t sc[8], mn[8];
      UnpackScalesMins(blk.scales, sc, mn);
      for (int s = 0; s < 8; ++s) g.sc[ib * 8 + s] = sc[s];
      for (int p = 0; p < 4; ++p) g.mpair[ib * 4 + p] = int32_t{mn[2 * p]} | (int32_t{mn[2 * p + 1]} << 16);
      // 64-element chunk c: low nibbles = sub-block 2c, high nibbles = 2c + 1.
      for (int c = 0; c < 4; ++c) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * c));
        uint8_t* lo = g.nib.data() + static_cast<size_t>(b * 8 + 2 * c) * 512 + i * 32;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo), _mm256_and_si256(q, lo4));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo + 512),
                            _mm256_and_si256(_mm256_srli_epi16(q, 4), lo4));
      }
    }
  }
}

// Q4_K rows [r0, r1) x every token (see the file comment), blocked as
// AmxRows: token groups in blocks of about 1 MiB of activations, row groups
// inner, so a row group is unpacked once per block of token groups (once for
// any batch of up to 16 * floor(1 MiB / (4,416 bytes * nsb)) tokens: 624 at 1,536
// inputs).
template <class Tiles>
SKIPKV_AMX_ATTR void Q4KAmxRows(const MatArgs& a, int64_t r0, int64_t r1) {
  const int64_t nsb = a.in / kQK_K;
  const int64_t groups = (a.n + kGroup - 1) / kGroup;
  const size_t group_bytes = ActBytes(ActFormat::kQ8KTiles, a.in, kGroup);
  thread_local Q4KRowGroup rg;
  alignas(64) int32_t c[8 * kGroup * kGroup];  // [sub-block][row][token]
  alignas(64) float out[kGroup * kGroup];
  const int64_t groups_per_block =
      std::max<int64_t>(1, static_cast<int64_t>((size_t{1} << 20) / group_bytes));
  Tiles::Configure();
  for (int64_t gb = 0; gb < groups; gb += groups_per_block) {
    const int64_t ge = std::min(groups, gb + groups_per_block);
    for (int64_t r = r0; r < r1; r += kGroup) {
      const int64_t m = std::min<int64_t>(kGroup, r1 - r);
      UnpackQ4KRows(a.w + static_cast<size_t>(r) * a.w_row_bytes, a.w_row_bytes, m, nsb, rg);
      for (int64_t g = gb; g < ge; ++g) {
        const uint8_t* act = a.act + static_cast<size_t>(g) * group_bytes;
        __m512 acc[kGroup];
        for (int i = 0; i < kGroup; ++i) acc[i] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nsb; ++b) {
          const uint8_t* sb = act + static_cast<size_t>(b) * kQ8KTileSuperBytes;
          for (int s = 0; s < 8; ++s) {
            Tiles::BlockDotU8(rg.nib.data() + static_cast<size_t>(b * 8 + s) * 512, 32,
                              reinterpret_cast<const int8_t*>(sb + s * 512), c + s * kGroup * kGroup);
          }
          const __m512 da = _mm512_load_ps(reinterpret_cast<const float*>(sb + 8 * 512));
          const auto* bsum = reinterpret_cast<const __m512i*>(sb + 8 * 512 + 64);  // 4 pairs x 16 tokens
          const __m512i bs0 = _mm512_load_si512(bsum), bs1 = _mm512_load_si512(bsum + 1);
          const __m512i bs2 = _mm512_load_si512(bsum + 2), bs3 = _mm512_load_si512(bsum + 3);
          for (int i = 0; i < kGroup; ++i) {
            const size_t ib = static_cast<size_t>(i * nsb + b);
            const int32_t* sc = rg.sc.data() + ib * 8;
            __m512i sum = _mm512_setzero_si512();
            for (int s = 0; s < 8; ++s) {
              sum =
                  _mm512_add_epi32(sum, _mm512_mullo_epi32(_mm512_set1_epi32(sc[s]),
                                                           _mm512_load_si512(c + (s * kGroup + i) * kGroup)));
            }
            const int32_t* mp = rg.mpair.data() + ib * 4;
            const __m512i msum =
                _mm512_add_epi32(_mm512_add_epi32(_mm512_madd_epi16(_mm512_set1_epi32(mp[0]), bs0),
                                                  _mm512_madd_epi16(_mm512_set1_epi32(mp[1]), bs1)),
                                 _mm512_add_epi32(_mm512_madd_epi16(_mm512_set1_epi32(mp[2]), bs2),
                                                  _mm512_madd_epi16(_mm512_set1_epi32(mp[3]), bs3)));
            const __m512 dd = _mm512_mul_ps(_mm512_set1_ps(rg.d[ib]), da);
            const __m512 dm = _mm512_mul_ps(_mm512_set1_ps(rg.dmin[ib]), da);
            // fnmadd(M, dm, acc) = round(acc - M * dm) = fma(M, -dm, acc). (maskz: as AmxRows.)
            acc[i] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, sum), dd, acc[i]);
            acc[i] = _mm512_fnmadd_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, msum), dm, acc[i]);
          }
        }
        for (int i = 0; i < kGroup; ++i) _mm512_store_ps(out + kGroup * i, acc[i]);
        const int64_t t0 = g * kGroup, tn = std::min<int64_t>(kGroup, a.n - t0);
        for (int64_t t = 0; t < tn; ++t) {
          float* yt = a.y + (t0 + t) * a.y_stride + r;
          for (int64_t i = 0; i < m; ++i) yt[i] = out[i * kGroup + t];
        }
      }
    }
  }
  Tiles::Release();
}

}  // namespace

AmxMode Q8_0AmxMode() {
  const int forced = g_forced_mode.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<AmxMode>(forced) : DefaultMode();
}

bool SetAmxModeForTesting(AmxMode mode, std::string* why) {
  if (mode == AmxMode::kTiles && !AmxUnavailableReason().empty()) {
    if (why != nullptr) *why = AmxUnavailableReason();
    return false;
  }
  if (mode == AmxMode::kSoftware && !CpuHasAvx512()) {
    if (why != nullptr) *why = "software tiles need AVX-512 (F, BW, VL, DQ)";
    return false;
  }
  g_forced_mode.store(static_cast<int>(mode), std::memory_order_relaxed);
  return true;
}

void ResetAmxModeForTesting() { g_forced_mode.store(-1, std::memory_order_relaxed); }

std::string AmxStatus() {
  switch (Q8_0AmxMode()) {
    case AmxMode::kTiles:
      return "on (Q8_0, Q4_K weights)";
    case AmxMode::kSoftware:
      return "software tiles (testing; Q8_0, Q4_K weights)";
    case AmxMode::kOff: break;
  }
  if (!AmxUnavailableReason().empty()) return "off (" + AmxUnavailableReason() + ")";
  const char* env = std::getenv("SKIPKV_AMX");
  if (env == nullptr || std::strcmp(env, "1") != 0) return "off (usable here; opt in with SKIPKV_AMX=1)";
  return "off (the SIMD dispatch is not AVX3_DL)";
}

void ScatterQ8Tiles(const ActQ8* blocks, int64_t in, int64_t t, uint8_t* out) {
  const int64_t nb = in / 32;
  uint8_t* group = out + static_cast<size_t>(t / kGroup) * ActBytes(ActFormat::kQ8Tiles, in, kGroup);
  const int col = static_cast<int>(t % kGroup);
  float* scales = reinterpret_cast<float*>(group + static_cast<size_t>(nb) * kBlockTileBytes);
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* tile = group + b * kBlockTileBytes;
    for (int k = 0; k < 8; ++k) std::memcpy(tile + k * 64 + 4 * col, blocks[b].qs + 4 * k, 4);
    scales[b * kGroup + col] = blocks[b].d;
  }
}

void Q8_0AmxRows(const MatArgs& a, int64_t r0, int64_t r1) {
  SKIPKV_CHECK(a.type == DType::kQ8_0 && a.act_format == ActFormat::kQ8Tiles);
  switch (Q8_0AmxMode()) {
    case AmxMode::kTiles: return AmxRows<HardTiles>(a, r0, r1);
    case AmxMode::kSoftware: return AmxRows<SoftTiles>(a, r0, r1);
    case AmxMode::kOff: break;
  }
  SKIPKV_CHECK_MSG(false, "Q8_0AmxRows: AMX is off");
}

void ScatterQ8KTiles(const BlockQ8_K* blocks, int64_t in, int64_t t, uint8_t* out) {
  const int64_t nsb = in / kQK_K;
  uint8_t* group = out + static_cast<size_t>(t / kGroup) * ActBytes(ActFormat::kQ8KTiles, in, kGroup);
  const int col = static_cast<int>(t % kGroup);
  for (int64_t b = 0; b < nsb; ++b) {
    uint8_t* sb = group + static_cast<size_t>(b) * kQ8KTileSuperBytes;
    for (int s = 0; s < 8; ++s) {
      for (int k = 0; k < 8; ++k)
        std::memcpy(sb + s * 512 + k * 64 + 4 * col, blocks[b].qs + 32 * s + 4 * k, 4);
    }
    reinterpret_cast<float*>(sb + 8 * 512)[col] = blocks[b].d;
    auto* bsum = reinterpret_cast<int16_t*>(sb + 8 * 512 + 64);  // [pair p][token][2]
    for (int s = 0; s < 8; ++s) {
      bsum[((s / 2) * kGroup + col) * 2 + s % 2] =
          static_cast<int16_t>(blocks[b].bsums[2 * s] + blocks[b].bsums[2 * s + 1]);
    }
  }
}

void Q4_KAmxRows(const MatArgs& a, int64_t r0, int64_t r1) {
  SKIPKV_CHECK(a.type == DType::kQ4_K && a.act_format == ActFormat::kQ8KTiles);
  switch (Q8_0AmxMode()) {
    case AmxMode::kTiles:
      return Q4KAmxRows<HardTiles>(a, r0, r1);
    case AmxMode::kSoftware:
      return Q4KAmxRows<SoftTiles>(a, r0, r1);
    case AmxMode::kOff:
      break;
  }
  SKIPKV_CHECK_MSG(false, "Q4_KAmxRows: AMX is off");
}

#else  // not x86-64 with GCC: no AMX path

AmxMode Q8_0AmxMode() { return AmxMode::kOff; }
bool SetAmxModeForTesting(AmxMode mode, std::string* why) {
  if (mode == AmxMode::kOff) return true;
  if (why != nullptr) *why = "AMX is compiled only for x86-64 with GCC";
  return false;
}
void ResetAmxModeForTesting() {}
std::string AmxStatus() { return "off (not compiled for this architecture or compiler)"; }
void ScatterQ8Tiles(const ActQ8*, int64_t, int64_t, uint8_t*) {
  SKIPKV_CHECK_MSG(false, "AMX is not compiled for this architecture");
}
void Q8_0AmxRows(const MatArgs&, int64_t, int64_t) {
  SKIPKV_CHECK_MSG(false, "AMX is not compiled for this architecture");
}
void ScatterQ8KTiles(const BlockQ8_K*, int64_t, int64_t, uint8_t*) {
  SKIPKV_CHECK_MSG(false, "AMX is not compiled for this architecture");
}
void Q4_KAmxRows(const MatArgs&, int64_t, int64_t) {
  SKIPKV_CHECK_MSG(false, "AMX is not compiled for this architecture");
}

#endif

}  // namespace skipkv::kernels::internal
