// SIMD attention over one layer's KV cache, per (task, KV head) work item.
// All queries that read the same KV head -- the G query heads of the GQA group
// times the task's query rows -- are processed in tiles of up to
// kAttnQueryTile queries, and each K and V row is loaded (and converted from
// f16) once per tile, not once per query head as in llama.cpp's decode path.
//
// Per tile, with the bounded KV cache the scores fit in scratch, so softmax is
// exact two-pass rather than online (no rescaling, and H2O needs the final
// probabilities anyway):
//   pass 1  S[s][j] = scale * q_j . k_s for visible slots, else -inf; two
//           slots per step share the q loads, 8 dots reduce in one hadd tree
//   softmax p[s][j] = exp(S[s][j] - max_j) / sum_j, vectorised across queries
//   pass 2  out_j = sum_s p[s][j] v_s (slot blocks kept in L1, d-chunks in registers)
//   H2O     attn_accum[s] += p[s][j], queries in order (row-major, then head)
// A part of a split decode item runs the same passes over its slot range but
// leaves the softmax unnormalised and returns each query's max and sum; ops.cpp
// merges the parts (flash-decoding's split-KV, with exact two-pass parts).
// On AVX-512 targets the head is swept in 16-float chunks (head_dim % 16 == 0),
// elsewhere in 8-float chunks. Every output and accumulator element is
// produced by one work item in a fixed order, so results do not depend on the
// thread count.
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

// Lanes(D) K/V elements as f32 (D: 8 lanes, or 16 for values on AVX-512).
template <class D>
HWY_INLINE hn::Vec<D> LoadKv(D df, const float* p) {
  return hn::LoadU(df, p);
}
template <class D>
HWY_INLINE hn::Vec<D> LoadKv(D df, const f16_t* p) {
  const hn::Rebind<hwy::float16_t, D> dh;
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

#undef SKIPKV_ATTN_X86
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)
#define SKIPKV_ATTN_X86 1
#else
#define SKIPKV_ATTN_X86 0
#endif

constexpr int kQT = kAttnQueryTile;  // scores are stored slot-major: S[s * kQT + j]
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Register blocking: two slots (scores) or two d-chunks (values) per step
// need 2 * NQ accumulators; AVX2 has 16 vector registers, AVX-512 targets 32.
template <int NQ>
constexpr bool kPairs = NQ <= 6 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL;

// Writes the scaled dot products of one slot (dots[j], j < NQ) into S,
// -inf where the query may not see the slot.
template <int NQ>
HWY_INLINE void StoreScores(const Tile& tile, int64_t s, const float* dots, float scale, float* S) {
  SKIPKV_UNROLL
  for (int j = 0; j < kQT; ++j) S[s * kQT + j] = (j < NQ && s < tile.limit[j]) ? dots[j] * scale : kNegInf;
}

#if SKIPKV_ATTN_X86
// a[0..8) -> one vector whose lane j is the sum of a[j]'s lanes.
HWY_INLINE __m256 Reduce8(const __m256* a) {
  const __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 h0123 = _mm256_hadd_ps(h01, h23), h4567 = _mm256_hadd_ps(h45, h67);
  return _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20),
                       _mm256_permute2f128_ps(h0123, h4567, 0x31));
}
#endif

// Horizontal sums of NQ accumulators into dots[0..NQ).
template <int NQ, class D>
HWY_INLINE void ReduceDots(D df, const hn::Vec<D>* acc, float* dots) {
#if SKIPKV_ATTN_X86
  __m256 a[8];
  SKIPKV_UNROLL
  for (int j = 0; j < 8; ++j) {
    if constexpr (hn::MaxLanes(D()) == 16) {  // fold the two halves first
      a[j] = j < NQ ? _mm256_add_ps(_mm512_castps512_ps256(acc[j].raw), _mm512_extractf32x8_ps(acc[j].raw, 1))
                    : _mm256_setzero_ps();
    } else {
      a[j] = j < NQ ? acc[j].raw : _mm256_setzero_ps();
    }
  }
  _mm256_storeu_ps(dots, Reduce8(a));
#else
  SKIPKV_UNROLL
  for (int j = 0; j < NQ; ++j) dots[j] = hn::GetLane(hn::SumOfLanes(df, acc[j]));
#endif
}

