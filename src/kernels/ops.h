// Compute kernels used by the forward pass. Each has a scalar reference in
// namespace kernels::ref (ref_ops.cpp) that is its test oracle; the default
// entry points dispatch to Highway SIMD code for the CPU found at start-up.
// Activations are f32. Weights are TensorViews of any supported DType.
// Results never depend on the thread count (fixed chunking, no racing reductions).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "tensor/tensor_view.h"
#include "util/thread_pool.h"

namespace skipkv::kernels {

enum class RopeStyle {
  kAdjacentPairs,  // rotate (x[2i], x[2i+1]): llama2.c / Meta layout; GGUF "llama" (ggml NORM)
  kRotateHalf,     // rotate (x[i], x[i + d/2]): HF Llama/Qwen, GGUF "qwen2" (ggml NEOX)
};

struct RopeParams {
  RopeStyle style = RopeStyle::kRotateHalf;
  float theta = 10000.f;
  int rot_dim = 0;  // dims rotated (0 = head_dim)
  // Llama-3 style frequency scaling (rope_scaling.rope_type == "llama3"); factor 0 = off.
  float llama3_factor = 0.f;
  float llama3_low_freq_factor = 1.f;
  float llama3_high_freq_factor = 4.f;
  int llama3_original_context = 8192;
  float linear_scale = 1.f;  // positions are multiplied by 1/linear_scale
};

// ---- Matrix products --------------------------------------------------------
// Supported weight types: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, and the
// interleaved Q4_K and Q8_0 (InterleavedWeightsWanted below). For the
// quantised types the activations are quantised once per call (Q8_0/Q4_0:
// 32-blocks of int8 with an f32 scale; Q4_K/Q6_K: ggml's Q8_K) and the dot
// products run in int8, as llama.cpp does, so results differ from ref:: by
// that quantisation (~0.3% of sum|w||x|). BF16 weights on a CPU with
// AVX512_BF16 (see Bf16DotProducts) take activations rounded to bf16, also as
// llama.cpp does (<= 2^-9 of sum|w||x|). Token t of a MatMul is bit-identical
// to a MatVec of X[t], and results are identical for any thread count.
// Work is split over output rows on `pool`; safe to call from several threads.
// y[r] = dot(W row r, x) for r in [0, rows): W is [rows][in] (ne = {in, rows}).
void MatVec(const TensorView& w, const float* x, float* y, ThreadPool& pool);
// Y[t][r] = dot(W row r, X[t]) for t in [0, n): X is [n][in], Y is [n][rows].
void MatMul(const TensorView& w, const float* x, int64_t n, float* y, ThreadPool& pool);
// One product of a MatMulGroup: Y[t][r] = dot(W row r, X[t]) into y ([n][rows of w]).
struct MatMulOut {
  const TensorView* w = nullptr;
  float* y = nullptr;
};
// Several products of the same activations X ([n][in]; every w has ne[0] == in),
// such as a layer's q, k and v projections or its gate and up projections.
// Each y is bit-identical to MatMul(*w, x, n, y) -- every output element is
// made by the same kernel in the same operation order -- but X is quantised
// once per activation format and the rows of all the weights are split over
// the pool in one parallel loop: one hand-off and one wait instead of one per
// weight (a decode step runs hundreds of these loops per token).
void MatMulGroup(std::span<const MatMulOut> outs, const float* x, int64_t n, ThreadPool& pool);
// Dequantises row `row` of `w` into out[0 .. w.ne[0]) (embedding lookup).
void GetRow(const TensorView& w, int64_t row, float* out);

// ---- Elementwise ------------------------------------------------------------
// out = x / sqrt(mean(x^2) + eps) * weight   (out may alias x)
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);
// Rotates `n_heads` heads of head_dim floats in place for position `pos`.
void Rope(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p);
// In-place numerically stable softmax over n values.
void Softmax(float* x, int64_t n);
// out[i] = silu(gate[i]) * up[i]   (out may alias gate)
void SiluMul(const float* gate, const float* up, float* out, int64_t n);
// y[i] += x[i]
void Add(float* y, const float* x, int64_t n);
// dst[i] = f32(src[i]) for i < n, src: IEEE binary16 bits (util/fp16.h's
// f16_t). Exact on every target: zeros, subnormals, infinities and NaNs
// (a NaN stays a NaN; its payload may be quieted).
void ConvertF16ToF32(const uint16_t* src, float* dst, int64_t n);

