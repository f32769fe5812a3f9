// Default kernel entry points: argument checks, scratch, the split of work
// over the thread pool, and dispatch to the Highway kernels of the CPU found
// at start-up. Work is split so that every output element is computed by one
// task with a fixed operation order: results never depend on the thread count.
#include "kernels/ops.h"

#include <hwy/targets.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/simd_internal.h"
#include "tensor/interleaved.h"
#include "tensor/quant.h"
#include "util/aligned_buffer.h"
#include "util/check.h"
#include "util/logging.h"

namespace skipkv::kernels {
namespace {

// Grows a per-thread scratch buffer; contents are not preserved.
uint8_t* Scratch(AlignedBuffer& buf, size_t bytes) {
  if (buf.size() < bytes) buf.Resize(std::max(bytes, buf.size() * 3 / 2));
  return buf.as<uint8_t>();
}

void CheckMatShapes(const TensorView& w) {
  SKIPKV_CHECK_MSG(w.data != nullptr, w.name.c_str());
  SKIPKV_CHECK_MSG(w.ne[0] % BlockSize(w.type) == 0, w.name.c_str());
  SKIPKV_CHECK_MSG(FileTypeOf(w.type) == w.type || w.NumRows() % 16 == 0,
                   (w.name + ": interleaved weights come in whole groups of 16 rows").c_str());
}

// SKIPKV_SIMD=<target> caps the run-time dispatch (e.g. "avx2" on an AVX-512
// machine, to compare code paths or to avoid AVX-512 clock throttling): every
// target better than the named one is disabled. "avx3_vnni" is AVX3 with the
// AVX512_VNNI int8 kernels (matmul_avx3_vnni.cpp; what a Cascade Lake runs),
// "avx3" AVX3 without them (a Skylake-SP). Applied once, at static
// initialisation, before any kernel runs.
const bool kSimdCapApplied = [] {
  const char* env = std::getenv("SKIPKV_SIMD");
  if (env == nullptr || *env == '\0') return false;
  std::string want(env);
  for (char& c : want) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (want == "SCALAR" || want == "PORTABLE") want = "EMU128";
  if (want == "AVX3_VNNI") {
    if (!internal::Avx3VnniCpu())
      SKIPKV_LOG_WARN("SKIPKV_SIMD=%s: the CPU reports no AVX512_VNNI; AVX3 runs without it", env);
    want = "AVX3";
  } else if (want == "AVX3") {
    internal::DisableAvx3VnniAtStartup();
  }
  std::string known;
  for (int i = 0; i <= 62; ++i) {
    const int64_t bit = int64_t{1} << i;
    if ((HWY_TARGETS & bit) == 0) continue;
    const std::string name = hwy::TargetName(bit);
    known += (known.empty() ? "" : ", ") + name;
    if (bit == HWY_AVX3 && internal::Avx3VnniCompiled()) known += ", AVX3_VNNI";
    if (name == want || (want == "EMU128" && (bit == HWY_EMU128 || bit == HWY_SCALAR))) {
      hwy::DisableTargets(bit - 1);  // all better targets have lower bits
      return true;
    }
  }
  SKIPKV_LOG_WARN("SKIPKV_SIMD=%s is not a compiled SIMD target (compiled: %s); ignored", env, known.c_str());
  return false;
}();

void LogTargetOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    SKIPKV_LOG_INFO("kernels: SIMD target %s%s%s; AMX tiles: %s", SimdPathName(),
                    kSimdCapApplied ? " (capped by SKIPKV_SIMD)" : "",
                    internal::Bf16DotActive() ? "; BF16 weights: vdpbf16ps on bf16-rounded activations" : "",
                    internal::AmxStatus().c_str());
  });
}

// A decode product (one token, or a decode batch of up to kMaxGuardedTokens)
// as a guarded loop of the pool (ThreadPool::RunGuarded): a chunk of a worker
// preempted by a neighbouring process is redone by the caller instead of
// waited for. Each chunk computes its rows into the worker's staging (Y[t][r]
// at staging[t * rows + r]) from the pool's copy of the activations, and the
// first run to finish copies them into y. Same kernel, same chunks and same
// activation bytes as the ordinary loop, so the results are bit-identical to
// it. Prefill batches (more tokens, or staging over kMaxGuardedStagingBytes)
// take the ordinary loop: their chunks are long, so a stall costs them less.
constexpr int kMaxGuardedProducts = 4;
constexpr int64_t kMaxGuardedTokens = 16;
constexpr size_t kMaxGuardedStagingBytes = size_t{16} << 20;
struct GuardedProduct {
  internal::MatArgs args;  // act and y are set per run
  void (*rows_fn)(const internal::MatArgs&, int64_t, int64_t);
  size_t act_offset;  // of this product's activations in the pool's input copy
  float* y;
  int64_t rows;
  int64_t chunks;  // ceil(rows / grain)
};
struct GuardedMatCtx {
  int64_t grain;
  int64_t n_products;
  GuardedProduct p[kMaxGuardedProducts];
};
static_assert(sizeof(GuardedMatCtx) <= ThreadPool::kGuardedCtxBytes);

