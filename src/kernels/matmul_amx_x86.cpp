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
// One token (decode) takes an AVX-512 kernel instead (Q4KDecodeRows), which
// computes the same exact S_b and M_b and the same two fmas per superblock,
// so the result is the tiles' bit for bit (the tests hold both to one oracle).
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

#define SKIPKV_AMX_ATTR \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c,fma,amx-tile,amx-int8")))

constexpr int kGroup = 16;               // tokens per activation tile group, rows per weight tile
constexpr size_t kBlockTileBytes = 512;  // one block of a group: 8 x 64 int8

// CPUID leaf 7 sub-leaf 0, EDX bits 24 (AMX-TILE) and 25 (AMX-INT8).
bool CpuHasAmxInt8() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  return ((d >> 24) & 1u) != 0 && ((d >> 25) & 1u) != 0;
}

// What the software tiles need (every AMX CPU has it too): the one-token
// Q4_K kernel uses vpdpwssd.
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
  // tileloadd's asm (GCC's intrinsic) declares no memory input: the barrier
  // orders it after the stores that filled its source (UnpackQ4KRows' nibbles).
  static SKIPKV_AMX_ATTR inline void BlockDot(const int8_t* w, size_t w_stride, const int8_t* b, int32_t* c) {
    asm volatile("" ::: "memory");
    _tile_zero(0);
    _tile_loadd(1, w, w_stride);
    _tile_loadd(2, b, 64);
    _tile_dpbssd(0, 1, 2);
    _tile_stored(0, c, 64);
  }
  // The same with unsigned weights (TDPBUSD): w[i * w_stride + k] in 0..255.
  static SKIPKV_AMX_ATTR inline void BlockDotU8(const uint8_t* w, size_t w_stride, const int8_t* b,
                                                int32_t* c) {
    asm volatile("" ::: "memory");
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

// Writes a tile group's results: acc[i] lane t = row r + i, token 16 g + t;
// rows past m (a partial row group) and absent tokens are dropped.
SKIPKV_AMX_ATTR void StoreGroup(const MatArgs& a, const __m512* acc, int64_t g, int64_t r, int64_t m) {
  alignas(64) float out[kGroup * kGroup];
  for (int i = 0; i < kGroup; ++i) _mm512_store_ps(out + kGroup * i, acc[i]);
  const int64_t t0 = g * kGroup, tn = std::min<int64_t>(kGroup, a.n - t0);
  for (int64_t t = 0; t < tn; ++t) {
    float* yt = a.y + (t0 + t) * a.y_stride + r;
    for (int64_t i = 0; i < m; ++i) yt[i] = out[i * kGroup + t];
  }
}

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
        StoreGroup(a, acc, g, r, m);
      }
    }
  }
  Tiles::Release();
}

// Q4_K's 12 scale bytes s[0..12) -> 16 bytes: the 8 6-bit scales sc_0..7,
// then the 8 mins m_0..7 (get_scale_min_k4), four bytes at a time:
//   sc_j = s[j] & 63, m_j = s[j + 4] & 63                       (j < 4)
//   sc_j = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4               (j >= 4)
//   m_j  = (s[j + 4] >> 4) | (s[j] >> 6) << 4
// ((b >> 6) << 4 of each byte b is (word >> 2) & 0x30 bytewise.)
SKIPKV_AMX_ATTR inline __m128i ScalesMins(const uint8_t* s) {
  uint32_t w0, w1, w2;
  std::memcpy(&w0, s, 4);
  std::memcpy(&w1, s + 4, 4);
  std::memcpy(&w2, s + 8, 4);
  const uint32_t sc_lo = w0 & 0x3f3f3f3fu, m_lo = w1 & 0x3f3f3f3fu;
  const uint32_t sc_hi = (w2 & 0x0f0f0f0fu) | ((w0 >> 2) & 0x30303030u);
  const uint32_t m_hi = ((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 2) & 0x30303030u);
  return _mm_setr_epi32(static_cast<int>(sc_lo), static_cast<int>(sc_hi), static_cast<int>(m_lo),
                        static_cast<int>(m_hi));
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
      alignas(16) uint8_t sm[16];  // sc_0..7, m_0..7
      _mm_store_si128(reinterpret_cast<__m128i*>(sm), ScalesMins(blk.scales));
      const uint8_t *sc = sm, *mn = sm + 8;
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
        StoreGroup(a, acc, g, r, m);
      }
    }
  }
  Tiles::Release();
}

// The sum of the 16 int32 lanes (the masked and AVX2 forms: GCC 12 warns on
// the undefined sources of _mm512_extracti64x4_epi64 and reduce_add).
SKIPKV_AMX_ATTR inline int32_t HorizontalSum(__m512i v) {
  const __m256i h = _mm256_add_epi32(_mm512_maskz_extracti64x4_epi64(0xF, v, 0),
                                     _mm512_maskz_extracti64x4_epi64(0xF, v, 1));
  __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0x4E));
  q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0xB1));
  return _mm_cvtsi128_si32(q);
}

