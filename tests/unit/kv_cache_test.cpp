// Tests of SequenceKvCache: append/read in f16 and f32, growth for FullKV,
// the bounded capacity error, per-head compaction keeping slot order and
// metadata, the query window ring, and byte accounting.
#include <gtest/gtest.h>

#include <vector>

#include "kv/kv_cache.h"

namespace skipkv {
namespace {

KvCacheShape SmallShape(KvDType dtype) {
  KvCacheShape s;
  s.n_layers = 2;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 3;
  s.query_window = 3;
  s.dtype = dtype;
  return s;
}

// K value of (token t, head h, dim i) — exactly representable in f16.
float KVal(int t, int h, int i) { return static_cast<float>(t * 8 + h * 4 + i) * 0.25f; }

void AppendTokens(SequenceKvCache& c, int layer, int from, int to) {
  const auto& s = c.shape();
  std::vector<float> k(s.n_kv_heads * s.head_dim), v(k.size());
  for (int t = from; t < to; ++t) {
    for (int h = 0; h < s.n_kv_heads; ++h)
      for (int i = 0; i < s.head_dim; ++i) {
        k[h * s.head_dim + i] = KVal(t, h, i);
        v[h * s.head_dim + i] = -KVal(t, h, i);
      }
    c.Append(layer, k.data(), v.data(), /*gen_pos=*/t * 2, /*valid=*/t != 1);
  }
}

TEST(SequenceKvCache, AppendReadAndGrow) {
  for (KvDType dt : {KvDType::kF16, KvDType::kF32}) {
    SequenceKvCache c(SmallShape(dt), /*initial=*/2, SequenceKvCache::kUnbounded);
    ASSERT_TRUE(c.Reserve(5).ok());
    EXPECT_GE(c.capacity(), 5);
    AppendTokens(c, 0, 0, 5);
    EXPECT_EQ(c.size(0), 5);
    EXPECT_EQ(c.size(1), 0);
    ASSERT_TRUE(c.Reserve(20).ok());  // grows, keeps contents
    std::vector<float> row(3);
    for (int t = 0; t < 5; ++t)
      for (int h = 0; h < 2; ++h) {
        c.ReadK(0, h, t, row.data());
        for (int i = 0; i < 3; ++i) EXPECT_EQ(row[i], KVal(t, h, i));
        c.ReadV(0, h, t, row.data());
        EXPECT_EQ(row[0], -KVal(t, h, 0));
        EXPECT_EQ(c.GenPos(0, h)[t], t * 2);
        EXPECT_EQ(c.Valid(0, h)[t], t != 1 ? 1 : 0);
      }
  }
}

TEST(SequenceKvCache, BoundedCapacityRefusesOverflow) {
  SequenceKvCache c(SmallShape(KvDType::kF16), 0, /*max_capacity=*/4);
  EXPECT_EQ(c.capacity(), 4);
  EXPECT_TRUE(c.Reserve(4).ok());
  AppendTokens(c, 0, 0, 3);
  Status s = c.Reserve(2);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("4"), std::string::npos);
}

TEST(SequenceKvCache, CompactKeepsChosenSlotsPerHead) {
  SequenceKvCache c(SmallShape(KvDType::kF32), 8, SequenceKvCache::kUnbounded);
  AppendTokens(c, 1, 0, 6);
  c.Compact(1, {{0, 2, 5}, {1, 3, 4}});
  ASSERT_EQ(c.size(1), 3);
  std::vector<float> row(3);
  const int expect[2][3] = {{0, 2, 5}, {1, 3, 4}};
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 3; ++j) {
      const int t = expect[h][j];
      c.ReadK(1, h, j, row.data());
      EXPECT_EQ(row[2], KVal(t, h, 2));
      EXPECT_EQ(c.GenPos(1, h)[j], t * 2);
      EXPECT_EQ(c.Valid(1, h)[j], t != 1 ? 1 : 0);
    }
  EXPECT_EQ(c.LiveKvBytes(), 3u * 2 * 3 * 4 * 2);
}

TEST(SequenceKvCache, QueryWindowKeepsLastInOrder) {
  SequenceKvCache c(SmallShape(KvDType::kF16), 4, SequenceKvCache::kUnbounded);
  const int n = 4 * 3;  // n_heads * head_dim
  std::vector<float> q(n);
  for (int t = 0; t < 5; ++t) {
    for (int i = 0; i < n; ++i) q[i] = static_cast<float>(t * 100 + i);
    c.PushQuery(0, q.data());
  }
  ASSERT_EQ(c.QueryWindowCount(0), 3);
  std::vector<float> out(4 * 3 * 3);
  c.CopyQueryWindow(0, out.data());
  // out[h][w][d]: window w holds token 2 + w.
  for (int h = 0; h < 4; ++h)
    for (int w = 0; w < 3; ++w)
      for (int d = 0; d < 3; ++d)
        EXPECT_EQ(out[(h * 3 + w) * 3 + d], static_cast<float>((2 + w) * 100 + h * 3 + d));
  EXPECT_EQ(c.QueryWindowCount(1), 0);
}

}  // namespace
}  // namespace skipkv
