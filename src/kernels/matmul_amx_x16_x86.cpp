// Batches of interleaved Q8_0, Q4_K and Q6_K weights (DType::kQ8_0x16,
// kQ4_Kx16, kQ6_Kx16) on Intel AMX tiles, computing the interleaved layouts' own formulation
// (matmul_x16-inl.h) so that the results are those of the AVX-512 VNNI, AVX2
// and scalar interleaved kernels bit for bit: turning AMX on changes no output,
// and decode (one token, always the VNNI kernel) equals a batch token.
//
// Why the interleaved layouts suit the tiles: a BlockQ8_0x16's quants,
// qs[c][4 r + k] = row r's element 4 c + k, are exactly a TDPBSSD B operand in
// AMX's VNNI layout (K / 4 = 8 rows of 64 bytes, N = 16 weight rows), loaded
// in place with stride 64; the A operand is 8 tokens' quants of the block,
// straight from their ActQ8 (or Q8_K) rows (stride = the activation row's
// bytes); C = 8 tokens x 16 weight rows of exact int32 block sums, so a C row
// is one token's 16 rows, the int32 lanes of the VNNI kernel. A Q4_Kx16
// superblock's nibbles become eight B tiles the same way once unpacked (low
// nibbles of qs[8 p .. 8 p + 7] = sub-block 2 p, high nibbles = 2 p + 1):
// nibbles 0..15 are valid signed bytes, so TDPBSSD serves both types. A
// Q6_Kx16 superblock becomes sixteen B tiles of 4 x 64 bytes, one per 16-element
// sub-block, holding q - 32 (signed bytes, -32..31), against A tiles of 16
// activation bytes (a second tile configuration); llama.cpp's AMX path, the
// issue's anchor, takes Q6_K too (it is the Q4_K_M files' ffn_down, attn_v
// and output in part).
//
// Weights in the file's layout (mapped, or SKIPKV_REPACK=0) stay off the
// tiles. An earlier path took that layout with the weights as the A operand:
// its results differed from the VNNI kernel's within rounding, its
// activations had to be scattered into tile columns, and its one-token tiles
// decoded slower than the VNNI kernel even with the tile instructions free
// (BENCHMARKS.md, "seventh session").
//
// Numerics, per weight row r and token t (the interleaved kernels' own):
//   Q8_0x16: isum_b = exact int32 (a C element); acc[b % 2] = fma(float(isum_b),
//            d_r * a.d_b, acc[b % 2]) from zero; result acc[0] + acc[1].
//   Q4_Kx16: per superblock b, sumi = sum_j sc_j[r] * isum_j and msum = sum_j
//            m_j[r] * (bsums[2 j] + bsums[2 j + 1]) (exact int32; |sumi| < 2^25);
//            acc = fma(d_r * y.d, float(sumi), acc);
//            acc = fma(-(dmin_r * y.d), float(msum), acc).
//   Q6_Kx16: per superblock b, sumi = sum_j sc_j[r] * C_j, C_j = sum of (q - 32) * y.qs
//            over sub-block j (exact int32, the VNNI kernel's sum with its bsum
//            term folded in); acc = fma(d_r * y.d, float(sumi), acc).
//
// Q4_K's scales are unpacked as int32 lanes (sumi: eight vpmulld), its mins
// as int16 pairs and the tokens' sub-block sums paired once per token block
// (msum: four vpmaddwd), as the VNNI kernel does.
//
// Scheduling: 8 tokens a tile (their two accumulator chains are 16 zmm
// registers); C is double-buffered in memory, so the tile instructions of
// block b + 1 are issued before the AVX-512 epilogue of block b (they are
// independent, and out-of-order execution overlaps them). Tokens go in
// blocks of about 1 MiB of activations, weight row groups inner, so a group
// (26 KiB of Q8_0x16 at 1,536 inputs; Q4_Kx16 unpacked once per token block)
// stays in L2 while the block's tokens pass. A last partial group of tokens
// reads a zero-padded copy of their rows, made once per call.
//
// Not yet measured on an AMX CPU (BENCHMARKS.md, issue 40): the 8-token tile,
// the 1 MiB token blocks and AmxMinTokens are first choices. Tests run the
// same code on software tiles (TDPBSSD's definition in scalar code, with the
// configured rows and column bytes) on any AVX-512 CPU, and on real tiles
// where usable.
#include "kernels/simd_internal.h"
#include "util/check.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SKIPKV_AMX_X16 1
#include <immintrin.h>
#else
#define SKIPKV_AMX_X16 0
#endif

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