// Product and rows [r0, r1) of chunk `task`.
const GuardedProduct& LocateChunk(const GuardedMatCtx& c, int64_t task, int64_t& r0, int64_t& r1) {
  int64_t i = 0;
  while (i + 1 < c.n_products && task >= c.p[i].chunks) task -= c.p[i++].chunks;
  r0 = task * c.grain;
  r1 = std::min(c.p[i].rows, r0 + c.grain);
  return c.p[i];
}

void GuardedMatCompute(const void* ctx, const uint8_t* input, int64_t task, uint8_t* staging) {
  GuardedMatCtx c;
  std::memcpy(&c, ctx, sizeof c);
  int64_t r0 = 0, r1 = 0;
  const GuardedProduct& p = LocateChunk(c, task, r0, r1);
  internal::MatArgs a = p.args;
  a.act = input + p.act_offset;
  a.y = reinterpret_cast<float*>(staging);
  p.rows_fn(a, r0, r1);
}

void GuardedMatPublish(const void* ctx, int64_t task, const uint8_t* staging) {
  GuardedMatCtx c;
  std::memcpy(&c, ctx, sizeof c);
  int64_t r0 = 0, r1 = 0;
  const GuardedProduct& p = LocateChunk(c, task, r0, r1);
  for (int64_t t = 0; t < p.args.n; ++t) {
    const size_t at = static_cast<size_t>(t * p.args.y_stride + r0);
    std::memcpy(p.y + at, staging + at * sizeof(float), static_cast<size_t>(r1 - r0) * sizeof(float));
  }
}

// A split attention item (see Attention): the parts of (task, kv_head), each
// part_floats apart from `first`.
struct SplitGroup {
  const AttentionTask* task;
  int kv_head;
  const float* first;
  int64_t n_parts;
};

// out_j = sum_p e^(m_pj - M_j) o_pj / sum_p e^(m_pj - M_j) l_pj over the parts
// where query j saw a slot (l_pj > 0), M_j the largest such m_pj; 0 when it saw
// none (as the unsplit kernel). Parts are added in slot order.
void MergeAttentionParts(const AttentionShape& shape, const SplitGroup& g, int64_t part_floats) {
  const AttentionTask& t = *g.task;
  const int group = shape.n_heads / shape.n_kv_heads;
  const int d = shape.head_dim;
  const int64_t nq = static_cast<int64_t>(t.n_q) * group;
  const int64_t stats_at = static_cast<int64_t>(internal::kAttnQueryTile) * d;
  for (int64_t j = 0; j < nq; ++j) {
    const int64_t i = j / group, head = static_cast<int64_t>(g.kv_head) * group + j % group;
    float* out = t.out + (i * shape.n_heads + head) * d;
    std::fill(out, out + d, 0.f);
    float m_max = -std::numeric_limits<float>::infinity();
    for (int64_t p = 0; p < g.n_parts; ++p) {
      const float* st = g.first + p * part_floats + stats_at + 2 * j;
      if (st[1] > 0.f) m_max = std::max(m_max, st[0]);
    }
    if (m_max == -std::numeric_limits<float>::infinity()) continue;
    float l = 0.f;
    for (int64_t p = 0; p < g.n_parts; ++p) {
      const float* part = g.first + p * part_floats;
      const float* st = part + stats_at + 2 * j;
      if (!(st[1] > 0.f)) continue;
      const float w = std::exp(st[0] - m_max);
      l += w * st[1];
      const float* o = part + j * d;
      for (int c = 0; c < d; ++c) out[c] += w * o[c];
    }
    const float inv = 1.f / l;
    for (int c = 0; c < d; ++c) out[c] *= inv;
  }
}

}  // namespace

