// SIMD Attention vs the scalar oracle on every compiled target: decode and
// prefill tasks in one call, GQA groups of 1, 4 and 6, f16 and f32 KV, invalid
// slots and slots past the causal limit filled with NaN (must never be read
// into a result), attn_accum (H2O) sums, rows that see nothing, decode over
// long caches split into parts, and bit-identical results for 1 and 3 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "simd_targets.h"

namespace skipkv {
namespace {

using kernels::AttentionShape;
using kernels::AttentionTask;

// Owns the buffers of one task.
struct TaskData {
  std::vector<float> q, out;
  std::vector<std::vector<uint8_t>> k, v;  // [kv head] raw bytes
  std::vector<std::vector<uint8_t>> valid;
  std::vector<std::vector<float>> accum;
  std::vector<const void*> kp, vp;
  std::vector<const uint8_t*> validp;
  std::vector<float*> accump;
  AttentionTask task;
};

void MakeTask(const AttentionShape& s, int n_q, int64_t n_slots, int64_t first_query_slot, bool masks,
              bool accum, uint32_t seed, TaskData* td) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::bernoulli_distribution drop(0.25);
  const size_t elem = s.kv_type == DType::kF16 ? 2 : 4;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  td->q.resize(static_cast<size_t>(n_q) * s.n_heads * s.head_dim);
  for (auto& x : td->q) x = nd(rng);
  td->out.assign(td->q.size(), -7.f);  // overwritten by the kernel
  td->k.assign(s.n_kv_heads, std::vector<uint8_t>(n_slots * s.head_dim * elem));
  td->v = td->k;
  td->valid.assign(s.n_kv_heads, std::vector<uint8_t>(n_slots, 1));
  td->accum.assign(s.n_kv_heads, std::vector<float>(n_slots));
  const int64_t last_visible = first_query_slot + n_q;  // slots >= this are never visible
  for (int h = 0; h < s.n_kv_heads; ++h) {
    for (int64_t slot = 0; slot < n_slots; ++slot) {
      if (masks && drop(rng)) td->valid[h][slot] = 0;
      const bool garbage = !td->valid[h][slot] || slot >= last_visible;
      for (int j = 0; j < s.head_dim; ++j) {
        const float kv[2] = {garbage ? nan : nd(rng), garbage ? nan : nd(rng)};
        for (int which = 0; which < 2; ++which) {
          uint8_t* dst = (which == 0 ? td->k : td->v)[h].data() + (slot * s.head_dim + j) * elem;
          if (s.kv_type == DType::kF16) {
            const f16_t hv = F32ToF16(kv[which]);
            std::memcpy(dst, &hv, 2);
          } else {
            std::memcpy(dst, &kv[which], 4);
          }
        }
      }
    }
    for (auto& a : td->accum[h]) a = static_cast<float>(rng() % 4);  // accumulates onto existing sums
    td->kp.push_back(td->k[h].data());
    td->vp.push_back(td->v[h].data());
    td->validp.push_back(td->valid[h].data());
    td->accump.push_back(td->accum[h].data());
  }
  AttentionTask& t = td->task;
  t.q = td->q.data();
  t.n_q = n_q;
  t.n_slots = n_slots;
  t.first_query_slot = first_query_slot;
  t.k = td->kp.data();
  t.v = td->vp.data();
  t.valid = masks ? td->validp.data() : nullptr;
  t.attn_accum = accum ? td->accump.data() : nullptr;
  t.out = td->out.data();
}

struct Config {
  int n_heads, n_kv_heads, head_dim;
};

class AttentionTest : public testing::SimdTargetTest {};

TEST_P(AttentionTest, MatchesReference) {
  const Config configs[] = {{12, 2, 128}, {8, 2, 64}, {3, 3, 40}, {4, 1, 16}};
  ThreadPool pool(3);
  for (const Config& c : configs) {
    for (DType kv : {DType::kF16, DType::kF32}) {
      for (bool accum : {false, true}) {
        SCOPED_TRACE("heads=" + std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv_heads) + " d=" +
                     std::to_string(c.head_dim) + " kv=" + DTypeName(kv) + " accum=" + std::to_string(accum));
        AttentionShape s{c.n_heads, c.n_kv_heads, c.head_dim, kv, 1.f / std::sqrt(float(c.head_dim))};
        // decode (with masks), prefill continuing a cache (masks), a long
        // prefill from slot 0 (no masks; several query chunks), a decode with
        // nothing valid.
        TaskData a, b, cc, d, ra, rb, rc, rd;
        MakeTask(s, 1, 37, 36, true, accum, 1, &a);
        MakeTask(s, 13, 61, 40, true, accum, 2, &b);
        MakeTask(s, 23, 23, 0, false, accum, 3, &cc);
        MakeTask(s, 1, 9, 8, true, accum, 4, &d);
        std::fill(d.valid[0].begin(), d.valid[0].end(), 0);
        MakeTask(s, 1, 37, 36, true, accum, 1, &ra);
        MakeTask(s, 13, 61, 40, true, accum, 2, &rb);
        MakeTask(s, 23, 23, 0, false, accum, 3, &rc);
        MakeTask(s, 1, 9, 8, true, accum, 4, &rd);
        std::fill(rd.valid[0].begin(), rd.valid[0].end(), 0);
        const AttentionTask tasks[] = {a.task, b.task, cc.task, d.task};
        const AttentionTask rtasks[] = {ra.task, rb.task, rc.task, rd.task};
        kernels::Attention(s, tasks, pool);
        kernels::ref::Attention(s, rtasks);
        TaskData* got[] = {&a, &b, &cc, &d};
        TaskData* want[] = {&ra, &rb, &rc, &rd};
        for (int t = 0; t < 4; ++t) {
          for (size_t i = 0; i < got[t]->out.size(); ++i) {
            ASSERT_TRUE(std::isfinite(got[t]->out[i])) << "task " << t << " i=" << i;
            ASSERT_NEAR(got[t]->out[i], want[t]->out[i], 2e-5f) << "task " << t << " i=" << i;
          }
          for (int h = 0; h < c.n_kv_heads; ++h) {
            for (size_t sl = 0; sl < got[t]->accum[h].size(); ++sl) {
              ASSERT_NEAR(got[t]->accum[h][sl], want[t]->accum[h][sl], 2e-5f) << "task " << t << " slot " << sl;
            }
          }
        }
        // Task d's first KV head had nothing valid: its query heads output 0.
        const int group = c.n_heads / c.n_kv_heads;
        for (int qh = 0; qh < group; ++qh) {
          for (int j = 0; j < c.head_dim; ++j) ASSERT_EQ(d.out[qh * c.head_dim + j], 0.f);
        }
      }
    }
  }
}