namespace skipkv::kernels::internal {

namespace {
std::atomic<int64_t> g_x16_amx_calls{0};
}  // namespace

int64_t X16AmxRowsCalls() { return g_x16_amx_calls.load(std::memory_order_relaxed); }

#if SKIPKV_AMX_X16

namespace {

#define SKIPKV_AMX_X16_ATTR \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c,fma,amx-tile,amx-int8")))

constexpr int kTok = 8;    // tokens of an A and a C tile
constexpr int kRows = 16;  // weight rows of a group: C's int32 columns
// Tile registers: C, A and B of the two sets that alternate.
constexpr int kC0 = 0, kC1 = 1, kA0 = 2, kA1 = 3, kB0 = 4, kB1 = 5;

struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Shapes of the six tiles: C kTok x 64 bytes (16 int32), A kTok x 32 bytes,
// B 8 x 64 bytes.
constexpr TileConfig MakeConfig() {
  TileConfig cfg;
  for (int c : {kC0, kC1}) cfg.rows[c] = kTok, cfg.colsb[c] = 64;
  for (int a : {kA0, kA1}) cfg.rows[a] = kTok, cfg.colsb[a] = 32;
  for (int b : {kB0, kB1}) cfg.rows[b] = 8, cfg.colsb[b] = 64;
  return cfg;
}
// Q6_K's sub-blocks of 16 elements: A kTok x 16 bytes, B 4 x 64 bytes.
constexpr TileConfig MakeConfigK16() {
  TileConfig cfg = MakeConfig();
  for (int a : {kA0, kA1}) cfg.colsb[a] = 16;
  for (int b : {kB0, kB1}) cfg.rows[b] = 4;
  return cfg;
}
// Constants, not locals: GCC's _tile_loadconfig declares only the first 8
// bytes of its operand as read, so the stores of a local configuration's
// shapes could be removed as dead.
constexpr TileConfig kTileConfig = MakeConfig();
constexpr TileConfig kTileConfigK16 = MakeConfigK16();

// GCC's tile intrinsics stringify the register number, so each operation
// takes it as a template argument and names it literally. tileloadd's asm
// declares no memory input: a compiler barrier orders it after the stores
// that fill its source (the unpacked Q4_K nibbles, the padded tokens).
struct HardTiles {
  static SKIPKV_AMX_X16_ATTR void Configure(const TileConfig& cfg) { _tile_loadconfig(&cfg); }
  static SKIPKV_AMX_X16_ATTR void Release() { _tile_release(); }
  template <int T>
  static SKIPKV_AMX_X16_ATTR inline void Load(const void* p, size_t stride) {
    asm volatile("" ::: "memory");
    if constexpr (T == kA0) _tile_loadd(2, p, stride);
    if constexpr (T == kA1) _tile_loadd(3, p, stride);
    if constexpr (T == kB0) _tile_loadd(4, p, stride);
    if constexpr (T == kB1) _tile_loadd(5, p, stride);
  }
  // C = A x B from zero, stored at c (64 bytes a row).
  template <int C, int A, int B>
  static SKIPKV_AMX_X16_ATTR inline void DotInto(int32_t* c) {
    static_assert((C == kC0 && A == kA0 && B == kB0) || (C == kC1 && A == kA1 && B == kB1));
    if constexpr (C == kC0) {
      _tile_zero(0);
      _tile_dpbssd(0, 2, 4);
      _tile_stored(0, c, 64);
    } else {
      _tile_zero(1);
      _tile_dpbssd(1, 3, 5);
      _tile_stored(1, c, 64);
    }
  }
};

// The same operations on tiles in memory, from the instructions' definitions
// (TILELOADD copies rows x colsb bytes; TDPBSSD: for each row m of C and
// each dword n of it, the sum over k < colsb(A) / 4 of the 4 signed byte
// products of A[m] dword k and B[k] dword n).
struct SoftTiles {
  struct State {
    TileConfig cfg;
    alignas(64) uint8_t t[8][16 * 64];
  };
  static State& S() {
    thread_local State s;
    return s;
  }
  static void Configure(const TileConfig& cfg) { S().cfg = cfg; }
  static void Release() {}
  template <int T>
  static void Load(const void* p, size_t stride) {
    State& s = S();
    for (int r = 0; r < s.cfg.rows[T]; ++r)
      std::memcpy(s.t[T] + r * 64, static_cast<const uint8_t*>(p) + r * stride, s.cfg.colsb[T]);
  }
  template <int C, int A, int B>
  static void DotInto(int32_t* c) {
    State& s = S();
    const auto* a = reinterpret_cast<const int8_t*>(s.t[A]);
    const auto* b = reinterpret_cast<const int8_t*>(s.t[B]);
    for (int m = 0; m < s.cfg.rows[C]; ++m) {
      for (int n = 0; n < s.cfg.colsb[C] / 4; ++n) {
        int32_t sum = 0;
        for (int k = 0; k < s.cfg.colsb[A] / 4; ++k) {
          for (int j = 0; j < 4; ++j) sum += int32_t{a[m * 64 + 4 * k + j]} * int32_t{b[k * 64 + 4 * n + j]};
        }
        c[m * (s.cfg.colsb[C] / 4) + n] = sum;
      }
    }
  }
};

// int32 and f16 lanes as f32 (the masked forms: GCC 12 warns on the
// undefined sources of the plain ones).
SKIPKV_AMX_X16_ATTR inline __m512 ToFloat(__m512i v) { return _mm512_maskz_cvtepi32_ps(0xFFFF, v); }
SKIPKV_AMX_X16_ATTR inline __m512 HalvesToFloat(__m256i h) { return _mm512_maskz_cvtph_ps(0xFFFF, h); }

// Tokens of a block: about 1 MiB of activation rows, a multiple of kTok.
int64_t TokensPerBlock(size_t act_row_bytes) {
  return std::max<int64_t>(kTok, static_cast<int64_t>((size_t{1} << 20) / act_row_bytes) / kTok * kTok);
}

// The activation rows of token groups: in place, except a last group of
// fewer than kTok tokens, which reads a copy with zero rows after its last
// token (made once per call, in `pad`).
class TokenGroups {
 public:
  TokenGroups(const MatArgs& a, std::vector<uint8_t>& pad) : a_(a), full_(a.n / kTok * kTok) {
    if (full_ == a.n) return;
    pad.assign(kTok * a.act_row_bytes, 0);
    std::memcpy(pad.data(), Rows(full_), static_cast<size_t>(a.n - full_) * a.act_row_bytes);
    last_ = pad.data();
  }
  const uint8_t* operator()(int64_t t0) const { return t0 < full_ ? Rows(t0) : last_; }