void MatMulGroup(std::span<const MatMulOut> outs, const float* x, int64_t n, ThreadPool& pool) {
  if (outs.empty()) return;
  const int64_t in = outs[0].w->ne[0];
  for (const MatMulOut& o : outs) {
    CheckMatShapes(*o.w);
    SKIPKV_CHECK_MSG(o.w->ne[0] == in, o.w->name.c_str());
  }
  LogTargetOnce();
  if (n <= 0) return;
  // One quantisation of X per activation format the group's weights consume.
  constexpr int kFormats = internal::kNumActFormats;
  thread_local AlignedBuffer act_bufs[kFormats];
  const uint8_t* act_of[kFormats] = {};
  // Q8_0 batches on AVX2/AVX3 take widened activations (bit-identical results).
  const bool q8_wide = n >= 2 && internal::Q8WideActive();
  // Batches of interleaved Q8_0, Q4_K and Q6_K on AMX tiles (the same activations
  // and results); decode and every other type keep their kernels.
  const bool amx_on = internal::AmxTileMode() != internal::AmxMode::kOff;
  struct Product {
    internal::MatArgs args;
    void (*rows_fn)(const internal::MatArgs&, int64_t, int64_t);
    int64_t rows;
  };
  thread_local std::vector<Product> products;
  products.clear();
  int64_t total_rows = 0;
  bool whole_groups = false;  // interleaved 16-row groups: chunks of whole ones
  for (const MatMulOut& o : outs) {
    const TensorView& w = *o.w;
    whole_groups = whole_groups || FileTypeOf(w.type) != w.type;
    // BF16 weights take bf16 activations where the CPU has bf16 dot products.
    const bool bf16_dot = w.type == DType::kBF16 && internal::Bf16DotActive();
    const bool amx = amx_on &&
                     (w.type == DType::kQ8_0x16 || w.type == DType::kQ4_Kx16 || w.type == DType::kQ6_Kx16) &&
                     n >= internal::AmxMinTokens(w.type);
    const internal::ActFormat fmt = bf16_dot                            ? internal::ActFormat::kBF16
                                    : q8_wide && w.type == DType::kQ8_0 ? internal::ActFormat::kQ8Wide
                                                                        : internal::ActFormatFor(w.type);
    Product p{};
    internal::MatArgs& a = p.args;
    a.type = w.type;
    a.w = w.data;
    a.w_row_bytes = w.RowBytesCount();
    a.in = in;
    a.n = n;
    a.act_format = fmt;
    a.y = o.y;
    a.y_stride = w.NumRows();
    a.act_row_bytes = internal::ActRowBytes(fmt, in);
    if (fmt == internal::ActFormat::kF32) {
      a.act = reinterpret_cast<const uint8_t*>(x);
    } else {
      const int f = static_cast<int>(fmt);
      if (act_of[f] == nullptr) {
        uint8_t* act = Scratch(act_bufs[f], internal::ActBytes(fmt, in, n));
        pool.ParallelFor(n, std::max<int64_t>(1, 4096 / in), [&](int64_t t0, int64_t t1, int) {
          for (int64_t t = t0; t < t1; ++t) {
            internal::QuantizeActivations(fmt, x + t * in, in,
                                          act + static_cast<size_t>(t) * a.act_row_bytes);
          }
        });
        act_of[f] = act;
      }
      a.act = act_of[f];
    }
    p.rows_fn = bf16_dot ? internal::Bf16MatRows : amx ? internal::X16AmxRows : internal::MatRows;
    p.rows = w.NumRows();
    total_rows += p.rows;
    products.push_back(p);
  }
  // Rows in chunks: about 4 per thread over the whole group (dynamic balance
  // on a shared machine), at least 16 rows (a multiple of 8) so each chunk
  // streams a useful slice; a chunk never spans two weights.
  const int64_t threads = pool.num_threads();
  int64_t grain = (total_rows + threads * 4 - 1) / (threads * 4);
  grain = std::max<int64_t>(16, (grain + 7) / 8 * 8);
  if (whole_groups) grain = (grain + 15) / 16 * 16;
  struct Chunk {
    int32_t product;
    int64_t r0, r1;
  };
  thread_local std::vector<Chunk> chunks;
  chunks.clear();
  for (size_t i = 0; i < products.size(); ++i) {
    for (int64_t r = 0; r < products[i].rows; r += grain)
      chunks.push_back({static_cast<int32_t>(i), r, std::min(products[i].rows, r + grain)});
  }
  int64_t max_rows = 0;
  for (const Product& p : products) max_rows = std::max(max_rows, p.rows);
  if (n <= kMaxGuardedTokens && static_cast<size_t>(n * max_rows) * sizeof(float) <= kMaxGuardedStagingBytes &&
      pool.backup_execution() && products.size() <= kMaxGuardedProducts) {
    GuardedMatCtx ctx{};
    ctx.grain = grain;
    ctx.n_products = static_cast<int64_t>(products.size());
    ThreadPool::InputPart parts[kMaxGuardedProducts];
    size_t n_parts = 0, input_bytes = 0, staging_bytes = 0;
    for (size_t i = 0; i < products.size(); ++i) {
      const Product& p = products[i];
      GuardedProduct& g = ctx.p[i];
      g.args = p.args;
      g.rows_fn = p.rows_fn;
      g.y = p.args.y;
      g.rows = p.rows;
      g.chunks = (p.rows + grain - 1) / grain;
      size_t j = 0;  // products of one activation format share one copy
      while (j < n_parts && parts[j].data != p.args.act) ++j;
      if (j == n_parts) {
        const size_t bytes = internal::ActBytes(p.args.act_format, in, n);
        parts[n_parts++] = {p.args.act, bytes, input_bytes};
        input_bytes += (bytes + AlignedBuffer::kAlign - 1) / AlignedBuffer::kAlign * AlignedBuffer::kAlign;
      }
      g.act_offset = parts[j].offset;
      g.args.act = nullptr;
      g.args.y = nullptr;
      staging_bytes = std::max(staging_bytes, static_cast<size_t>(n * p.rows) * sizeof(float));
    }
    ThreadPool::GuardedLoop loop;
    loop.compute = GuardedMatCompute;
    loop.publish = GuardedMatPublish;
    loop.ctx = &ctx;
    loop.ctx_bytes = sizeof ctx;
    loop.input = std::span<const ThreadPool::InputPart>(parts, n_parts);
    loop.input_bytes = input_bytes;
    loop.staging_bytes = staging_bytes;
    loop.num_tasks = static_cast<int64_t>(chunks.size());
    if (pool.RunGuarded(loop)) return;
  }
  // Named references: inside the lambda a worker thread would otherwise read
  // its own (empty) thread_local vectors instead of this caller's.
  const std::vector<Chunk>& cs = chunks;
  const std::vector<Product>& ps = products;
  pool.Run(static_cast<int64_t>(cs.size()), [&](int64_t c, int) {
    const Product& p = ps[static_cast<size_t>(cs[c].product)];
    p.rows_fn(p.args, cs[c].r0, cs[c].r1);
  });
}

