// Internal interface between ops.cpp (threading, scratch, dispatch) and the
// per-target Highway kernels (matmul.cpp with matmul_body-inl.h, attention.cpp, elementwise.cpp).
// Nothing here is part of the public kernel API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kernels/ops.h"
#include "tensor/dtype.h"
#include "util/check.h"

// Fully unrolls a loop over a small compile-time tile dimension (tokens,
// rows, queries) so arrays of SIMD accumulators stay in registers; without it
// GCC keeps them on the stack and every FMA waits on a store-to-load forward.
#define SKIPKV_UNROLL _Pragma("GCC unroll 16")

namespace skipkv::kernels::internal {

// Activation block for Q8_0 / Q4_0 weights: like ggml's block_q8_0 but with
// an f32 scale (no f16 rounding of the activation scale).
// value = qs[i] * d, qs in [-127, 127] (never -128: the sign trick needs it).
struct ActQ8 {
  float d;
  int8_t qs[32];
};
static_assert(sizeof(ActQ8) == 36);

// The activation format the SIMD matmul of weight type t consumes (kBF16:
// `in` bf16 values, for BF16 weights where Bf16DotActive(); kQ8Wide: Q8_0
// batches where Q8WideActive(); both chosen in ops.cpp).
enum class ActFormat { kF32, kQ8, kQ8K, kBF16, kQ8Wide };
constexpr int kNumActFormats = static_cast<int>(ActFormat::kQ8Wide) + 1;

// kQ8Wide: the ActQ8 blocks of a token, widened to int16 for the AVX2/AVX3
// Q8_0 batch kernel (two vpmaddwd per block instead of vpsignb, vpmaddubsw
// and vpmaddwd). One token's row: the nb block scales (f32, the ActQ8 d),
// padded to 64 bytes, then per block its 32 quants as int16, the 16
// even-indexed ones (qs[0], qs[2], ...) and then the 16 odd-indexed ones.
// Same values as ActQ8: the kernel's int32 lanes, and so its results, are
// bit-identical to the ActQ8 kernel's.
inline size_t ActQ8WideScaleBytes(int64_t nb) { return (static_cast<size_t>(nb) * sizeof(float) + 63) / 64 * 64; }
inline ActFormat ActFormatFor(DType t) {
  switch (t) {
    case DType::kQ8_0:
    case DType::kQ8_0x16:
    case DType::kQ4_0:
      return ActFormat::kQ8;
    case DType::kQ4_K:
    case DType::kQ4_Kx16:
    case DType::kQ6_K:
    case DType::kQ6_Kx16:
      return ActFormat::kQ8K;
    default:
      return ActFormat::kF32;
  }
}
// Bytes of one token's activations of `in` elements in format f.
inline size_t ActRowBytes(ActFormat f, int64_t in) {
  switch (f) {
    case ActFormat::kQ8:
      return static_cast<size_t>(in / 32) * sizeof(ActQ8);
    case ActFormat::kQ8K:
      return static_cast<size_t>(in / kQK_K) * sizeof(BlockQ8_K);
    case ActFormat::kBF16:
      return static_cast<size_t>(in) * sizeof(uint16_t);
    case ActFormat::kQ8Wide:
      return ActQ8WideScaleBytes(in / 32) + static_cast<size_t>(in) * sizeof(int16_t);
    default:
      return static_cast<size_t>(in) * sizeof(float);
  }
}

// A Q8_K token's sub-block sum pairs of each superblock as 4 dwords: dword p
// = (bs32_{2p}, bs32_{2p+1}) as int16, bs32_j = bsums[2j] + bsums[2j+1]
// (|bs32_j| <= 32 * 128: exact in int16); pairs[4 b + p]. What the
// interleaved Q4_K kernels (VNNI and AMX) multiply the mins by with vpmaddwd.
inline void Q8KBsumPairs(const BlockQ8_K* y, int64_t nb, int32_t* pairs) {
  for (int64_t b = 0; b < nb; ++b) {
    for (int p = 0; p < 4; ++p) {
      const auto lo = static_cast<uint16_t>(y[b].bsums[4 * p] + y[b].bsums[4 * p + 1]);
      const auto hi = static_cast<uint16_t>(y[b].bsums[4 * p + 2] + y[b].bsums[4 * p + 3]);
      pairs[4 * b + p] = static_cast<int32_t>(static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16));
    }
  }
}

