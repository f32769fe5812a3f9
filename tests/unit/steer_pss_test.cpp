// RedundantSentenceSet (spec Eq. 1, 3, 7; §6.7; A7): a hand-worked example,
// a naive double-precision oracle on random sentences with planted
// near-duplicates, and the K bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "sentence/redundant_set.h"

namespace skipkv {
namespace {

using Table = std::map<std::pair<int32_t, int32_t>, float>;

Sentence Span(int32_t b, int32_t e) {
  Sentence s;
  s.b = b;
  s.e = e;
  return s;
}

TEST(RedundantSentenceSetTest, HandWorkedExample) {
  // Unit vectors in 2D: v0 = (1, 0), v1 = (0.6, 0.8), v2 = (0.96, 0.28), v3 = (1, 0).
  RedundantSentenceSet set(2, /*tau=*/0.95f, /*max_sentences=*/1024);
  GenPosRangePenalty penalty;
  const float v[4][2] = {{1, 0}, {0.6f, 0.8f}, {0.96f, 0.28f}, {1, 0}};
  for (int i = 0; i < 3; ++i) set.Push(Span(10 * i, 10 * i + 5), v[i]);
  // v2·v0 = 0.96 > τ: sentence 0 is redundant with λ = 0.96; v2·v1 = 0.8 and
  // v1·v0 = 0.6 are not.
  EXPECT_EQ(set.Update(&penalty), 1);
  ASSERT_EQ(set.table().size(), 1u);
  EXPECT_NEAR(set.table().at({0, 5}), 0.96f, 1e-6);
  EXPECT_EQ(set.comparisons(), 0 + 1 + 2);
  // v3 = v0: v3·v0 = 1 raises λ_0 to 1 (max, A7); v3·v2 = 0.96 adds sentence 2.
  set.Push(Span(30, 35), v[3]);
  EXPECT_EQ(set.pending(), 1);
  EXPECT_EQ(set.Update(&penalty), 1);
  EXPECT_EQ(set.pending(), 0);
  ASSERT_EQ(set.table().size(), 2u);
  EXPECT_FLOAT_EQ(set.table().at({0, 5}), 1.f);
  EXPECT_NEAR(set.table().at({20, 25}), 0.96f, 1e-6);
  EXPECT_EQ(set.table().count({30, 35}), 0u);  // the later sentence of a pair is kept
  EXPECT_EQ(penalty.ranges(), set.table());
  EXPECT_EQ(set.comparisons(), 3 + 3);
  // An update with nothing new changes nothing.
  EXPECT_EQ(set.Update(&penalty), 0);
  EXPECT_EQ(set.comparisons(), 6);
  // Strictly greater than τ: a similarity of exactly τ = 1 does not count.
  RedundantSentenceSet strict(2, 1.f, 8);
  strict.Push(Span(0, 1), v[0]);
  strict.Push(Span(2, 3), v[3]);
  EXPECT_EQ(strict.Update(nullptr), 0);
  EXPECT_TRUE(strict.table().empty());
}

TEST(RedundantSentenceSetTest, OnlyTheLastKSentencesAreCompared) {
  const float a[2] = {1, 0}, b[2] = {0, 1}, c[2] = {-1, 0};
  // Order: a b c a. The repeat of a is 3 sentences after its first copy.
  for (int64_t k : {1, 2, 3}) {
    RedundantSentenceSet set(2, 0.9f, k);
    set.Push(Span(0, 1), a);
    set.Push(Span(2, 3), b);
    set.Push(Span(4, 5), c);
    set.Push(Span(6, 7), a);
    set.Update(nullptr);
    EXPECT_EQ(set.table().count({0, 1}), k >= 3 ? 1u : 0u) << "K = " << k;
    EXPECT_EQ(set.comparisons(), std::min<int64_t>(0, k) + std::min<int64_t>(1, k) + std::min<int64_t>(2, k) +
                                     std::min<int64_t>(3, k));
    EXPECT_LE(set.stored(), k);  // only the last K embeddings are kept
  }
  // Across updates: the window slides over sentences compared earlier.
  RedundantSentenceSet set(2, 0.9f, 2);
  set.Push(Span(0, 1), a);
  set.Update(nullptr);
  set.Push(Span(2, 3), b);
  set.Update(nullptr);
  set.Push(Span(4, 5), a);  // a is 2 back: compared
  set.Update(nullptr);
  EXPECT_EQ(set.table().count({0, 1}), 1u);
  set.Push(Span(6, 7), c);
  set.Push(Span(8, 9), c);
  set.Push(Span(10, 11), b);  // b at [2,3] is 4 back: not compared
  set.Update(nullptr);
  EXPECT_EQ(set.table().count({2, 3}), 0u);
  EXPECT_EQ(set.table().count({6, 7}), 1u);
  EXPECT_EQ(set.stored(), 2);
}

// Naive oracle: all sentences in push order, in double; sentence j is
// compared with the min(j, K) before it, an earlier i enters with the max.
Table Oracle(const std::vector<std::vector<double>>& emb,
             const std::vector<std::pair<int32_t, int32_t>>& spans, double tau, int64_t k,
             double* min_margin) {
  Table t;
  for (size_t j = 0; j < emb.size(); ++j) {
    for (size_t i = j - std::min<size_t>(j, k); i < j; ++i) {
      double dot = 0, ni = 0, nj = 0;
      for (size_t x = 0; x < emb[j].size(); ++x) {
        dot += emb[i][x] * emb[j][x];
        ni += emb[i][x] * emb[i][x];
        nj += emb[j][x] * emb[j][x];
      }
      const double sim = dot / std::sqrt(ni * nj);  // Eq. 1 as a cosine
      *min_margin = std::min(*min_margin, std::abs(sim - tau));
      if (sim > tau) {
        float& l = t[spans[i]];
        l = std::max(l, static_cast<float>(sim));
      }
    }
  }
  return t;
}

// Fig. 14's pair statistic by hand (d = 2, unit rows):
//   s0 = (1, 0), s1 = (0.96, 0.28), s2 = (0, 1), s3 = (0.6, 0.8), s4 = (1, 0).
// PSS of the pairs: s1·s0 = 0.96; s2·s0 = 0, s2·s1 = 0.28; s3·s0 = 0.6,
// s3·s1 = 0.8, s3·s2 = 0.8; s4·s0 = 1, s4·s1 = 0.96, s4·s2 = 0, s4·s3 = 0.6.
// K = 4: all 1+2+3+4 = 10 pairs, 3 of them >= 0.95 (s1·s0, s4·s0, s4·s1).
// K = 2: 1+2+2+2 = 7 pairs, only s1·s0 (s4 no longer sees s0 and s1).
// The 0.95 cut does not follow τ: with τ = 0.99 T holds only s0 (s4·s0 = 1).
TEST(RedundantSentenceSetTest, SimilarPairsWithinTheWindowByHand) {
  const std::vector<std::vector<float>> e = {{1, 0}, {0.96f, 0.28f}, {0, 1}, {0.6f, 0.8f}, {1, 0}};
  struct Want {
    int64_t k, similar, compared;
  };
  for (const Want w : {Want{4, 3, 10}, Want{2, 1, 7}}) {
    SCOPED_TRACE(w.k);
    RedundantSentenceSet set(2, 0.99f, w.k);
    for (int i = 0; i < 3; ++i) set.Push(Span(10 * i, 10 * i + 5), e[i].data());
    set.Update(nullptr);
    for (int i = 3; i < 5; ++i) set.Push(Span(10 * i, 10 * i + 5), e[i].data());
    // s3 and s4 are still queued: Pairs() counts them without an Update.
    const auto before = set.Pairs();
    EXPECT_EQ(set.comparisons(), 1 + 2);
    EXPECT_EQ(before.similar, w.similar);
    EXPECT_EQ(before.compared, w.compared);
    set.Update(nullptr);
    const auto after = set.Pairs();
    EXPECT_EQ(after.similar, w.similar);
    EXPECT_EQ(after.compared, w.compared);
    EXPECT_EQ(set.comparisons(), w.compared);
    if (w.k == 4) {
      ASSERT_EQ(set.table().size(), 1u);
      EXPECT_EQ(set.table().begin()->first, std::make_pair(0, 5));
    } else {
      EXPECT_TRUE(set.table().empty());
    }
    set.Reset();
    EXPECT_EQ(set.Pairs().compared, 0);
    EXPECT_EQ(set.Pairs().similar, 0);
  }
}

TEST(RedundantSentenceSetTest, MatchesANaiveDoubleOracle) {
  std::mt19937 rng(7);
  std::normal_distribution<double> n01(0.0, 1.0);
  std::uniform_int_distribution<int> pick(0, 99);
  const int d = 48;
  for (int64_t k : {1, 4, 1024}) {
    for (int trial = 0; trial < 3; ++trial) {
      std::vector<std::vector<double>> bases, emb;
      std::vector<std::pair<int32_t, int32_t>> spans;
      RedundantSentenceSet set(d, 0.95f, k);
      GenPosRangePenalty penalty;
      int32_t pos = 0;
      const int n = 80;
      for (int s = 0; s < n; ++s) {
        std::vector<double> v(d);
        if (!bases.empty() && pick(rng) < 40) {  // a near-copy of a recent sentence
          const auto& base = bases[bases.size() - 1 - (pick(rng) % std::min<size_t>(bases.size(), 6))];
          for (int x = 0; x < d; ++x) v[x] = base[x] + 0.05 * n01(rng);
        } else {
          for (int x = 0; x < d; ++x) v[x] = n01(rng);
          bases.push_back(v);
        }
        double nrm = 0;
        for (double x : v) nrm += x * x;
        std::vector<float> unit(d);
        for (int x = 0; x < d; ++x) unit[x] = static_cast<float>(v[x] / std::sqrt(nrm));
        const int32_t len = 2 + pick(rng) % 9;
        spans.emplace_back(pos, pos + len - 1);
        set.Push(Span(pos, pos + len - 1), unit.data());
        pos += len;
        emb.push_back(v);
        if (pick(rng) < 25) set.Update(&penalty);  // updates at irregular steps
      }
      set.Update(&penalty);
      double margin = 1.0;
      const Table want = Oracle(emb, spans, 0.95, k, &margin);
      ASSERT_GT(margin, 1e-4) << "a similarity too close to τ for an f32/f64 comparison";
      ASSERT_EQ(set.table().size(), want.size()) << "K = " << k;
      for (const auto& [span, lambda] : want) {
        ASSERT_EQ(set.table().count(span), 1u);
        EXPECT_NEAR(set.table().at(span), lambda, 2e-6);
      }
      EXPECT_EQ(penalty.ranges(), set.table());
      EXPECT_GT(want.size(), 5u);  // the planted copies are found
      int64_t cmp = 0;
      for (int64_t j = 0; j < n; ++j) cmp += std::min(j, k);
      EXPECT_EQ(set.comparisons(), cmp);
      EXPECT_LE(set.stored(), k);
    }
  }
}

}  // namespace
}  // namespace skipkv