TEST_P(AttentionTest, DeterministicAcrossThreadCounts) {
  AttentionShape s{12, 2, 128, DType::kF16, 0.088f};
  for (bool accum : {false, true}) {
    TaskData a1, b1, a3, b3;
    MakeTask(s, 1, 300, 299, true, accum, 7, &a1);
    MakeTask(s, 40, 120, 80, true, accum, 8, &b1);
    MakeTask(s, 1, 300, 299, true, accum, 7, &a3);
    MakeTask(s, 40, 120, 80, true, accum, 8, &b3);
    const AttentionTask t1[] = {a1.task, b1.task}, t3[] = {a3.task, b3.task};
    ThreadPool p1(1), p3(3);
    kernels::Attention(s, t1, p1);
    kernels::Attention(s, t3, p3);
    ASSERT_EQ(0, std::memcmp(a1.out.data(), a3.out.data(), a1.out.size() * 4));
    ASSERT_EQ(0, std::memcmp(b1.out.data(), b3.out.data(), b1.out.size() * 4));
    for (int h = 0; h < 2; ++h) {
      ASSERT_EQ(0, std::memcmp(b1.accum[h].data(), b3.accum[h].data(), b1.accum[h].size() * 4));
    }
  }
}

// Hand-computed: one head, d = 8 (only dims 0, 1 non-zero), scale 1.
// q = (1, 0), k0 = (0, 0), k1 = (ln 3, 0): scores 0 and ln 3, so p = (1/4, 3/4);
// v0 = (4, 0), v1 = (0, 8): out = (1, 6). A query at slot 0 sees only slot 0:
// out = v0. attn_accum gains p.
TEST_P(AttentionTest, HandComputedTwoSlots) {
  AttentionShape s{1, 1, 8, DType::kF32, 1.f};
  float q[2][8] = {{1}, {1}};
  float k[2][8] = {{0, 0}, {std::log(3.f), 0}};
  float v[2][8] = {{4, 0}, {0, 8}};
  float out[2][8];
  float accum[2] = {0, 0};
  const void* kp[] = {k};
  const void* vp[] = {v};
  float* ap[] = {accum};
  AttentionTask t;
  t.q = &q[0][0];
  t.n_q = 2;  // rows at slots 0 and 1
  t.n_slots = 2;
  t.first_query_slot = 0;
  t.k = kp;
  t.v = vp;
  t.attn_accum = ap;
  t.out = &out[0][0];
  ThreadPool pool(1);
  for (int pass = 0; pass < 2; ++pass) {
    accum[0] = accum[1] = 0;
    if (pass == 0) {
      kernels::Attention(s, {&t, 1}, pool);
    } else {
      kernels::ref::Attention(s, {&t, 1});
    }
    EXPECT_NEAR(out[0][0], 4.f, 1e-6f);  // row 0 sees slot 0 only
    EXPECT_NEAR(out[0][1], 0.f, 1e-6f);
    EXPECT_NEAR(out[1][0], 1.f, 1e-6f);  // row 1: 1/4 * 4
    EXPECT_NEAR(out[1][1], 6.f, 1e-6f);  //        3/4 * 8
    EXPECT_NEAR(accum[0], 1.f + 0.25f, 1e-6f);
    EXPECT_NEAR(accum[1], 0.75f, 1e-6f);
  }
}