// Pass 1: S[s * kQT + j] for s < max_limit, in chunks of Lanes(D) floats of
// the head (D: 8 lanes, or 16 on AVX-512 when head_dim allows). Invalid
// slots are skipped (their rows may hold garbage); each (slot, query) dot
// follows the same FMA order and reduction whether or not its slot was
// paired with the next one.
template <int NQ, class KT, class D>
void ScoresT(D df, const Tile& tile, const KT* k, const uint8_t* valid, int d, float scale, float* S) {
  const int N = static_cast<int>(hn::Lanes(df));
  alignas(32) float dots0[kQT], dots1[kQT];
  int64_t s = 0;
  while (s < tile.max_limit) {
    if (valid != nullptr && !valid[s]) {
      SKIPKV_UNROLL
      for (int j = 0; j < kQT; ++j) S[s * kQT + j] = kNegInf;
      ++s;
      continue;
    }
    const bool pair = kPairs<NQ> && s + 1 < tile.max_limit && (valid == nullptr || valid[s + 1]);
    const KT* k0 = k + s * d;
    hn::Vec<D> acc0[NQ];
    SKIPKV_UNROLL
    for (int j = 0; j < NQ; ++j) acc0[j] = hn::Zero(df);
    if (pair) {
      const KT* k1 = k0 + d;
      hn::Vec<D> acc1[NQ];
      SKIPKV_UNROLL
      for (int j = 0; j < NQ; ++j) acc1[j] = hn::Zero(df);
      for (int c = 0; c < d; c += N) {
        const auto kv0 = LoadKv(df, k0 + c), kv1 = LoadKv(df, k1 + c);
        SKIPKV_UNROLL
        for (int j = 0; j < NQ; ++j) {
          const auto qv = hn::LoadU(df, tile.q[j] + c);
          acc0[j] = hn::MulAdd(kv0, qv, acc0[j]);
          acc1[j] = hn::MulAdd(kv1, qv, acc1[j]);
        }
      }
      ReduceDots<NQ>(df, acc0, dots0);
      ReduceDots<NQ>(df, acc1, dots1);
      StoreScores<NQ>(tile, s, dots0, scale, S);
      StoreScores<NQ>(tile, s + 1, dots1, scale, S);
      s += 2;
    } else {
      for (int c = 0; c < d; c += N) {
        const auto kv0 = LoadKv(df, k0 + c);
        SKIPKV_UNROLL
        for (int j = 0; j < NQ; ++j) acc0[j] = hn::MulAdd(kv0, hn::LoadU(df, tile.q[j] + c), acc0[j]);
      }
      ReduceDots<NQ>(df, acc0, dots0);
      StoreScores<NQ>(tile, s, dots0, scale, S);
      s += 1;
    }
  }
}

template <int NQ, class KT>
void Scores(const Tile& tile, const KT* k, const uint8_t* valid, int d, float scale, float* S) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (d % 16 == 0) return ScoresT<NQ, KT>(hn::CappedTag<float, 16>(), tile, k, valid, d, scale, S);
#endif
  ScoresT<NQ, KT>(DF(), tile, k, valid, d, scale, S);
}

// The max of columns [jj, jj + Lanes) of S[0..len)[kQT], 0 for a column with
// no visible slot (Exp returns exactly 0 below -104, so -inf scores, masked,
// then give 0).
HWY_INLINE hn::Vec<DF> ColumnMax(DF df, const float* S, int64_t len, int jj) {
  const auto neg_inf = hn::Set(df, kNegInf);
  auto vmax = neg_inf;
  for (int64_t s = 0; s < len; ++s) vmax = hn::Max(vmax, hn::LoadU(df, S + s * kQT + jj));
  return hn::IfThenZeroElse(hn::Eq(vmax, neg_inf), vmax);
}

// Those columns become exp(S[s][j] - m_j) in place; returns their sums.
HWY_INLINE hn::Vec<DF> ExpColumns(DF df, float* S, int64_t len, int jj, hn::Vec<DF> m) {
  auto sum = hn::Zero(df);
  for (int64_t s = 0; s < len; ++s) {
    const auto p = hn::CallExp(df, hn::Sub(hn::LoadU(df, S + s * kQT + jj), m));
    sum = hn::Add(sum, p);
    hn::StoreU(p, df, S + s * kQT + jj);
  }
  return sum;
}

// Softmax over slots of each query column of S[0..len)[kQT], in place,
// vectorised across the queries. A column with no visible slot becomes 0.
void SoftmaxColumns(float* S, int64_t len) {
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  for (int jj = 0; jj < kQT; jj += N) {
    const auto vsum = ExpColumns(df, S, len, jj, ColumnMax(df, S, len, jj));
    const auto inv = hn::IfThenElseZero(hn::Gt(vsum, hn::Zero(df)), hn::Div(hn::Set(df, 1.f), vsum));
    for (int64_t s = 0; s < len; ++s) {
      hn::StoreU(hn::Mul(hn::LoadU(df, S + s * kQT + jj), inv), df, S + s * kQT + jj);
    }
  }
}

