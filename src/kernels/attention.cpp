// SIMD attention over one layer's KV cache, per (task, KV head) work item.
// All queries that read the same KV head -- the G query heads of the GQA group
// times the task's query rows -- are processed in tiles of up to
// kAttnQueryTile queries, and each K and V row is loaded (and converted from
// f16) once per tile, not once per query head as in llama.cpp's decode path.
//
// Per tile, with the bounded KV cache the scores fit in scratch, so softmax is
// exact two-pass rather than online:
//   pass 1  S[j][s] = scale * q_j . k_s  for visible slots, else -inf
//   softmax p[j][s] = exp(S[j][s] - max_j) / sum_j   (Highway Exp)
//   pass 2  out_j = sum_s p[j][s] v_s   (slot blocks kept in L1, d-chunks in registers)
//   H2O     attn_accum[s] += p[j][s], queries in order (row-major, then head)
// Every output and accumulator element is produced by one work item in a
// fixed order, so results do not depend on the thread count.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/simd_internal.h"
#include "util/check.h"

HWY_BEFORE_NAMESPACE();
namespace skipkv::kernels::internal {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::CappedTag<float, 8>;  // head_dim must be a multiple of 8

template <class KT>
HWY_INLINE hn::Vec<DF> LoadKv(DF df, const KT* p);
template <>
HWY_INLINE hn::Vec<DF> LoadKv(DF df, const float* p) {
  return hn::LoadU(df, p);
}
template <>
HWY_INLINE hn::Vec<DF> LoadKv(DF df, const f16_t* p) {
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
}

// One tile's queries: pointers to their q and out rows and their causal limit
// (number of leading slots they may see).
struct Tile {
  int nq;
  const float* q[kAttnQueryTile];
  float* out[kAttnQueryTile];
  int64_t limit[kAttnQueryTile];
  int64_t max_limit;
};

// Pass 1: S[j * stride + s] for s < max_limit.
template <int NQ, class KT>
void Scores(const Tile& tile, const KT* k, const uint8_t* valid, int d, float scale, float* S,
            int64_t stride) {
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t s = 0; s < tile.max_limit; ++s) {
    if (valid != nullptr && !valid[s]) {
      for (int j = 0; j < NQ; ++j) S[j * stride + s] = kNegInf;
      continue;
    }
    const KT* ks = k + s * d;
    hn::Vec<DF> acc[NQ];
    for (int j = 0; j < NQ; ++j) acc[j] = hn::Zero(df);
    for (int c = 0; c < d; c += N) {
      const auto kv = LoadKv(df, ks + c);
      for (int j = 0; j < NQ; ++j) acc[j] = hn::MulAdd(kv, hn::LoadU(df, tile.q[j] + c), acc[j]);
    }
    for (int j = 0; j < NQ; ++j) {
      const float dot = hn::GetLane(hn::SumOfLanes(df, acc[j]));
      S[j * stride + s] = s < tile.limit[j] ? dot * scale : kNegInf;
    }
  }
}

// Pass 2: out_j = sum_s P[j][s] v_s over valid s < max_limit (P already
// normalised; slots a query may not see have P = 0).
template <int NQ, class KT>
void WeightedValues(const Tile& tile, const KT* v, const uint8_t* valid, int d, const float* P,
                    int64_t stride) {
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  constexpr int64_t kSlotBlock = 64;  // 64 rows of V stay in L1 across the d-chunks
  for (int j = 0; j < NQ; ++j) std::fill(tile.out[j], tile.out[j] + d, 0.f);
  for (int64_t s0 = 0; s0 < tile.max_limit; s0 += kSlotBlock) {
    const int64_t s1 = std::min(tile.max_limit, s0 + kSlotBlock);
    for (int c = 0; c < d; c += N) {
      hn::Vec<DF> acc[NQ];
      for (int j = 0; j < NQ; ++j) acc[j] = hn::LoadU(df, tile.out[j] + c);
      for (int64_t s = s0; s < s1; ++s) {
        if (valid != nullptr && !valid[s]) continue;  // invalid rows may hold garbage
        const auto vv = LoadKv(df, v + s * d + c);
        for (int j = 0; j < NQ; ++j) acc[j] = hn::MulAdd(hn::Set(df, P[j * stride + s]), vv, acc[j]);
      }
      for (int j = 0; j < NQ; ++j) hn::StoreU(acc[j], df, tile.out[j] + c);
    }
  }
}

// Softmax of each query's score row over [0, len) in place (len padded to
// whole vectors with -inf). Returns false in *any_visible[j] when query j sees
// no slot (its row becomes all zeros).
void SoftmaxRows(int nq, float* S, int64_t stride, int64_t len, bool* visible) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  for (int j = 0; j < nq; ++j) {
    float* row = S + j * stride;
    auto vmax = hn::Set(df, -std::numeric_limits<float>::infinity());
    for (int64_t s = 0; s < len; s += N) vmax = hn::Max(vmax, hn::Load(df, row + s));
    const float mx = hn::GetLane(hn::MaxOfLanes(df, vmax));
    visible[j] = mx != -std::numeric_limits<float>::infinity();
    if (!visible[j]) {
      std::fill(row, row + len, 0.f);
      continue;
    }
    const auto vm = hn::Set(df, mx);
    auto vsum = hn::Zero(df);
    for (int64_t s = 0; s < len; s += N) {
      // Exp returns 0 below -104, so -inf scores (masked slots) give exactly 0.
      const auto p = hn::CallExp(df, hn::Sub(hn::Load(df, row + s), vm));
      vsum = hn::Add(vsum, p);
      hn::Store(p, df, row + s);
    }
    const auto inv = hn::Set(df, 1.f / hn::GetLane(hn::SumOfLanes(df, vsum)));
    for (int64_t s = 0; s < len; s += N) hn::Store(hn::Mul(hn::Load(df, row + s), inv), df, row + s);
  }
}