// The XOR of words[0..n): a pass that reads every byte once with the widest
// loads the target has (four independent accumulators, so loads stay in
// flight) and does nothing else. The memory-bandwidth figure of
// `skipkv bench` (ForwardBench::ReadBandwidthGBs) times it; the result only
// keeps the reads observable. Exact on every target.
uint64_t ReadSweep(const uint64_t* words, int64_t n);

// The arithmetic roof of this core: FmaChainValues() floats in 12
// independent chains of the dispatched target's widest float vectors, each
// value v starting at 1 + v / 1024 and taking `steps` fused multiply-adds
// x = x * 0.999 + 0.001, with no memory traffic. bench_kernels' BM_FmaPeak
// times it (2 x FmaChainValues() x steps flops), so a float matmul's GFLOP/s
// reads as a share of the FMA peak. out: FmaChainValues() floats, the final
// values. Equal to ref::FmaChains where the target fuses the multiply-add
// (every x86 target; EMU128 rounds the product first).
int64_t FmaChainValues();
void FmaChains(int64_t steps, float* out);

// ---- Attention --------------------------------------------------------------
// One sequence's queries against one layer of its KV cache. Per KV head h the
// cache holds n_slots rows of K and V (contiguous, head_dim elements each, f16
// or f32) and a valid flag per slot. Query row i (i < n_q) may see slots
// [0, first_query_slot + i] (causal by slot; slots are in position order) and
// never an invalid slot. Query head qh reads KV head qh / (n_heads / n_kv_heads).
struct AttentionTask {
  const float* q = nullptr;    // [n_q][n_heads][head_dim], post-RoPE
  int n_q = 1;
  int64_t n_slots = 0;
  int64_t first_query_slot = 0;
  const void* const* k = nullptr;     // [n_kv_heads] -> [n_slots][head_dim]
  const void* const* v = nullptr;     // [n_kv_heads] -> [n_slots][head_dim]
  const uint8_t* const* valid = nullptr;  // [n_kv_heads] -> [n_slots], or nullptr = all valid
  float* const* attn_accum = nullptr;  // optional [n_kv_heads] -> [n_slots]: += probabilities
                                       // summed over the group's query heads and the n_q rows (H2O)
  float* out = nullptr;        // [n_q][n_heads][head_dim]
};

struct AttentionShape {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  DType kv_type = DType::kF16;  // kF16 or kF32
  float scale = 0.f;            // usually 1/sqrt(head_dim)
};

// Runs every task (e.g. all sequences of a decode batch), parallel over
// (task, KV head), and a decode task over n_slots >= 2 * kAttnPartSlots also
// over parts of its slots (n_slots / kAttnPartSlots parts, merged with their
// softmax statistics; not for attn_accum, nor for more than 8 query heads of a
// group times rows). Each task's result is independent of the others and of
// the thread count.
// K/V rows of invalid slots and of slots no query may see are never read into
// a result (they may hold garbage). A query row that sees no slot outputs 0.
// attn_accum[h][s] receives += probability for every visible valid slot, in
// query order (row, then head). The SIMD path needs head_dim % 8 == 0 (else
// the reference runs) and n_slots * 8 floats of per-thread scratch.
void Attention(const AttentionShape& shape, std::span<const AttentionTask> tasks, ThreadPool& pool);
inline constexpr int64_t kAttnPartSlots = 512;