// Bytes of n tokens' activations in format f.
inline size_t ActBytes(ActFormat f, int64_t in, int64_t n) {
  return ActRowBytes(f, in) * static_cast<size_t>(n);
}

// One matmul: Y[t][r] = dot(W row r, X[t]) for t < n, r in a row range.
struct MatArgs {
  DType type;
  const uint8_t* w;     // row r at w + r * w_row_bytes
  size_t w_row_bytes;
  int64_t in;           // elements per row
  const uint8_t* act;   // token t at act + t * act_row_bytes (format ActFormatFor(type))
  size_t act_row_bytes;
  int64_t n;            // tokens
  ActFormat act_format;  // of `act`: ActFormatFor(type), or kBF16 / kQ8Wide (see ActFormat)
  float* y;             // Y[t][r] at y[t * y_stride + r]
  int64_t y_stride;
};

// The pointers of rows [first, first + N) of a row-major byte array whose rows
// are `stride` bytes apart, as rows of T: a tile's weight or activation rows.
template <class T, int N>
inline void RowPointers(const uint8_t* base, size_t stride, int64_t first, const T* (&rows)[N]) {
  SKIPKV_UNROLL
  for (int i = 0; i < N; ++i) rows[i] = reinterpret_cast<const T*>(base + static_cast<size_t>(first + i) * stride);
}
// Stores a tile's results, out[i * NT + t] for weight row r + i and token
// t0 + t, into Y[t0 + t][r + i].
template <int NR, int NT>
inline void StoreTile(const MatArgs& a, int64_t r, int64_t t0, const float* out) {
  SKIPKV_UNROLL
  for (int i = 0; i < NR; ++i) {
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) a.y[(t0 + t) * a.y_stride + r + i] = out[i * NT + t];
  }
}

// Cache blocking of a batch's rows [r0, r1) x all tokens: fn(rb, re, tb, te)
// computes rows [rb, re) x tokens [tb, te). Tokens go in blocks whose
// activations fit in part of L1 (a multiple of `tile`, the kernel's token
// tile, at least one tile), so every row of a slice reads them from L1; rows
// go in slices whose weights fit in part of L2, so the slice stays there while
// its token blocks pass. Every (row, token) result is computed the same way
// whatever the blocking: it only orders independent work.
// Sizes: 24 KiB fits the L1d of every x86 target (32 KiB Zen 4, 48 KiB Zen 5
// and Ice Lake or later) beside the tile's weights; 384 KiB is under half of
// a 1 MiB L2. Before this, tokens went in fixed blocks of 32 over all of a
// thread's rows: Q4_K activations at 1,536 inputs (1.7 KiB a token) spilled
// L1 and a 128-token batch streamed the weights 4 times (Q6_K 332 -> 493,
// AVX2 F16 86 -> 125 GFLOP/s at n = 128, BENCHMARKS.md).
// Row slices are a multiple of `row_multiple` (a multiple of the kernel's row
// tile, so a slice leaves no rows for slower one-row tiles).
// Every row slice passes over all the batch's activations, so they are read
// once a slice: from the last-level cache while they fit there
// (kCachedActBytes), from memory beyond. Larger batches go in token groups
// of kGroupActBytes, all row slices over one group before the next (the
// weights are then read once a group): the FFN down projection's f32
// activations at 8,960 inputs and 512 tokens are 17.5 MiB, and F16 1536 x
// 8960 at n = 512 on Zen 5 (AVX2, 1 / 2 threads) went from 83 / 144 to 94 /
// 175 GFLOP/s, while at n = 128 (4.4 MiB, one group) groups of 2 MiB would
// cost 3 % (BENCHMARKS.md, "token groups").
inline constexpr size_t kCachedActBytes = size_t{8} << 20, kGroupActBytes = size_t{2} << 20;
template <class Fn>
inline void ForEachCacheBlock(const MatArgs& a, int64_t r0, int64_t r1, int64_t tile, Fn&& fn,
                              int64_t row_multiple = 8) {
  constexpr size_t kL1ActBytes = 24 << 10, kL2WeightBytes = 384 << 10;
  int64_t tok = static_cast<int64_t>(kL1ActBytes / a.act_row_bytes) / tile * tile;
  tok = tok < tile ? tile : (tok > 64 ? 64 : tok);
  int64_t rows = static_cast<int64_t>(kL2WeightBytes / a.w_row_bytes);
  rows = rows < row_multiple ? row_multiple : rows / row_multiple * row_multiple;
  if (a.n <= tok) rows = r1 - r0;  // one token block: nothing to keep in L2
  int64_t group = a.n;
  if (static_cast<size_t>(a.n) * a.act_row_bytes > kCachedActBytes) {
    group = static_cast<int64_t>(kGroupActBytes / a.act_row_bytes) / tok * tok;
    if (group < tok) group = tok;
  }
  for (int64_t gb = 0; gb < a.n; gb += group) {
    const int64_t ge = gb + group < a.n ? gb + group : a.n;
    for (int64_t rb = r0; rb < r1; rb += rows) {
      const int64_t re = rb + rows < r1 ? rb + rows : r1;
      for (int64_t tb = gb; tb < ge; tb += tok) fn(rb, re, tb, tb + tok < ge ? tb + tok : ge);
    }
  }
}