 private:
  const uint8_t* Rows(int64_t t0) const { return a_.act + static_cast<size_t>(t0) * a_.act_row_bytes; }
  const MatArgs& a_;
  int64_t full_;  // tokens in whole groups
  const uint8_t* last_ = nullptr;
};

// Writes acc[t] (row r .. r + 15 of token t0 + t) for the tokens that exist.
SKIPKV_AMX_X16_ATTR void StoreTokens(const MatArgs& a, const __m512* acc, int64_t t0, int64_t r) {
  const int64_t nt = std::min<int64_t>(kTok, a.n - t0);
  for (int64_t t = 0; t < nt; ++t) _mm512_storeu_ps(a.y + (t0 + t) * a.y_stride + r, acc[t]);
}

// ---- Q8_0x16 ----

// kTok tokens (rows `act`, stride s) x one 16-row group `w` of nb blocks.
template <class Tiles>
SKIPKV_AMX_X16_ATTR void Q8GroupTokens(const BlockQ8_0x16* w, int64_t nb, const uint8_t* act, size_t s,
                                       __m512* out) {
  alignas(64) int32_t c[2][kTok * kRows];
  __m512 acc[kTok][2];
  for (int t = 0; t < kTok; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
  const auto qs = [&](int64_t b) { return act + b * sizeof(ActQ8) + offsetof(ActQ8, qs); };
  const auto finish = [&](int64_t b, const int32_t* cb) SKIPKV_AMX_X16_ATTR __attribute__((always_inline)) {
    const __m512 d = HalvesToFloat(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].d)));
    for (int t = 0; t < kTok; ++t) {
      float da;
      std::memcpy(&da, act + t * s + b * sizeof(ActQ8) + offsetof(ActQ8, d), sizeof da);
      acc[t][b % 2] = _mm512_fmadd_ps(ToFloat(_mm512_load_si512(cb + kRows * t)),
                                      _mm512_mul_ps(d, _mm512_set1_ps(da)), acc[t][b % 2]);
    }
  };
  Tiles::template Load<kA0>(qs(0), s);
  Tiles::template Load<kB0>(w[0].qs, 64);
  Tiles::template DotInto<kC0, kA0, kB0>(c[0]);
  for (int64_t b = 0; b < nb; b += 2) {
    if (b + 1 < nb) {
      Tiles::template Load<kA1>(qs(b + 1), s);
      Tiles::template Load<kB1>(w[b + 1].qs, 64);
      Tiles::template DotInto<kC1, kA1, kB1>(c[1]);
    }
    finish(b, c[0]);
    if (b + 1 < nb) {
      if (b + 2 < nb) {
        Tiles::template Load<kA0>(qs(b + 2), s);
        Tiles::template Load<kB0>(w[b + 2].qs, 64);
        Tiles::template DotInto<kC0, kA0, kB0>(c[0]);
      }
      finish(b + 1, c[1]);
    }
  }
  for (int t = 0; t < kTok; ++t) out[t] = _mm512_add_ps(acc[t][0], acc[t][1]);
}