template <class KT>
void RunTile(const AttentionShape& shape, const AttentionTask& task, int kvh, const Tile& tile,
             float* S, int64_t stride) {
  const KT* k = static_cast<const KT*>(task.k[kvh]);
  const KT* v = static_cast<const KT*>(task.v[kvh]);
  const uint8_t* valid = task.valid != nullptr ? task.valid[kvh] : nullptr;
  const int d = shape.head_dim;
  switch (tile.nq) {
#define SKIPKV_ATTN_CASE(n) \
  case n:                   \
    Scores<n, KT>(tile, k, valid, d, shape.scale, S, stride); \
    break;
    SKIPKV_ATTN_CASE(1) SKIPKV_ATTN_CASE(2) SKIPKV_ATTN_CASE(3) SKIPKV_ATTN_CASE(4)
    SKIPKV_ATTN_CASE(5) SKIPKV_ATTN_CASE(6) SKIPKV_ATTN_CASE(7) SKIPKV_ATTN_CASE(8)
#undef SKIPKV_ATTN_CASE
    default:
      SKIPKV_CHECK(false);
  }
  const hn::ScalableTag<float> dfs;
  const int64_t N = static_cast<int64_t>(hn::Lanes(dfs));
  const int64_t len = (tile.max_limit + N - 1) / N * N;  // <= stride
  for (int j = 0; j < tile.nq; ++j) {
    std::fill(S + j * stride + tile.max_limit, S + j * stride + len, -std::numeric_limits<float>::infinity());
  }
  bool visible[kAttnQueryTile];
  SoftmaxRows(tile.nq, S, stride, len, visible);
  switch (tile.nq) {
#define SKIPKV_ATTN_CASE(n) \
  case n:                   \
    WeightedValues<n, KT>(tile, v, valid, d, S, stride); \
    break;
    SKIPKV_ATTN_CASE(1) SKIPKV_ATTN_CASE(2) SKIPKV_ATTN_CASE(3) SKIPKV_ATTN_CASE(4)
    SKIPKV_ATTN_CASE(5) SKIPKV_ATTN_CASE(6) SKIPKV_ATTN_CASE(7) SKIPKV_ATTN_CASE(8)
#undef SKIPKV_ATTN_CASE
    default:
      SKIPKV_CHECK(false);
  }
  if (task.attn_accum != nullptr) {
    float* acc = task.attn_accum[kvh];
    for (int j = 0; j < tile.nq; ++j) {
      if (!visible[j]) continue;
      const float* p = S + j * stride;
      int64_t s = 0;
      for (; s + N <= tile.limit[j]; s += N) {
        hn::StoreU(hn::Add(hn::LoadU(dfs, acc + s), hn::Load(dfs, p + s)), dfs, acc + s);
      }
      for (; s < tile.limit[j]; ++s) acc[s] += p[s];
    }
  }
}

void AttentionItemT(const AttentionShape& shape, const AttnItem& item, float* scratch) {
  const AttentionTask& task = *item.task;
  const int group = shape.n_heads / shape.n_kv_heads;
  const int d = shape.head_dim;
  const hn::ScalableTag<float> dfs;
  const int64_t N = static_cast<int64_t>(hn::Lanes(dfs));
  const int64_t stride = (task.n_slots + N - 1) / N * N;
  for (int64_t q0 = item.q_begin; q0 < item.q_end; q0 += kAttnQueryTile) {
    Tile tile;
    tile.nq = static_cast<int>(std::min<int64_t>(kAttnQueryTile, item.q_end - q0));
    tile.max_limit = 0;
    for (int j = 0; j < tile.nq; ++j) {
      const int64_t qi = q0 + j;
      const int64_t i = qi / group;
      const int64_t head = static_cast<int64_t>(item.kv_head) * group + qi % group;
      tile.q[j] = task.q + (i * shape.n_heads + head) * d;
      tile.out[j] = task.out + (i * shape.n_heads + head) * d;
      tile.limit[j] = std::min<int64_t>(task.n_slots, task.first_query_slot + i + 1);
      tile.max_limit = std::max(tile.max_limit, tile.limit[j]);
    }
    if (shape.kv_type == DType::kF16) {
      RunTile<f16_t>(shape, task, item.kv_head, tile, scratch, stride);
    } else {
      RunTile<float>(shape, task, item.kv_head, tile, scratch, stride);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace skipkv::kernels::internal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace skipkv::kernels::internal {
HWY_EXPORT(AttentionItemT);

void AttentionItem(const AttentionShape& shape, const AttnItem& item, float* scratch) {
  HWY_DYNAMIC_DISPATCH(AttentionItemT)(shape, item, scratch);
}

// Scores of one tile: kAttnQueryTile rows of n_slots rounded up to whole
// vectors (64 lanes covers every target).
size_t AttnScratchFloats(const AttentionShape& shape, int64_t n_slots) {
  return static_cast<size_t>(kAttnQueryTile) * static_cast<size_t>((n_slots + 63) / 64 * 64);
}
}  // namespace skipkv::kernels::internal
#endif