void MatMul(const TensorView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  const MatMulOut out{&w, y};
  MatMulGroup(std::span<const MatMulOut>(&out, 1), x, n, pool);
}

void MatVec(const TensorView& w, const float* x, float* y, ThreadPool& pool) { MatMul(w, x, 1, y, pool); }

void GetRow(const TensorView& w, int64_t row, float* out) { ref::GetRow(w, row, out); }

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  internal::RmsNormSimd(x, weight, n, eps, out);
}
void Rope(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p) {
  const int rot = p.rot_dim > 0 ? p.rot_dim : head_dim;
  SKIPKV_CHECK(rot % 2 == 0 && rot <= head_dim);
  internal::RopeSimd(x, n_heads, head_dim, pos, p);
}
void Softmax(float* x, int64_t n) { internal::SoftmaxSimd(x, n); }
void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  internal::SiluMulSimd(gate, up, out, n);
}
void Add(float* y, const float* x, int64_t n) { internal::AddSimd(y, x, n); }
void ConvertF16ToF32(const uint16_t* src, float* dst, int64_t n) { internal::ConvertF16ToF32Simd(src, dst, n); }
uint64_t ReadSweep(const uint64_t* words, int64_t n) { return internal::ReadSweepSimd(words, n); }
int64_t FmaChainValues() { return internal::FmaChainValuesSimd(); }
void FmaChains(int64_t steps, float* out) { internal::FmaChainsSimd(steps, out); }