// Calls fn(std::integral_constant<int, nt>) for a token count 1 <= nt <= kMax <= 4.
template <int kMax, class Fn>
inline void WithTileTokens(int64_t nt, Fn&& fn) {
  SKIPKV_DCHECK(nt >= 1 && nt <= kMax);
  if constexpr (kMax >= 4) {
    if (nt == 4) return fn(std::integral_constant<int, 4>{});
  }
  if constexpr (kMax >= 3) {
    if (nt == 3) return fn(std::integral_constant<int, 3>{});
  }
  if constexpr (kMax >= 2) {
    if (nt == 2) return fn(std::integral_constant<int, 2>{});
  }
  fn(std::integral_constant<int, 1>{});
}

// Half of the smallest L1d of the x86 targets (32 KiB, Zen 4): activations
// of one token up to this size stay in L1 beside a streamed weight row.
constexpr size_t kDecodeRowActBytes = 16 << 10;
constexpr int64_t kTileStashLanes = 16;  // >= f32 lanes of any x86 target
constexpr int64_t kTileStashRow = 4 * 2 * kTileStashLanes;
// The saved accumulators (acc0, then acc1, kTileStashLanes floats each; a
// kernel with one accumulator a pair uses the first slot) of pair (row i,
// token t) of a tile whose pair (0, 0) is at `stash`.
inline float* TileStashPair(float* stash, int i, int t) {
  return stash + i * kTileStashRow + t * 2 * kTileStashLanes;
}