// Name of the SIMD target chosen at start-up ("AVX2", "AVX3", "AVX3_DL", "NEON",
// "EMU128", ...). Compiled x86 targets: AVX3_DL (AVX-512 + VNNI), AVX3, AVX2 and
// the portable baseline. The environment variable SKIPKV_SIMD=<name> (e.g.
// avx2) caps the choice at that target.
const char* SimdTargetName();
// SimdTargetName(), except "AVX3+VNNI" where an AVX3 dispatch runs the
// AVX512_VNNI int8 kernels (Cascade Lake, Cooper Lake: CPUs with VNNI that
// Highway dispatches as AVX3; SKIPKV_SIMD=avx3_vnni caps there, avx3 below).
const char* SimdPathName();
// True when BF16-weight products run as vdpbf16ps dot products on
// activations rounded to bf16 (round to nearest even): the CPU has
// AVX512_BF16 and the dispatch runs AVX3_DL. False: f32 FMA on the exact
// activations, as for F16.
bool Bf16DotProducts();
// Whether batches of interleaved Q8_0, Q4_K and Q6_K weights run on AMX tiles: "on",
// or "off (reason)". On with SKIPKV_AMX=1 where the CPU has AMX-TILE/AMX-INT8,
// Linux grants the tile state and the dispatch runs AVX3_DL
// (kernels/amx_x86.cpp; opt-in until measured on an AMX machine).
std::string AmxStatus();
// The weight prefetch distances of the decode kernels for the interleaved
// Q8_0, Q4_K and Q6_K weights, e.g. "Q8_0x16 none, Q4_Kx16 4608 B
// (2 blocks), Q6_Kx16 6720 B (2 blocks)"; SKIPKV_DECODE_PREFETCH=BYTES or
// q8_0=BYTES,q4_k=BYTES,q6_k=BYTES replaces the defaults
// (kernels/decode_switches.cpp).
std::string DecodePrefetchStatus();
// How many weight streams the decode kernels for the interleaved Q8_0, Q4_K
// and Q6_K weights read side by side on AVX-512 VNNI, e.g. "Q8_0x16 2,
// Q4_Kx16 1, Q6_Kx16 1"; SKIPKV_DECODE_STREAMS=N or q8_0=N,q4_k=N,q6_k=N
// (N = 1, 2, 4, 8) replaces the defaults (kernels/decode_switches.cpp).
std::string DecodeStreamsStatus();
// Whether weight matrices of file type `file_type` should be interleaved in
// groups of 16 rows (tensor/interleaved.h) before they reach MatMul, unless
// SKIPKV_REPACK=0: Q4_K, Q6_K and Q8_0 (DType::kQ4_Kx16, kQ6_Kx16, kQ8_0x16)
// when the dispatch runs an x86 int8 target (AVX2, AVX3, AVX3_DL); F32 and
// F16 (kF32x16, kF16x16) on AVX-512 (AVX3, AVX3_DL), where their outer-product
// tiles beat the row-major ones. With the AMX tiles on (SKIPKV_AMX=1),
// batches of the interleaved int8 types (8 tokens or more for Q8_0, 64 for
// Q4_K and Q6_K) run on tiles with the same results, decode on the VNNI
// kernel; the file's layout never uses the tiles. MatMul takes the
// interleaved types on every target either way. Their summation order is
// their own: results agree with the file layout's to float rounding, not bit
// for bit. False for every other type.
bool InterleavedWeightsWanted(DType file_type);

namespace ref {
// Scalar references with the same contracts (single-threaded).
void MatVec(const TensorView& w, const float* x, float* y);
void MatMul(const TensorView& w, const float* x, int64_t n, float* y);
void GetRow(const TensorView& w, int64_t row, float* out);
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);
void Rope(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p);
void Softmax(float* x, int64_t n);
void SiluMul(const float* gate, const float* up, float* out, int64_t n);
void Add(float* y, const float* x, int64_t n);
void ConvertF16ToF32(const uint16_t* src, float* dst, int64_t n);
uint64_t ReadSweep(const uint64_t* words, int64_t n);
void FmaChains(int64_t steps, int64_t values, float* out);  // out: `values` floats
void Attention(const AttentionShape& shape, std::span<const AttentionTask> tasks);
}  // namespace ref

}  // namespace skipkv::kernels