// Softmax pass of a split item's part: as SoftmaxColumns, but the columns stay
// unnormalised, exp(S[s][j] - m_j), and stats[2j], stats[2j + 1] receive m_j
// and l_j = sum_s exp(S[s][j] - m_j) (both 0 for a column with no visible slot).
void PartialSoftmaxColumns(float* S, int64_t len, float* stats) {
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  alignas(32) float m_buf[kQT], l_buf[kQT];
  for (int jj = 0; jj < kQT; jj += N) {
    const auto m = ColumnMax(df, S, len, jj);
    const auto vsum = ExpColumns(df, S, len, jj, m);
    hn::Store(m, df, m_buf + jj);
    hn::Store(vsum, df, l_buf + jj);
  }
  for (int j = 0; j < kQT; ++j) {
    stats[2 * j] = m_buf[j];
    stats[2 * j + 1] = l_buf[j];
  }
}

// out_j[c0, c0 + NC * N) += sum_{s in [s0, s1), valid} P[s][j] v_s[c0 ...],
// N = Lanes(D). Every output element gets the same FMA sequence (slot order)
// whatever the vector width, so the 8- and 16-lane versions agree bit for bit.
template <int NQ, int NC, class KT, class D>
HWY_INLINE void ValueChunks(D df, const Tile& tile, const KT* v, const uint8_t* valid, int d, const float* P,
                            int64_t s0, int64_t s1, int c0) {
  const int N = static_cast<int>(hn::Lanes(df));
  hn::Vec<D> acc[NC][NQ];
  SKIPKV_UNROLL
  for (int u = 0; u < NC; ++u) {
    SKIPKV_UNROLL
    for (int j = 0; j < NQ; ++j) acc[u][j] = hn::LoadU(df, tile.out[j] + c0 + u * N);
  }
  for (int64_t s = s0; s < s1; ++s) {
    if (valid != nullptr && !valid[s]) continue;  // invalid rows may hold garbage
    hn::Vec<D> vv[NC];
    SKIPKV_UNROLL
    for (int u = 0; u < NC; ++u) vv[u] = LoadKv(df, v + s * d + c0 + u * N);
    SKIPKV_UNROLL
    for (int j = 0; j < NQ; ++j) {
      const auto p = hn::Set(df, P[s * kQT + j]);
      SKIPKV_UNROLL
      for (int u = 0; u < NC; ++u) acc[u][j] = hn::MulAdd(p, vv[u], acc[u][j]);
    }
  }
  SKIPKV_UNROLL
  for (int u = 0; u < NC; ++u) {
    SKIPKV_UNROLL
    for (int j = 0; j < NQ; ++j) hn::StoreU(acc[u][j], df, tile.out[j] + c0 + u * N);
  }
}

// Pass 2: out_j = sum_s P[s][j] v_s over valid s < max_limit (P normalised;
// 0 where the query may not see the slot). Slot blocks of 64 rows stay in L1
// while the d-chunks sweep them; each (query, chunk) accumulates in slot order.
// AVX-512 targets sweep 16-float chunks when head_dim allows (half the loads,
// converts and FMAs of 8-float chunks; same results).
template <int NQ, class KT>
void WeightedValues(const Tile& tile, const KT* v, const uint8_t* valid, int d, const float* P) {
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  constexpr int64_t kSlotBlock = 64;
  SKIPKV_UNROLL
  for (int j = 0; j < NQ; ++j) std::fill(tile.out[j], tile.out[j] + d, 0.f);
  for (int64_t s0 = 0; s0 < tile.max_limit; s0 += kSlotBlock) {
    const int64_t s1 = std::min(tile.max_limit, s0 + kSlotBlock);
    int c = 0;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    const hn::CappedTag<float, 16> d16;
    for (; c + 32 <= d; c += 32) ValueChunks<NQ, 2, KT>(d16, tile, v, valid, d, P, s0, s1, c);
    for (; c + 16 <= d; c += 16) ValueChunks<NQ, 1, KT>(d16, tile, v, valid, d, P, s0, s1, c);
#endif
    if constexpr (kPairs<NQ>) {
      for (; c + 2 * N <= d; c += 2 * N) ValueChunks<NQ, 2, KT>(df, tile, v, valid, d, P, s0, s1, c);
    }
    for (; c < d; c += N) ValueChunks<NQ, 1, KT>(df, tile, v, valid, d, P, s0, s1, c);
  }
}