// The tiles of one cache block (rows [rb, re) x tokens [tb, te), from
// ForEachCacheBlock) for kernels whose tiles keep one or two vector accumulators per
// (row, token) pair (the float and bf16 matmuls). `tile(nr, r, t, nt, k0, k1,
// stash)` computes elements [k0, k1) of rows [r, r + nr) x tokens [t, t + nt),
// nr a std::integral_constant (kRows or 1), nt <= 4. Its accumulators start
// at zero when k0 == 0, else from `stash` (TileStashPair), and the results
// are stored when k1 == in, else the accumulators go back to `stash`; an
// unsliced tile gets [0, in) and no stash.
// - One token whose activations fit kDecodeRowActBytes (decode): the block's
//   rows go to `run(rb, re, t)`, which computes each row exactly as tile(1,
//   r, t, 1, 0, in, nullptr) would, in one loop instead of a call per row
//   (F16 decode on Zen 4: 1.21-1.43x; BENCHMARKS.md). With kRunWideDecode
//   every single token goes to `run`, whatever its activations' size: for
//   a `run` that overlaps several rows itself (the float matmul's
//   FloatDecodeRun), which then reads each activation vector once for those
//   rows, as a tile would.
// - Otherwise fewer than 4 tokens: one row at a time, so each thread reads its
//   weights as one sequential stream (two rows at a time interleave two
//   streams that each skip every other row, and the hardware prefetcher
//   follows them worse: F16 decode on Zen 5 went from 7.7-9.5 to 10.5-11.6
//   tokens/s, see BENCHMARKS.md). Except where a token's activations exceed
//   kDecodeRowActBytes (f32 activations of the FFN down projection, 35 KiB
//   at 8,960 inputs): the weight stream then evicts them from L1 on every
//   row, so every row reads them again from L2, and kRows-row tiles, which
//   read them once for kRows rows, win over the single stream (F16 1536 x
//   8960 on Zen 4: 9.9-11.1 -> 12.6-15.9 GB/s on 1 thread, 17.0-18.7 ->
//   20.7-27.4 on 2; the same tiles halved the 8960 x 1536 shape, whose
//   activations fit; BENCHMARKS.md).
// - Batches: tiles of kRows x kTokens, rows left over one at a time (against
//   4 tokens).
// - Where `in` > kslice (a multiple of 2 vectors; the bf16 dot-product
//   tiles pass 4 tokens' activations in 24 KiB, the float tiles pass `in`
//   and never slice), each group of 4 tokens goes in k slices of kslice
//   elements, every slice across all the block's rows before the next, so
//   the tiles read activations from L1, not L2.
template <int kRows, int kTokens, bool kRunWideDecode = false, class Tile, class Run>
inline void TileCacheBlock(const MatArgs& a, int64_t rb, int64_t re, int64_t tb, int64_t te, int64_t kslice,
                           Tile&& tile, Run&& run) {
  using Rows = std::integral_constant<int, kRows>;
  using One = std::integral_constant<int, 1>;
  const auto tokens = [&](auto nr, int64_t r, int64_t t0, int64_t t1, int64_t nt_max, int64_t k0, int64_t k1,
                          float* stash) {
    for (int64_t t = t0; t < t1;) {
      const int64_t nt = nt_max < t1 - t ? nt_max : t1 - t;
      float* pair = stash == nullptr ? nullptr : TileStashPair(stash, 0, static_cast<int>(t - t0));
      tile(nr, r, t, nt, k0, k1, pair);
      t += nt;
    }
  };
  if (te - tb == 1 && (kRunWideDecode || a.act_row_bytes <= kDecodeRowActBytes)) return run(rb, re, tb);
  if (te - tb < 4) {
    int64_t r = rb;
    if (a.act_row_bytes > kDecodeRowActBytes) {
      for (; r + kRows <= re; r += kRows) tokens(Rows{}, r, tb, te, kTokens, 0, a.in, nullptr);
    }
    for (; r < re; ++r) tokens(One{}, r, tb, te, 4, 0, a.in, nullptr);
    return;
  }
  if (a.in <= kslice) {
    int64_t r = rb;
    for (; r + kRows <= re; r += kRows) tokens(Rows{}, r, tb, te, kTokens, 0, a.in, nullptr);
    for (; r < re; ++r) tokens(One{}, r, tb, te, 4, 0, a.in, nullptr);
    return;
  }
  thread_local std::vector<float> stash;
  if (stash.size() < static_cast<size_t>((re - rb) * kTileStashRow)) {
    stash.resize(static_cast<size_t>((re - rb) * kTileStashRow));
  }
  for (int64_t tq = tb; tq < te; tq += 4) {
    const int64_t tq_end = tq + 4 < te ? tq + 4 : te;
    for (int64_t k0 = 0; k0 < a.in; k0 += kslice) {
      const int64_t k1 = k0 + kslice < a.in ? k0 + kslice : a.in;
      int64_t r = rb;
      for (; r + kRows <= re; r += kRows) {
        tokens(Rows{}, r, tq, tq_end, kTokens, k0, k1, stash.data() + (r - rb) * kTileStashRow);
      }
      for (; r < re; ++r) tokens(One{}, r, tq, tq_end, 4, k0, k1, stash.data() + (r - rb) * kTileStashRow);
    }
  }
}