template <class Tiles>
SKIPKV_AMX_X16_ATTR void Q8X16Rows(const MatArgs& a, int64_t r0, int64_t r1) {
  const int64_t nb = a.in / 32;
  const int64_t per_block = TokensPerBlock(a.act_row_bytes);
  thread_local std::vector<uint8_t> pad;
  const TokenGroups groups(a, pad);
  Tiles::Configure(kTileConfig);
  for (int64_t tb = 0; tb < a.n; tb += per_block) {
    const int64_t te = std::min(a.n, tb + per_block);
    for (int64_t r = r0; r < r1; r += kRows) {
      const auto* w = reinterpret_cast<const BlockQ8_0x16*>(a.w + static_cast<size_t>(r) * a.w_row_bytes);
      for (int64_t t0 = tb; t0 < te; t0 += kTok) {
        __m512 acc[kTok];
        Q8GroupTokens<Tiles>(w, nb, groups(t0), a.act_row_bytes, acc);
        StoreTokens(a, acc, t0, r);
      }
    }
  }
  Tiles::Release();
}

// ---- Q4_Kx16 ----

// One 16-row group, unpacked for the tiles: per superblock b and sub-block j
// the B tile nib[(8 b + j) * 512 ..] (8 x 64 bytes, nibbles 0..15); the
// rows' scales as int32 lanes sc[(8 b + j) * 16 + r]; their mins as int16
// pairs mpair[(4 b + p) * 16 + r] = m_{2p} | m_{2p+1} << 16 (what vpmaddwd
// takes); d, dmin[16 b + r] as f32.
struct Q4KGroup {
  std::vector<uint8_t> nib;
  std::vector<int32_t> sc, mpair;
  std::vector<float> d, dmin;
};

// Sub-block j's 6-bit values of the 16 rows as int32 lanes, from the low
// bits `lo` ([j / 2][r], bits 4 (j % 2) ..) and the top bits `hi` ([r], bits
// 2 j, 2 j + 1) of BlockQ4_Kx16 (tensor/dtype.h). (Masked forms throughout: see ToFloat.)
constexpr __mmask16 kAll = 0xFFFF;
SKIPKV_AMX_X16_ATTR inline __m512i SixBit(const uint8_t* lo, const uint16_t* hi, int j) {
  const __m512i l = _mm512_maskz_cvtepu8_epi32(
      kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo + (j / 2) * kRows)));
  const __m512i h =
      _mm512_maskz_cvtepu16_epi32(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi)));
  const __m512i low4 =
      _mm512_and_si512(_mm512_maskz_srli_epi32(kAll, l, 4 * (j % 2)), _mm512_set1_epi32(0x0f));
  const __m512i top2 = _mm512_and_si512(_mm512_maskz_srli_epi32(kAll, h, 2 * j), _mm512_set1_epi32(3));
  return _mm512_or_si512(low4, _mm512_maskz_slli_epi32(kAll, top2, 4));
}