// Decode over a long cache splits its slots into parts (kernels::kAttnPartSlots
// each at least) merged by their softmax statistics: against the oracle for 2,
// 3 and 4 parts, GQA groups of 1, 4, 6 and 8 query heads (two query rows for
// the group of 4: 8 queries with different causal limits), f16 and f32 KV,
// masks, NaN beyond the visible slots, and a KV head whose first part has no
// valid slot (its statistics must not enter the merge).
TEST_P(AttentionTest, SplitDecodeMatchesReference) {
  constexpr int64_t P = kernels::kAttnPartSlots;
  const Config configs[] = {{12, 2, 128}, {8, 2, 64}, {4, 1, 16}, {32, 4, 128}};
  ThreadPool pool(3);
  for (const Config& c : configs) {
    for (DType kv : {DType::kF16, DType::kF32}) {
      SCOPED_TRACE("heads=" + std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv_heads) +
                   " d=" + std::to_string(c.head_dim) + " kv=" + DTypeName(kv));
      AttentionShape s{c.n_heads, c.n_kv_heads, c.head_dim, kv, 1.f / std::sqrt(float(c.head_dim))};
      const int rows = c.n_heads / c.n_kv_heads == 4 ? 2 : 1;
      const int64_t slots[] = {2 * P, 3 * P + 77, 4 * P + 5};
      TaskData got[3], want[3];
      AttentionTask tasks[3], rtasks[3];
      for (int t = 0; t < 3; ++t) {
        MakeTask(s, rows, slots[t], slots[t] - rows, true, false, 20 + t, &got[t]);
        MakeTask(s, rows, slots[t], slots[t] - rows, true, false, 20 + t, &want[t]);
        tasks[t] = got[t].task;
        rtasks[t] = want[t].task;
      }
      for (TaskData* td : {&got[1], &want[1]})
        std::fill(td->valid[0].begin(), td->valid[0].begin() + P + 40, 0);
      kernels::Attention(s, tasks, pool);
      kernels::ref::Attention(s, rtasks);
      for (int t = 0; t < 3; ++t) {
        for (size_t i = 0; i < got[t].out.size(); ++i) {
          ASSERT_TRUE(std::isfinite(got[t].out[i])) << "task " << t << " i=" << i;
          ASSERT_NEAR(got[t].out[i], want[t].out[i], 2e-5f) << "task " << t << " i=" << i;
        }
      }
    }
  }
}