// Attention work item: queries [q_begin, q_end) of (task, kv_head), where
// query index qi = i * group + g stands for query row i, head kv_head*group+g.
// A part of a split item (part_out != nullptr; one tile, q_end - q_begin <=
// kAttnQueryTile) reads only slots [slot_begin, slot_end) and, instead of the
// task's output rows, writes for each of its queries j the part's softmax
// statistics and unnormalised output:
//   part_stats[2j] = m_j, the largest score of a slot j sees in the part (0 when none),
//   part_stats[2j + 1] = l_j = sum_s exp(S_sj - m_j)                  (0 when none),
//   part_out[j * head_dim + c] = sum_s exp(S_sj - m_j) v_s[c]          [nq][head_dim]
// which the caller merges across parts (ops.cpp, MergeAttentionParts).
struct AttnItem {
  const AttentionTask* task;
  int kv_head;
  int64_t q_begin, q_end;
  int64_t slot_begin = 0, slot_end = 0;
  float* part_out = nullptr;
  float* part_stats = nullptr;
};

// Per-target kernel entry points (defined in the Highway files, dispatched).
void QuantizeActivations(ActFormat f, const float* x, int64_t in, uint8_t* out);
void MatRows(const MatArgs& a, int64_t row_begin, int64_t row_end);
// scratch: at least AttnScratchFloats(shape, n) floats, 64-byte aligned, where n
// is the task's n_slots (the part's slot_end - slot_begin for a part).
void AttentionItem(const AttentionShape& shape, const AttnItem& item, float* scratch);
size_t AttnScratchFloats(const AttentionShape& shape, int64_t n_slots);
constexpr int kAttnQueryTile = 8;  // queries sharing each K/V load

void RmsNormSimd(const float* x, const float* weight, int64_t n, float eps, float* out);
void RopeSimd(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p);
void SoftmaxSimd(float* x, int64_t n);
void SiluMulSimd(const float* gate, const float* up, float* out, int64_t n);
void AddSimd(float* y, const float* x, int64_t n);
void ConvertF16ToF32Simd(const uint16_t* src, float* dst, int64_t n);
uint64_t ReadSweepSimd(const uint64_t* words, int64_t n);
int64_t FmaChainValuesSimd();
void FmaChainsSimd(int64_t steps, float* out);
// FmaChains' constants (ops.h); ref::FmaChains spells them out itself.
inline constexpr int kFmaChains = 12;
inline constexpr float kFmaChainMul = 0.999f, kFmaChainAdd = 0.001f;
inline float FmaChainStart(int64_t value) { return 1.0f + static_cast<float>(value) / 1024.0f; }
const char* TargetNameSimd();
// True when the dynamic dispatch runs the AVX3_DL target (matmul.cpp).
bool DispatchIsAvx3Dl();
// True when the dispatched target's Q8_0 batch kernel takes ActFormat::kQ8Wide
// activations (AVX2 and AVX3 without VNNI; matmul.cpp).
bool Q8WideActive();
// True when the dispatched target prefers F32 and F16 weights interleaved
// (kF32x16, kF16x16; matmul_float_x16-inl.h): AVX3 and AVX3_DL.
bool FloatX16Preferred();
// True when the dispatched target's int8 products run the AVX512_VNNI
// kernels: AVX3_DL, or AVX3 routed to the AVX3 VNNI pass (below).
bool Int8VnniActive();