SKIPKV_AMX_X16_ATTR void UnpackQ4KGroup(const BlockQ4_Kx16* w, int64_t nsb, Q4KGroup& g) {
  g.nib.resize(static_cast<size_t>(nsb) * 8 * 512);
  g.sc.resize(static_cast<size_t>(nsb) * 8 * kRows);
  g.mpair.resize(static_cast<size_t>(nsb) * 4 * kRows);
  g.d.resize(static_cast<size_t>(nsb) * kRows);
  g.dmin.resize(static_cast<size_t>(nsb) * kRows);
  const __m512i lo4 = _mm512_set1_epi8(0x0f);
  for (int64_t b = 0; b < nsb; ++b) {
    const BlockQ4_Kx16& x = w[b];
    for (int p = 0; p < 4; ++p) {
      uint8_t* lo = g.nib.data() + static_cast<size_t>(8 * b + 2 * p) * 512;
      for (int c = 0; c < 8; ++c) {
        const __m512i v = _mm512_loadu_si512(x.qs[8 * p + c]);
        _mm512_storeu_si512(lo + 64 * c, _mm512_and_si512(v, lo4));
        _mm512_storeu_si512(lo + 512 + 64 * c, _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4));
      }
    }
    for (int j = 0; j < 8; ++j) {
      _mm512_storeu_si512(g.sc.data() + static_cast<size_t>(8 * b + j) * kRows, SixBit(x.sc_lo, x.sc_hi, j));
    }
    for (int p = 0; p < 4; ++p) {
      const __m512i pair =
          _mm512_or_si512(SixBit(x.m_lo, x.m_hi, 2 * p),
                          _mm512_maskz_slli_epi32(kAll, SixBit(x.m_lo, x.m_hi, 2 * p + 1), 16));
      _mm512_storeu_si512(g.mpair.data() + static_cast<size_t>(4 * b + p) * kRows, pair);
    }
    _mm512_storeu_ps(g.d.data() + kRows * b,
                     HalvesToFloat(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.d))));
    _mm512_storeu_ps(g.dmin.data() + kRows * b,
                     HalvesToFloat(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.dmin))));
  }
}

// Per token and superblock its d and its sub-block sum pairs (Q8KBsumPairs),
// for the kTok-token groups of a token block, t counted from the block's
// first token; rows past the last token are zero.
struct TokenSums {
  std::vector<float> d;        // [t][b]
  std::vector<int32_t> pairs;  // [t][4 b + p]
  int64_t nsb = 0;
  float D(int64_t t, int64_t b) const { return d[static_cast<size_t>(t * nsb + b)]; }
  const int32_t* Pairs(int64_t t, int64_t b) const { return pairs.data() + 4 * (t * nsb + b); }
};

void FillTokenSums(const MatArgs& a, int64_t tb, int64_t te, int64_t nsb, TokenSums& ts) {
  const auto padded = static_cast<size_t>((te - tb + kTok - 1) / kTok * kTok * nsb);
  ts.nsb = nsb;
  ts.d.assign(padded, 0.f);
  ts.pairs.assign(4 * padded, 0);
  for (int64_t t = tb; t < te; ++t) {
    const auto* y = reinterpret_cast<const BlockQ8_K*>(a.act + static_cast<size_t>(t) * a.act_row_bytes);
    for (int64_t b = 0; b < nsb; ++b) ts.d[static_cast<size_t>((t - tb) * nsb + b)] = y[b].d;
    Q8KBsumPairs(y, nsb, ts.pairs.data() + 4 * (t - tb) * nsb);
  }
}

// The tile products of one superblock's kSub sub-blocks: C tile cb[j] = the
// kTok tokens' A bytes at a + a_bytes * j (stride s) x the unpacked B tile at
// b + b_bytes * j (stride 64), the two tile sets by turns.
template <class Tiles, int kSub>
SKIPKV_AMX_X16_ATTR inline void IssueSubBlocks(const uint8_t* a, size_t s, int a_bytes, const void* b,
                                               int b_bytes, int32_t (*cb)[kTok * kRows]) {
  const auto* bb = static_cast<const uint8_t*>(b);
  for (int j = 0; j < kSub; j += 2) {
    Tiles::template Load<kA0>(a + a_bytes * j, s);
    Tiles::template Load<kB0>(bb + b_bytes * j, 64);
    Tiles::template DotInto<kC0, kA0, kB0>(cb[j]);
    Tiles::template Load<kA1>(a + a_bytes * (j + 1), s);
    Tiles::template Load<kB1>(bb + b_bytes * (j + 1), 64);
    Tiles::template DotInto<kC1, kA1, kB1>(cb[j + 1]);
  }
}