// One tile of queries over slots [s0, s0 + tile.max_limit) of KV head kvh
// (the tile's limits count from s0). part_stats == nullptr: the softmax is
// normalised and H2O's attn_accum updated; otherwise (a part of a split item)
// the probabilities stay unnormalised and each query's max and sum go to
// part_stats. Each (slot, query) score and value FMA is the same either way.
template <class KT>
void RunTile(const AttentionShape& shape, const AttentionTask& task, int kvh, int64_t s0, const Tile& tile,
             float* S, float* part_stats) {
  const int d = shape.head_dim;
  const KT* k = static_cast<const KT*>(task.k[kvh]) + s0 * d;
  const KT* v = static_cast<const KT*>(task.v[kvh]) + s0 * d;
  const uint8_t* valid = task.valid != nullptr ? task.valid[kvh] + s0 : nullptr;
  switch (tile.nq) {
#define SKIPKV_ATTN_CASE(n)                                 \
  case n:                                                   \
    Scores<n, KT>(tile, k, valid, d, shape.scale, S);       \
    if (part_stats == nullptr) {                            \
      SoftmaxColumns(S, tile.max_limit);                    \
    } else {                                                \
      PartialSoftmaxColumns(S, tile.max_limit, part_stats); \
    }                                                       \
    WeightedValues<n, KT>(tile, v, valid, d, S);            \
    break;
    SKIPKV_ATTN_CASE(1) SKIPKV_ATTN_CASE(2) SKIPKV_ATTN_CASE(3) SKIPKV_ATTN_CASE(4)
    SKIPKV_ATTN_CASE(5) SKIPKV_ATTN_CASE(6) SKIPKV_ATTN_CASE(7) SKIPKV_ATTN_CASE(8)
#undef SKIPKV_ATTN_CASE
    default:
      SKIPKV_CHECK(false);
  }
  if (task.attn_accum != nullptr && part_stats == nullptr) {
    // H2O: per slot, add the probabilities in query order (row, then head),
    // as the reference does. Slots a query cannot see have P = 0.
    float* acc = task.attn_accum[kvh] + s0;
    for (int64_t s = 0; s < tile.max_limit; ++s) {
      if (valid != nullptr && !valid[s]) continue;
      float a = acc[s];
      for (int j = 0; j < tile.nq; ++j) {
        if (s < tile.limit[j]) a += S[s * kQT + j];
      }
      acc[s] = a;
    }
  }
}

// A whole item reads slots [0, n_slots) and writes the task's output rows; a
// part of a split item (AttnItem::part_out, one tile) reads its slot range,
// with the causal limits shifted to its first slot, and writes part_out.
void AttentionItemT(const AttentionShape& shape, const AttnItem& item, float* scratch) {
  const AttentionTask& task = *item.task;
  const int group = shape.n_heads / shape.n_kv_heads;
  const int d = shape.head_dim;
  const bool part = item.part_out != nullptr;
  const int64_t s0 = part ? item.slot_begin : 0;
  const int64_t len = part ? item.slot_end - item.slot_begin : task.n_slots;
  for (int64_t q0 = item.q_begin; q0 < item.q_end; q0 += kAttnQueryTile) {
    Tile tile;
    tile.nq = static_cast<int>(std::min<int64_t>(kAttnQueryTile, item.q_end - q0));
    tile.max_limit = 0;
    for (int j = 0; j < tile.nq; ++j) {
      const int64_t qi = q0 + j;
      const int64_t i = qi / group;
      const int64_t head = static_cast<int64_t>(item.kv_head) * group + qi % group;
      tile.q[j] = task.q + (i * shape.n_heads + head) * d;
      tile.out[j] =
          part ? item.part_out + (qi - item.q_begin) * d : task.out + (i * shape.n_heads + head) * d;
      const int64_t limit = std::min<int64_t>(task.n_slots, task.first_query_slot + i + 1);
      tile.limit[j] = std::clamp<int64_t>(limit - s0, 0, len);
      tile.max_limit = std::max(tile.max_limit, tile.limit[j]);
    }
    if (shape.kv_type == DType::kF16) {
      RunTile<f16_t>(shape, task, item.kv_head, s0, tile, scratch, item.part_stats);
    } else {
      RunTile<float>(shape, task, item.kv_head, s0, tile, scratch, item.part_stats);
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

// Scores of one tile: n_slots rows of kAttnQueryTile floats.
size_t AttnScratchFloats(const AttentionShape& shape, int64_t n_slots) {
  return static_cast<size_t>(kAttnQueryTile) * static_cast<size_t>(n_slots);
}
}  // namespace skipkv::kernels::internal
#endif