// AVX-512 CPUs with AVX512_VNNI that Highway 1.0.3 dispatches as AVX3
// (Cascade Lake, Cooper Lake): matmul_avx3_vnni.cpp compiles the products'
// body once more in the AVX3 pass with the VNNI kernels on, and matmul.cpp's
// AVX3 pass hands its rows to MatRowsAvx3Vnni when Avx3VnniAllowed().
// Avx3VnniCpu: the CPU reports AVX512_VNNI and the pass is compiled (GCC or
// Clang on x86-64). Avx3VnniAllowed: that, unless SKIPKV_SIMD=avx3
// (DisableAvx3VnniAtStartup, ops.cpp) or SetAvx3VnniForTest(0) turned it off.
// SetAvx3VnniForTest: 1 on where the CPU has it, 0 off, -1 back to start-up's.
bool Avx3VnniCompiled();
bool Avx3VnniCpu();
bool Avx3VnniAllowed();
void DisableAvx3VnniAtStartup();
void SetAvx3VnniForTest(int mode);
void MatRowsAvx3Vnni(const MatArgs& a, int64_t row_begin, int64_t row_end);

// BF16 weights as bf16 dot products (matmul_bf16_x86.cpp): active when the
// CPU has AVX512_BF16 and the dispatch runs AVX3_DL. Activations are then
// in ActFormat::kBF16 (round to nearest even; QuantizeActivations calls
// ConvertActivationsToBf16) and Bf16MatRows computes the rows.
bool Bf16DotActive();
void ConvertActivationsToBf16(const float* x, int64_t in, uint16_t* out);
void Bf16MatRows(const MatArgs& a, int64_t row_begin, int64_t row_end);

// Interleaved Q8_0, Q4_K and Q6_K weights on AMX tiles. AmxTileMode() (amx_x86.cpp):
// kTiles with SKIPKV_AMX=1 where the CPU and Linux allow it and the dispatch
// runs AVX3_DL; kSoftware: the same kernels on scalar tiles, for tests.
enum class AmxMode { kOff, kTiles, kSoftware };
AmxMode AmxTileMode();
// Forces a mode (tests); false with the reason when it cannot run here.
bool SetAmxModeForTesting(AmxMode mode, std::string* why);
// kTiles without asking the CPU or Linux whether AMX runs: for a test that
// traps the tile instructions and emulates them (tests/kernels/
// amx_trap_emulator.h). Still needs the AVX-512 of the kernels' epilogue.
bool ForceAmxTileInstructionsForTesting(std::string* why);
void ResetAmxModeForTesting();
// "on", or "off (reason)": for the start-up log and `skipkv bench`.
std::string AmxStatus();
// kQ8_0x16 with kQ8 activations, kQ4_Kx16 and kQ6_Kx16 with kQ8K, for batches of at
// least AmxMinTokens(type) where AmxTileMode() is not kOff
// (matmul_amx_x16_x86.cpp): the interleaved kernels' formulation, so the
// results equal theirs bit for bit. Rows [row_begin, row_end) are whole
// groups of 16.
void X16AmxRows(const MatArgs& a, int64_t row_begin, int64_t row_end);
// Fewer tokens take the interleaved VNNI kernels. Q8_0x16: 8, a tile's
// tokens. Q4_Kx16 and Q6_Kx16: 64, because each 16-row group is unpacked for
// the tiles once per call (Q4_K measured: with the tile instructions stubbed out, the rest of the
// kernel ran 2.1x the VNNI kernel at 512 tokens but only 1.0-1.3x at 16 on
// one Zen 5 core (BENCHMARKS.md, "seventh session"); Q6_K follows it). First
// choices, not yet measured on an AMX CPU. SetAmxMinTokensForTesting(n) makes all n (n <= 0:
// these defaults again), so that tests and bench_amx can put smaller batches
// on the tiles.
int64_t AmxMinTokens(DType t);
void SetAmxMinTokensForTesting(int64_t n);
// X16AmxRows calls since start-up (tests: that the tiles ran at all).
int64_t X16AmxRowsCalls();