// kTok tokens (Q8_K rows `act`, stride s; their sums: `ts` from t_in_block) x one unpacked
// group of nsb superblocks.
template <class Tiles>
SKIPKV_AMX_X16_ATTR void Q4KGroupTokens(const Q4KGroup& g, int64_t nsb, const uint8_t* act, size_t s,
                                        const TokenSums& ts, int64_t t_in_block, __m512* acc) {
  alignas(64) int32_t c[2][8][kTok * kRows];  // [superblock % 2][sub-block][token][row]
  for (int t = 0; t < kTok; ++t) acc[t] = _mm512_setzero_ps();
  const auto issue = [&](int64_t b) SKIPKV_AMX_X16_ATTR __attribute__((always_inline)) {
    IssueSubBlocks<Tiles, 8>(act + b * sizeof(BlockQ8_K) + offsetof(BlockQ8_K, qs), s, 32,
                             g.nib.data() + static_cast<size_t>(8 * b) * 512, 512, c[b % 2]);
  };
  const auto finish = [&](int64_t b) SKIPKV_AMX_X16_ATTR __attribute__((always_inline)) {
    const int32_t(*cb)[kTok * kRows] = c[b % 2];
    const __m512 d = _mm512_loadu_ps(g.d.data() + kRows * b),
                 dmin = _mm512_loadu_ps(g.dmin.data() + kRows * b);
    const int32_t* sc = g.sc.data() + static_cast<size_t>(8 * b) * kRows;
    const int32_t* mp = g.mpair.data() + static_cast<size_t>(4 * b) * kRows;
    __m512i sc_j[8], mp_p[4];
    for (int j = 0; j < 8; ++j) sc_j[j] = _mm512_loadu_si512(sc + kRows * j);
    for (int p = 0; p < 4; ++p) mp_p[p] = _mm512_loadu_si512(mp + kRows * p);
    for (int t = 0; t < kTok; ++t) {
      const int32_t* pairs = ts.Pairs(t_in_block + t, b);
      __m512i sumi = _mm512_mullo_epi32(sc_j[0], _mm512_load_si512(cb[0] + kRows * t));
      for (int j = 1; j < 8; ++j) {
        sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(sc_j[j], _mm512_load_si512(cb[j] + kRows * t)));
      }
      __m512i msum = _mm512_madd_epi16(mp_p[0], _mm512_set1_epi32(pairs[0]));
      for (int p = 1; p < 4; ++p)
        msum = _mm512_add_epi32(msum, _mm512_madd_epi16(mp_p[p], _mm512_set1_epi32(pairs[p])));
      const __m512 yd = _mm512_set1_ps(ts.D(t_in_block + t, b));
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, yd), ToFloat(sumi), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, yd), ToFloat(msum), acc[t]);
    }
  };
  issue(0);
  for (int64_t b = 0; b < nsb; ++b) {
    if (b + 1 < nsb) issue(b + 1);
    finish(b);
  }
}

// Rows [r0, r1) of a superblock type (Q4_Kx16, Q6_Kx16) on tiles shaped by
// `cfg`: tokens in blocks of about 1 MiB, row groups inner, each group
// unpacked once per token block. Per token block begin_block(tb, te); per
// group unpack(its first block); per kTok tokens from t0
// group_tokens(their activation rows, t0 - tb, acc).
template <class Tiles, class BeginBlock, class Unpack, class GroupTokens>
SKIPKV_AMX_X16_ATTR void SuperblockRows(const MatArgs& a, int64_t r0, int64_t r1, const TileConfig& cfg,
                                        BeginBlock begin_block, Unpack unpack, GroupTokens group_tokens) {
  const int64_t per_block = TokensPerBlock(a.act_row_bytes);
  thread_local std::vector<uint8_t> pad;
  const TokenGroups groups(a, pad);
  Tiles::Configure(cfg);
  for (int64_t tb = 0; tb < a.n; tb += per_block) {
    const int64_t te = std::min(a.n, tb + per_block);
    begin_block(tb, te);
    for (int64_t r = r0; r < r1; r += kRows) {
      unpack(a.w + static_cast<size_t>(r) * a.w_row_bytes);
      for (int64_t t0 = tb; t0 < te; t0 += kTok) {
        __m512 acc[kTok];
        group_tokens(groups(t0), t0 - tb, acc);
        StoreTokens(a, acc, t0, r);
      }
    }
  }
  Tiles::Release();
}