// One token (decode) of Q4_K rows [r0, r1) without tiles: the same exact
// S_b and M_b per superblock and the same two fmas in the same order as
// Q4KAmxRows, so the result is that of the tiles bit for bit, in 1/16 of
// their work (a one-token group wastes 15 columns of every tile). Per row
// and superblock: nibbles x quants with vpmaddubsw (|pair sum| <= 2 * 15 *
// 127), times the sub-block's scale and added with vpdpwssd, then a horizontal int32
// add; M_b with one vpmaddwd of the mins by the bsum32 values. Activations:
// token 0 of the kQ8KTiles group, gathered once per call into the order the
// nibble vectors have (low nibbles of qs[0..64): sub-blocks 0 and 2, high: 1
// and 3; qs[64..128): 4 and 6, 5 and 7). Uses no tile instruction: software
// and real tile modes run this same code.
SKIPKV_AMX_ATTR void Q4KDecodeRows(const MatArgs& a, int64_t r0, int64_t r1) {
  const int64_t nsb = a.in / kQK_K;
  // Per superblock: 4 x 64 quants (the four nibble vectors' partners), then
  // 16 int16: 8 zeros and bsum32_0..7 (lanes of the mins in ScalesMins').
  constexpr size_t kSuper = 4 * 64 + 32;
  thread_local std::vector<uint8_t> lin;
  thread_local std::vector<float> das;
  lin.resize(static_cast<size_t>(nsb) * kSuper);
  das.resize(static_cast<size_t>(nsb));
  for (int64_t b = 0; b < nsb; ++b) {
    const uint8_t* sb = a.act + static_cast<size_t>(b) * kQ8KTileSuperBytes;
    uint8_t* dst = lin.data() + static_cast<size_t>(b) * kSuper;
    for (int s = 0; s < 8; ++s) {
      uint8_t* q = dst + ((s / 4) * 2 + s % 2) * 64 + ((s / 2) % 2) * 32;            // vector, half
      for (int k = 0; k < 8; ++k) std::memcpy(q + 4 * k, sb + s * 512 + k * 64, 4);  // token 0: column 0
    }
    das[b] = reinterpret_cast<const float*>(sb + 8 * 512)[0];
    const auto* bsum = reinterpret_cast<const int16_t*>(sb + 8 * 512 + 64);
    auto* bs = reinterpret_cast<int16_t*>(dst + 4 * 64);
    for (int s = 0; s < 8; ++s) {
      bs[s] = 0;
      bs[8 + s] = bsum[((s / 2) * kGroup) * 2 + s % 2];
    }
  }
  // vpshufb controls on the 8 scales (int16) repeated in every 128-bit lane:
  // int16 lanes 0..15 take sc_a, lanes 16..31 sc_b, for the sub-block pairs
  // (a, b) of the four nibble vectors (an in-lane shuffle: cheaper than vpermw).
  __m512i pick[4];
  constexpr int kPairs[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
  for (int v = 0; v < 4; ++v) {
    const auto bytes = [](int j) { return static_cast<int16_t>(((2 * j + 1) << 8) | (2 * j)); };
    pick[v] = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(bytes(kPairs[v][0])),
                                      _mm512_set1_epi16(bytes(kPairs[v][1])));
  }
  const __m512i lo4 = _mm512_set1_epi8(0x0f);
  // Row r's superblock b as integer vectors: `sum` (16 int32 lanes adding up
  // to S_b) and `mins` (4 int32 lanes adding up to M_b).
  const auto integers = [&](int64_t r, int64_t b, __m512i & sum, __m128i & mins) SKIPKV_AMX_ATTR
      __attribute__((always_inline)) {
    const BlockQ4_K& blk =
        reinterpret_cast<const BlockQ4_K*>(a.w + static_cast<size_t>(r) * a.w_row_bytes)[b];
    const uint8_t* act = lin.data() + static_cast<size_t>(b) * kSuper;
    const __m512i q0 = _mm512_loadu_si512(blk.qs), q1 = _mm512_loadu_si512(blk.qs + 64);
    const __m512i nib[4] = {_mm512_and_si512(q0, lo4), _mm512_and_si512(_mm512_srli_epi16(q0, 4), lo4),
                            _mm512_and_si512(q1, lo4), _mm512_and_si512(_mm512_srli_epi16(q1, 4), lo4)};
    const __m256i sm16 = _mm256_cvtepu8_epi16(ScalesMins(blk.scales));  // sc_0..7, m_0..7 as int16
    const __m512i sc512 =
        _mm512_maskz_broadcast_i32x4(0xFFFF, _mm256_castsi256_si128(sm16));  // sc_0..7 a lane
    sum = _mm512_setzero_si512();
    for (int v = 0; v < 4; ++v) {
      const __m512i p = _mm512_maddubs_epi16(nib[v], _mm512_loadu_si512(act + 64 * v));
      sum = _mm512_dpwssd_epi32(sum, p, _mm512_shuffle_epi8(sc512, pick[v]));  // exact: |S_b| < 2^25
    }
    const __m256i mp =
        _mm256_madd_epi16(sm16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act + 256)));
    mins = _mm256_extracti128_si256(mp, 1);  // lanes 4..7: the mins' products (0..3 are 0)
  };
  // Rows in kParts = 4 equal parts, step i computing row i of every part, so
  // each part is read as one sequential stream (adjacent rows at once would
  // make streams that skip rows). Per superblock the four rows' S_b and M_b
  // come out of one transposing reduction ([S_0..S_3], [M_0..M_3]) and the two
  // fmas run on four lanes, lane p being row p's: per lane the same
  // operations as the scalar sequence below, so the same results bit for bit.
  constexpr int kParts = 4;
  const int64_t part = (r1 - r0) / kParts;
  // Gathers the f16 d (even int16 lanes) and dmin (odd) of four blocks: d's first.
  const __m128i split = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  for (int64_t i = 0; i < part; ++i) {
    __m128 acc = _mm_setzero_ps();
    for (int64_t b = 0; b < nsb; ++b) {
      __m128i s4[kParts], m4[kParts];
      uint32_t dpair[kParts];
      for (int p = 0; p < kParts; ++p) {
        const int64_t r = r0 + p * part + i;
        __m512i sum;
        integers(r, b, sum, m4[p]);
        const __m256i h = _mm256_add_epi32(_mm512_maskz_extracti64x4_epi64(0xF, sum, 0),
                                           _mm512_maskz_extracti64x4_epi64(0xF, sum, 1));
        s4[p] = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        std::memcpy(&dpair[p],
                    &reinterpret_cast<const BlockQ4_K*>(a.w + static_cast<size_t>(r) * a.w_row_bytes)[b].d,
                    sizeof(uint32_t));  // d, then dmin (adjacent f16 fields)
      }
      const __m128i S = _mm_hadd_epi32(_mm_hadd_epi32(s4[0], s4[1]), _mm_hadd_epi32(s4[2], s4[3]));
      const __m128i M = _mm_hadd_epi32(_mm_hadd_epi32(m4[0], m4[1]), _mm_hadd_epi32(m4[2], m4[3]));
      const __m128i halves =
          _mm_shuffle_epi8(_mm_setr_epi32(static_cast<int>(dpair[0]), static_cast<int>(dpair[1]),
                                          static_cast<int>(dpair[2]), static_cast<int>(dpair[3])),
                           split);
      const __m128 da = _mm_set1_ps(das[b]);
      const __m128 dd = _mm_mul_ps(_mm_cvtph_ps(halves), da);
      const __m128 dm = _mm_mul_ps(_mm_cvtph_ps(_mm_unpackhi_epi64(halves, halves)), da);
      acc = _mm_fmadd_ps(_mm_cvtepi32_ps(S), dd, acc);
      acc = _mm_fnmadd_ps(_mm_cvtepi32_ps(M), dm, acc);
    }
    alignas(16) float out[kParts];
    _mm_store_ps(out, acc);
    for (int p = 0; p < kParts; ++p) a.y[r0 + p * part + i] = out[p];
  }
  // The rows left over, one at a time: the scalar sequence.
  for (int64_t r = r0 + kParts * part; r < r1; ++r) {
    const auto* blocks = reinterpret_cast<const BlockQ4_K*>(a.w + static_cast<size_t>(r) * a.w_row_bytes);
    __m128 acc = _mm_setzero_ps();
    for (int64_t b = 0; b < nsb; ++b) {
      __m512i sum;
      __m128i m4;
      integers(r, b, sum, m4);
      const int32_t S = HorizontalSum(sum);
      m4 = _mm_add_epi32(m4, _mm_shuffle_epi32(m4, 0x4E));
      m4 = _mm_add_epi32(m4, _mm_shuffle_epi32(m4, 0xB1));
      const int32_t M = _mm_cvtsi128_si32(m4);
      const __m128 da = _mm_set_ss(das[b]);
      const __m128 dd = _mm_mul_ss(_mm_set_ss(_cvtsh_ss(blocks[b].d)), da);
      const __m128 dm = _mm_mul_ss(_mm_set_ss(_cvtsh_ss(blocks[b].dmin)), da);
      acc = _mm_fmadd_ss(_mm_cvtsi32_ss(_mm_setzero_ps(), S), dd, acc);
      acc = _mm_fnmadd_ss(_mm_cvtsi32_ss(_mm_setzero_ps(), M), dm, acc);
    }
    a.y[r] = _mm_cvtss_f32(acc);
  }
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
    if (why != nullptr) *why = "software tiles need AVX-512 (F, BW, VL, DQ, VNNI)";
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
  if (a.n == 1 && Q8_0AmxMode() != AmxMode::kOff) return Q4KDecodeRows(a, r0, r1);
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