// The software prefetch of the decode kernels for Q8_0x16, Q4_Kx16 and
// Q6_Kx16 (their one-token tiles, also a batch's last lone token;
// matmul_x16-inl.h): at the start of weight block b, every line of block
// b + DecodePrefetchBlocks(type), the distance in bytes rounded up to whole
// blocks (0 bytes: no prefetch). Defaults from Zen 5 (BENCHMARKS.md, fourth,
// ninth and twelfth sessions): Q4_Kx16 2 blocks (4,608 bytes) and Q6_Kx16 2
// blocks (6,720 bytes), whose one-token tiles the hardware prefetcher did not
// keep up with; Q8_0x16 none (a prefetch slowed it). SKIPKV_DECODE_PREFETCH
// replaces them for one run, as BYTES (every type) or
// q8_0=BYTES,q4_k=BYTES,q6_k=BYTES (any of them): a measurement switch for
// CPUs whose prefetchers differ (issue 40: the Intel Xeon). Results never
// change (a prefetch only).
struct DecodePrefetch {
  int64_t q8_0_bytes = 0;
  int64_t q4_k_bytes = 2 * static_cast<int64_t>(sizeof(BlockQ4_Kx16));
  int64_t q6_k_bytes = 2 * static_cast<int64_t>(sizeof(BlockQ6_Kx16));
};
inline constexpr int64_t kMaxDecodePrefetchBytes = int64_t{1} << 20;
// Parses SKIPKV_DECODE_PREFETCH's syntax (types left out keep their
// defaults); false with the reason on a malformed value.
bool ParseDecodePrefetch(std::string_view text, DecodePrefetch* out, std::string* why);
// Blocks ahead for kQ8_0x16, kQ4_Kx16 or kQ6_Kx16 (0 for any other type).
int64_t DecodePrefetchBlocks(DType type);
// Replaces the setting (tests, bench_amx); Reset: the defaults, not the environment's.
void SetDecodePrefetchForTesting(const DecodePrefetch& p);
void ResetDecodePrefetchForTesting();
// "Q8_0x16 none, Q4_Kx16 4608 B (2 blocks), Q6_Kx16 6720 B (2 blocks)", with " (SKIPKV_DECODE_PREFETCH)"
// when set there.
std::string DecodePrefetchStatus();

// The weight streams of the decode kernels for Q8_0x16, Q4_Kx16 and Q6_Kx16
// on the AVX-512 VNNI targets (X16OneTokenStreams, matmul_x16-inl.h): each
// chunk of rows of a one-token product (a thread takes about four, ops.cpp;
// 9 groups of the 1.5B shape's 8,960 rows at 16 threads) cut into N equal
// parts, read side by side (block b of every part before block b + 1), so
// that N sequential streams are in flight instead of one: llama.cpp's AMX decode kernel reads 4 groups of 16
// rows side by side, and an Intel core's memory parallelism rests on its L2
// streamer's per-page streams. Defaults from Zen 5 (BENCHMARKS.md, thirteenth
// session): Q8_0x16 2 (decode 1.04x / 1.03x at 1 / 2 threads, medians of 8 rounds), Q4_Kx16 and
// Q6_Kx16 1 (4 streams: 0.74x). SKIPKV_DECODE_STREAMS replaces them for one
// run, as N (every type) or q8_0=N,q4_k=N,q6_k=N, N = 1, 2, 4 or 8: a
// measurement switch for the Xeon of issue 40. Results never change (each
// group is summed as the one-stream kernel sums it). Other targets read one
// stream.
struct DecodeStreams {
  int64_t q8_0 = 2;
  int64_t q4_k = 1;
  int64_t q6_k = 1;
};
// Parses SKIPKV_DECODE_STREAMS's syntax (types left out keep their defaults);
// false with the reason on a malformed value.
bool ParseDecodeStreams(std::string_view text, DecodeStreams* out, std::string* why);
// Streams for kQ8_0x16, kQ4_Kx16 or kQ6_Kx16 (1 for any other type).
int DecodeStreamCount(DType type);
// Replaces the setting (tests, bench_amx); Reset: the defaults, not the environment's.
void SetDecodeStreamsForTesting(const DecodeStreams& p);
void ResetDecodeStreamsForTesting();
// "Q8_0x16 2, Q4_Kx16 1, Q6_Kx16 1", with " (SKIPKV_DECODE_STREAMS)" when set there.
std::string DecodeStreamsStatus();

}  // namespace skipkv::kernels::internal