template <class Tiles>
SKIPKV_AMX_X16_ATTR void Q4KX16Rows(const MatArgs& a, int64_t r0, int64_t r1) {
  const int64_t nsb = a.in / kQK_K;
  thread_local Q4KGroup g;
  thread_local TokenSums ts;
  SuperblockRows<Tiles>(
      a, r0, r1, kTileConfig, [&](int64_t tb, int64_t te) { FillTokenSums(a, tb, te, nsb, ts); },
      [&](const uint8_t* w)
          SKIPKV_AMX_X16_ATTR { UnpackQ4KGroup(reinterpret_cast<const BlockQ4_Kx16*>(w), nsb, g); },
      [&](const uint8_t* act, int64_t t_in_block, __m512* acc)
          SKIPKV_AMX_X16_ATTR { Q4KGroupTokens<Tiles>(g, nsb, act, a.act_row_bytes, ts, t_in_block, acc); });
}

// ---- Q6_Kx16 ----

// One 16-row group, unpacked for the tiles: per superblock b and sub-block j
// (16 elements) the B tile q[(16 b + j) * 256 ..] (4 x 64 bytes: row k4,
// byte 4 r + k = q - 32 of row r's element 16 j + 4 k4 + k, a signed byte in
// -32..31); the rows' scales as int32 lanes sc[(16 b + j) * 16 + r]; d[16 b + r]
// as f32. With q - 32 in the tile, C_j is the sub-block's whole integer sum
// (the VNNI kernel's sum minus 32 bsums), so no bsum term is needed.
struct Q6KGroup {
  std::vector<int8_t> q;
  std::vector<int32_t> sc;
  std::vector<float> d;
};

SKIPKV_AMX_X16_ATTR void UnpackQ6KGroup(const BlockQ6_Kx16* w, int64_t nsb, Q6KGroup& g) {
  g.q.resize(static_cast<size_t>(nsb) * 16 * 256);
  g.sc.resize(static_cast<size_t>(nsb) * 16 * kRows);
  g.d.resize(static_cast<size_t>(nsb) * kRows);
  const __m512i lo4 = _mm512_set1_epi8(0x0f), top = _mm512_set1_epi8(0x30), off = _mm512_set1_epi8(32);
  for (int64_t b = 0; b < nsb; ++b) {
    const BlockQ6_Kx16& x = w[b];
    for (int h = 0; h < 2; ++h) {
      for (int c = 0; c < 8; ++c) {
        // Chunk (h, c): q of e + 32 i, e = 128 h + 4 c + k, is sub-block 8 h + 2 i + c / 4, tile row c % 4
        // (tensor/dtype.h; the 16-bit shifts move bits across bytes only into bits the masks clear).
        const __m512i x0 = _mm512_loadu_si512(x.qs[h][c][0]), x1 = _mm512_loadu_si512(x.qs[h][c][1]);
        const __m512i xh = _mm512_loadu_si512(x.qs[h][c][2]);
        const __m512i q[4] = {
            _mm512_or_si512(_mm512_and_si512(x0, lo4), _mm512_and_si512(_mm512_slli_epi16(xh, 4), top)),
            _mm512_or_si512(_mm512_and_si512(x1, lo4), _mm512_and_si512(_mm512_slli_epi16(xh, 2), top)),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(x0, 4), lo4), _mm512_and_si512(xh, top)),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(x1, 4), lo4),
                            _mm512_and_si512(_mm512_srli_epi16(xh, 2), top))};
        for (int i = 0; i < 4; ++i) {
          const int j = 8 * h + 2 * i + c / 4;
          _mm512_storeu_si512(g.q.data() + static_cast<size_t>(16 * b + j) * 256 + 64 * (c % 4),
                              _mm512_sub_epi8(q[i], off));
        }
      }
    }
    for (int j = 0; j < 16; ++j) {
      _mm512_storeu_si512(
          g.sc.data() + static_cast<size_t>(16 * b + j) * kRows,
          _mm512_maskz_cvtepi8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.sc[j]))));
    }
    _mm512_storeu_ps(g.d.data() + kRows * b,
                     HalvesToFloat(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.d))));
  }
}