void Attention(const AttentionShape& shape, std::span<const AttentionTask> tasks, ThreadPool& pool) {
  SKIPKV_CHECK(shape.n_kv_heads > 0 && shape.n_heads % shape.n_kv_heads == 0);
  SKIPKV_CHECK(shape.kv_type == DType::kF16 || shape.kv_type == DType::kF32);
  if (shape.head_dim % 8 != 0) {  // the SIMD kernel works in 8-float chunks of a head
    ref::Attention(shape, tasks);
    return;
  }
  LogTargetOnce();
  // Work items: (task, KV head), each owning all queries of the GQA group, so
  // every K/V row is read once per tile of queries. Long prefills split their
  // queries into chunks -- unless attn_accum is requested, whose per-slot sums
  // must be made by one item in a fixed order. A decode over a long cache (one
  // tile of queries, at least 2 * kAttnPartSlots slots, no attn_accum) splits
  // its slots into parts instead, merged afterwards: otherwise a sequence would
  // use only n_kv_heads threads of the pool (2 for R1-Distill-Qwen-1.5B), which
  // leaves most cores of a server idle while it reads a deep cache. The split
  // depends only on the task (n_q, n_slots), never on the thread count.
  const int group = shape.n_heads / shape.n_kv_heads;
  const int d = shape.head_dim;
  constexpr int64_t kChunk = 4 * internal::kAttnQueryTile;
  constexpr int64_t kPartFloats = internal::kAttnQueryTile * 2;  // part_stats of one part
  auto parts_of = [&](const AttentionTask& t) -> int64_t {
    const int64_t nq = static_cast<int64_t>(t.n_q) * group;
    if (t.attn_accum != nullptr || nq > internal::kAttnQueryTile || t.n_slots < 2 * kAttnPartSlots) return 0;
    return t.n_slots / kAttnPartSlots;
  };
  int64_t total_parts = 0;
  for (const AttentionTask& t : tasks) total_parts += parts_of(t) * shape.n_kv_heads;
  // Per part: its unnormalised output [kAttnQueryTile][head_dim], then its stats.
  const int64_t part_floats = internal::kAttnQueryTile * d + kPartFloats;
  thread_local AlignedBuffer part_buf;
  float* parts = reinterpret_cast<float*>(Scratch(part_buf, total_parts * part_floats * sizeof(float)));
  std::vector<internal::AttnItem> items;
  std::vector<SplitGroup> splits;
  int64_t next_part = 0;
  for (const AttentionTask& t : tasks) {
    const int64_t nq = static_cast<int64_t>(t.n_q) * group;
    const int64_t n_parts = parts_of(t);
    const int64_t chunk = t.attn_accum != nullptr ? nq : kChunk;
    for (int h = 0; h < shape.n_kv_heads; ++h) {
      if (n_parts == 0) {
        for (int64_t q0 = 0; q0 < nq; q0 += chunk) items.push_back({&t, h, q0, std::min(nq, q0 + chunk)});
        continue;
      }
      splits.push_back({&t, h, parts + next_part * part_floats, n_parts});
      for (int64_t p = 0; p < n_parts; ++p, ++next_part) {
        float* base = parts + next_part * part_floats;
        items.push_back({&t, h, 0, nq, t.n_slots * p / n_parts, t.n_slots * (p + 1) / n_parts, base,
                         base + internal::kAttnQueryTile * d});
      }
    }
  }
  pool.Run(static_cast<int64_t>(items.size()), [&](int64_t i, int) {
    thread_local AlignedBuffer scratch;
    const internal::AttnItem& item = items[i];
    const int64_t n = item.part_out != nullptr ? item.slot_end - item.slot_begin : item.task->n_slots;
    const size_t floats = internal::AttnScratchFloats(shape, n);
    internal::AttentionItem(shape, item, reinterpret_cast<float*>(Scratch(scratch, floats * sizeof(float))));
  });
  pool.Run(static_cast<int64_t>(splits.size()),
           [&](int64_t i, int) { MergeAttentionParts(shape, splits[i], part_floats); });
}

const char* SimdTargetName() { return internal::TargetNameSimd(); }
const char* SimdPathName() {
  const char* target = internal::TargetNameSimd();
  return std::strcmp(target, "AVX3") == 0 && internal::Int8VnniActive() ? "AVX3+VNNI" : target;
}
bool Bf16DotProducts() { return internal::Bf16DotActive(); }
std::string AmxStatus() { return internal::AmxStatus(); }
bool InterleavedWeightsWanted(DType file_type) {
  if (!InterleavedType(file_type).has_value()) return false;
  const char* env = std::getenv("SKIPKV_REPACK");
  if (env != nullptr && std::string(env) == "0") return false;
  if (file_type == DType::kF32 || file_type == DType::kF16) return internal::FloatX16Preferred();
  // With AMX on too: batches of the interleaved types run on tiles (X16AmxRows).
  return internal::Int8VnniActive() || internal::Q8WideActive();
}

}  // namespace skipkv::kernels