// The split is a function of the task alone: 1 and 3 threads agree bit for bit,
// and a batch gives each sequence the result it gets alone.
TEST_P(AttentionTest, SplitDecodeDeterministic) {
  AttentionShape s{12, 2, 128, DType::kF16, 0.088f};
  const int64_t n = 5 * kernels::kAttnPartSlots + 3;
  TaskData a1, a3, b3, alone;
  MakeTask(s, 1, n, n - 1, true, false, 9, &a1);
  MakeTask(s, 1, n, n - 1, true, false, 9, &a3);
  MakeTask(s, 1, 700, 699, true, false, 10, &b3);
  MakeTask(s, 1, n, n - 1, true, false, 9, &alone);
  ThreadPool p1(1), p3(3);
  const AttentionTask one[] = {a1.task}, batch[] = {b3.task, a3.task}, solo[] = {alone.task};
  kernels::Attention(s, one, p1);
  kernels::Attention(s, batch, p3);
  kernels::Attention(s, solo, p3);
  ASSERT_EQ(0, std::memcmp(a1.out.data(), a3.out.data(), a1.out.size() * 4));
  ASSERT_EQ(0, std::memcmp(alone.out.data(), a3.out.data(), a1.out.size() * 4));
}

// Hand-computed split: one head, d = 8, 2 * kAttnPartSlots slots, all keys 0
// (score 0) but one in the second part with score ln(L + 1), L = the other
// slots' count; its value is (1, 0), the others' (0, 1). Weights: 1 for each
// of L slots, L + 1 for that one, so out = ((L + 1) / (2L + 1), L / (2L + 1)).
TEST_P(AttentionTest, HandComputedSplitDecode) {
  const int64_t n = 2 * kernels::kAttnPartSlots, hot = n - 100, others = n - 1;
  AttentionShape s{1, 1, 8, DType::kF32, 1.f};
  std::vector<float> q(8, 0.f), k(n * 8, 0.f), v(n * 8, 0.f), out(8, -1.f);
  q[0] = 1.f;
  k[hot * 8] = std::log(static_cast<float>(others + 1));
  for (int64_t i = 0; i < n; ++i) v[i * 8 + (i == hot ? 0 : 1)] = 1.f;
  const void* kp[] = {k.data()};
  const void* vp[] = {v.data()};
  AttentionTask t;
  t.q = q.data();
  t.n_q = 1;
  t.n_slots = n;
  t.first_query_slot = n - 1;
  t.k = kp;
  t.v = vp;
  t.out = out.data();
  ThreadPool pool(2);
  kernels::Attention(s, {&t, 1}, pool);
  const float total = 2.f * static_cast<float>(others) + 1.f;
  EXPECT_NEAR(out[0], static_cast<float>(others + 1) / total, 1e-5f);
  EXPECT_NEAR(out[1], static_cast<float>(others) / total, 1e-5f);
  for (int c = 2; c < 8; ++c) EXPECT_EQ(out[c], 0.f);
}

INSTANTIATE_TEST_SUITE_P(Targets, AttentionTest, ::testing::ValuesIn(testing::CompiledSimdTargets()),
                         testing::TargetParamName);

}  // namespace
}  // namespace skipkv