// kTok tokens (Q8_K rows `act`, stride s) x one unpacked group of nsb superblocks.
template <class Tiles>
SKIPKV_AMX_X16_ATTR void Q6KGroupTokens(const Q6KGroup& g, int64_t nsb, const uint8_t* act, size_t s,
                                        __m512* acc) {
  alignas(64) int32_t c[2][16][kTok * kRows];  // [superblock % 2][sub-block][token][row]
  for (int t = 0; t < kTok; ++t) acc[t] = _mm512_setzero_ps();
  const auto issue = [&](int64_t b) SKIPKV_AMX_X16_ATTR __attribute__((always_inline)) {
    IssueSubBlocks<Tiles, 16>(act + b * sizeof(BlockQ8_K) + offsetof(BlockQ8_K, qs), s, 16,
                              g.q.data() + static_cast<size_t>(16 * b) * 256, 256, c[b % 2]);
  };
  const auto finish = [&](int64_t b) SKIPKV_AMX_X16_ATTR __attribute__((always_inline)) {
    const int32_t(*cb)[kTok * kRows] = c[b % 2];
    const __m512 d = _mm512_loadu_ps(g.d.data() + kRows * b);
    const int32_t* sc = g.sc.data() + static_cast<size_t>(16 * b) * kRows;
    for (int t = 0; t < kTok; ++t) {
      __m512i sumi = _mm512_mullo_epi32(_mm512_loadu_si512(sc), _mm512_load_si512(cb[0] + kRows * t));
      for (int j = 1; j < 16; ++j) {
        sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(_mm512_loadu_si512(sc + kRows * j),
                                                         _mm512_load_si512(cb[j] + kRows * t)));
      }
      float yd;
      std::memcpy(&yd, act + t * s + b * sizeof(BlockQ8_K) + offsetof(BlockQ8_K, d), sizeof yd);
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(yd)), ToFloat(sumi), acc[t]);
    }
  };
  issue(0);
  for (int64_t b = 0; b < nsb; ++b) {
    if (b + 1 < nsb) issue(b + 1);
    finish(b);
  }
}

template <class Tiles>
SKIPKV_AMX_X16_ATTR void Q6KX16Rows(const MatArgs& a, int64_t r0, int64_t r1) {
  const int64_t nsb = a.in / kQK_K;
  thread_local Q6KGroup g;
  SuperblockRows<Tiles>(
      a, r0, r1, kTileConfigK16, [](int64_t, int64_t) {},
      [&](const uint8_t* w)
          SKIPKV_AMX_X16_ATTR { UnpackQ6KGroup(reinterpret_cast<const BlockQ6_Kx16*>(w), nsb, g); },
      [&](const uint8_t* act, int64_t, __m512* acc)
          SKIPKV_AMX_X16_ATTR { Q6KGroupTokens<Tiles>(g, nsb, act, a.act_row_bytes, acc); });
}

}  // namespace

void X16AmxRows(const MatArgs& a, int64_t r0, int64_t r1) {
  SKIPKV_CHECK_MSG(r0 % kRows == 0 && r1 % kRows == 0, "X16AmxRows: rows split inside a group");
  const AmxMode mode = AmxTileMode();
  SKIPKV_CHECK_MSG(mode != AmxMode::kOff, "X16AmxRows: AMX is off");
  const bool tiles = mode == AmxMode::kTiles;
  g_x16_amx_calls.fetch_add(1, std::memory_order_relaxed);
  if (a.type == DType::kQ8_0x16 && a.act_format == ActFormat::kQ8) {
    return tiles ? Q8X16Rows<HardTiles>(a, r0, r1) : Q8X16Rows<SoftTiles>(a, r0, r1);
  }
  if (a.type == DType::kQ4_Kx16 && a.act_format == ActFormat::kQ8K) {
    return tiles ? Q4KX16Rows<HardTiles>(a, r0, r1) : Q4KX16Rows<SoftTiles>(a, r0, r1);
  }
  if (a.type == DType::kQ6_Kx16 && a.act_format == ActFormat::kQ8K) {
    return tiles ? Q6KX16Rows<HardTiles>(a, r0, r1) : Q6KX16Rows<SoftTiles>(a, r0, r1);
  }
  SKIPKV_CHECK_MSG(false, "X16AmxRows: not an interleaved Q8_0 / Q4_K / Q6_K product with its activations");
}

#else  // not x86-64 with GCC

void X16AmxRows(const MatArgs&, int64_t, int64_t) {
  SKIPKV_CHECK_MSG(false, "AMX is not compiled for this architecture");
}

#endif

}  // namespace skipkv::kernels::internal
