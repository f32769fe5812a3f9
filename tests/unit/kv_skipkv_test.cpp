// The "skipkv" policy: Eq. 6 on hand-worked numbers, the λ ≥ 0.95 ordering
// and the back-fill to exactly B, equality with rkv when T is empty (ragged
// and padded, several sequences), the post-compression report, and range
// monitoring: a literal Eq. 9–11 implementation (Algorithm 1's M^cs
// bookkeeping, written here from the spec and sharing no code with the
// engine) equals the gen_pos mapping of GenPosRangePenalty on random
// eviction histories.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include <unistd.h>

#include "kv/kv_compressor.h"
#include "kv/kv_policy.h"
#include "kv/policies/skipkv.h"
#include "kv/score_adjust.h"

namespace skipkv {
namespace {

KvPolicyConfig Config(const std::string& policy, int64_t budget, int window, int64_t interval = 8) {
  KvPolicyConfig c;
  c.policy = policy;
  c.budget = budget;
  c.window = window;
  c.interval = interval;
  return c;
}

KvCacheShape Shape(int layers, int heads, int kv_heads, int dim) {
  KvCacheShape s;
  s.n_layers = layers;
  s.n_heads = heads;
  s.n_kv_heads = kv_heads;
  s.head_dim = dim;
  s.dtype = KvDType::kF32;
  s.query_window = 8;
  return s;
}

// The typed per-sequence state of a skipkv compressor (the engine passes
// its own via Reset; here the test makes it the same way).
SkipkvSequenceState* InstallState(KvCompressor& comp, bool scoring = true, int64_t pad_len = 0) {
  auto state = std::make_unique<SkipkvSequenceState>(scoring);
  SkipkvSequenceState* raw = state.get();
  EXPECT_TRUE(comp.Reset(pad_len, std::move(state)).ok());
  return raw;
}

std::vector<int32_t> Kept(const SequenceKvCache& c, int layer, int h) {
  return {c.GenPos(layer, h), c.GenPos(layer, h) + c.size(layer)};
}

// ---- Eq. 6 by hand -------------------------------------------------------------

// One layer, one head, d = 8, N = 8 slots with keys e_0..e_7 (orthonormal),
// window α = 2 (both queries = c·e_3), budget 5 (3 of the 6 candidates kept),
// pool_kernel 1 (no smoothing), σ = 0.1. By hand:
//   redundancy: Kn Knᵀ with zero diagonal is all 0, no entry > 0.5, so
//     red = softmax(0, …, 0) = 1/8 for every slot;
//   importance: logits c/√8 at slot 3, 0 elsewhere; with c/√8 = ln 5 the
//     softmax over the 6 candidates is 5/10 = 0.5 at slot 3, 1/10 elsewhere;
//   Eq. 6: slot 3: 0.1·0.5 − 0.9/8 = −0.0625, others 0.1·0.1 − 0.9/8 = −0.1025.
// So slot 3 survives a penalty λ < 0.04 and is evicted for λ > 0.04 (ties
// among the others go to the lower gen_pos).
std::vector<int32_t> HandWorkedKeep(std::vector<std::tuple<int, int, float>> ranges) {
  auto cfg = Config("skipkv", 5, 2);
  cfg.pool_kernel = 1;
  auto comp = KvCompressor::Create(cfg, 0);
  EXPECT_TRUE(comp.ok());
  SkipkvSequenceState* state = InstallState(**comp);
  for (auto [b, e, lambda] : ranges) state->penalty.Add(b, e, lambda);
  SequenceKvCache cache(Shape(1, 1, 1, 8), 8, 8);
  const float c = std::log(5.f) * std::sqrt(8.f);
  for (int p = 0; p < 8; ++p) {
    float k[8] = {}, v[8] = {}, q[8] = {};
    k[p] = 1.f;
    q[3] = c;
    cache.Append(0, k, v, p, true);
    cache.PushQuery(0, q);
  }
  (*comp)->CompressNow(cache, 8);
  return Kept(cache, 0, 0);
}

TEST(SkipkvEq6, HandWorkedScores) {
  // No penalty: slot 3 (−0.0625) first, then 0, 1 (−0.1025, lower gen_pos first).
  EXPECT_EQ(HandWorkedKeep({}), (std::vector<int32_t>{0, 1, 3, 6, 7}));
  // λ = 0.03: −0.0925 > −0.1025, still kept (the penalty is subtracted, not a gate).
  EXPECT_EQ(HandWorkedKeep({{3, 3, 0.03f}}), (std::vector<int32_t>{0, 1, 3, 6, 7}));
  // λ = 0.05: −0.1125 < −0.1025, now the first to go.
  EXPECT_EQ(HandWorkedKeep({{3, 3, 0.05f}}), (std::vector<int32_t>{0, 1, 2, 6, 7}));
  // A redundant sentence [0, 1] with λ = 0.96 gives way to unpenalised 2, 4.
  EXPECT_EQ(HandWorkedKeep({{0, 1, 0.96f}}), (std::vector<int32_t>{2, 3, 4, 6, 7}));
  // A range reaching into the window only touches candidates (clamped): the
  // window slots 6, 7 stay and 5 is penalised.
  EXPECT_EQ(HandWorkedKeep({{5, 7, 0.99f}}), (std::vector<int32_t>{0, 1, 3, 6, 7}));
  // The same range twice keeps the larger λ (A7), it does not add up: 0.03
  // and 0.02 → 0.03, slot 3 kept; two different overlapping ranges do add.
  EXPECT_EQ(HandWorkedKeep({{3, 3, 0.03f}, {3, 3, 0.02f}}), (std::vector<int32_t>{0, 1, 3, 6, 7}));
  EXPECT_EQ(HandWorkedKeep({{3, 3, 0.03f}, {2, 3, 0.02f}}), (std::vector<int32_t>{0, 1, 4, 6, 7}));
}

// ---- Random data: ordering, back-fill, equality with rkv --------------------------

constexpr int kLayers = 3, kHeads = 4, kKvHeads = 2, kDim = 16;

// Random keys/values/queries per (layer, position), a deterministic function
// of (seed, position), so two caches fed the same seed hold the same data.
void Feed(SequenceKvCache& cache, uint64_t seed, int32_t gen_pos, bool valid) {
  std::mt19937 rng(static_cast<uint32_t>(seed * 7919 + gen_pos));
  std::normal_distribution<float> nd;
  std::vector<float> k(kKvHeads * kDim), v(kKvHeads * kDim), q(kHeads * kDim);
  for (int layer = 0; layer < cache.shape().n_layers; ++layer) {
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    for (auto& x : q) x = nd(rng);
    if (gen_pos % 5 == 0)
      for (int i = 0; i < kDim; ++i) k[i] = 1.f + 0.1f * k[i];
    cache.Append(layer, k.data(), v.data(), gen_pos, valid);
    cache.PushQuery(layer, q.data());
  }
}

KvCacheShape RandShape() {
  auto s = Shape(kLayers, kHeads, kKvHeads, kDim);
  s.query_window = 4;
  return s;
}

TEST(SkipkvPolicy, RedundantSentenceGoesBeforeAnyUnpenalisedSlot) {
  // B = 24, α = 4, N = 40: 36 candidates, 20 kept. Sentences [6, 14] and
  // [20, 22] (λ ≥ 0.95) hold 12 candidates; 24 unpenalised remain ≥ 20, so
  // every penalised slot goes, in every layer and head.
  const auto cfg = Config("skipkv", 24, 4);
  auto comp = KvCompressor::Create(cfg, 0);
  ASSERT_TRUE(comp.ok());
  SkipkvSequenceState* state = InstallState(**comp);
  state->penalty.Add(6, 14, 0.95f);
  state->penalty.Add(20, 22, 0.97f);
  SequenceKvCache cache(RandShape(), 40, 40);
  for (int p = 0; p < 40; ++p) Feed(cache, 1, p, true);
  (*comp)->CompressNow(cache, 40);
  for (int layer = 0; layer < kLayers; ++layer)
    for (int h = 0; h < kKvHeads; ++h) {
      ASSERT_EQ(cache.size(layer), 24);
      for (int32_t g : Kept(cache, layer, h))
        EXPECT_FALSE((g >= 6 && g <= 14) || (g >= 20 && g <= 22)) << "redundant slot " << g << " survived";
    }
  EXPECT_EQ((*comp)->stats().penalized_evicted, 12 * kLayers * kKvHeads);
  EXPECT_EQ((*comp)->stats().penalized_evicted_per_compression, std::vector<int64_t>{12 * kLayers * kKvHeads});
}

TEST(SkipkvPolicy, BackFillsToExactlyTheBudget) {
  // B = 24, α = 4, N = 40: 20 of 36 candidates kept, but [0, 25] is
  // redundant: only 10 unpenalised candidates (26..35). All 10 are kept and
  // the cache is back-filled to exactly B with the 10 best redundant slots.
  const auto cfg = Config("skipkv", 24, 4);
  auto comp = KvCompressor::Create(cfg, 0);
  ASSERT_TRUE(comp.ok());
  InstallState(**comp)->penalty.Add(0, 25, 0.99f);
  SequenceKvCache cache(RandShape(), 40, 40);
  for (int p = 0; p < 40; ++p) Feed(cache, 2, p, true);
  (*comp)->CompressNow(cache, 40);

  // Oracle for "the 10 best": rkv on the same data (its scores depend on N
  // and α, not on B) at budget 14 with 26..35 pushed down keeps the 10
  // highest rkv scores of 0..25 — a constant λ over the range keeps that order.
  auto oracle_cfg = Config("rkv", 14, 4);
  auto oracle = KvCompressor::Create(oracle_cfg, 0);
  ASSERT_TRUE(oracle.ok());
  GenPosRangePenalty push_down;
  push_down.Add(26, 35, 0.99f);
  (*oracle)->set_score_adjuster(&push_down);
  SequenceKvCache ref(RandShape(), 40, 40);
  for (int p = 0; p < 40; ++p) Feed(ref, 2, p, true);
  (*oracle)->CompressNow(ref, 40);

  for (int layer = 0; layer < kLayers; ++layer)
    for (int h = 0; h < kKvHeads; ++h) {
      const auto kept = Kept(cache, layer, h);
      ASSERT_EQ(kept.size(), 24u) << "back-filled to exactly B";
      std::vector<int32_t> redundant, fresh, want;
      for (int32_t g : kept) (g <= 25 ? redundant : fresh).push_back(g);
      for (int32_t g : Kept(ref, layer, h))
        if (g <= 25) want.push_back(g);
      EXPECT_EQ(fresh, (std::vector<int32_t>{26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39}));
      EXPECT_EQ(redundant, want) << "layer " << layer << " head " << h;
      EXPECT_EQ(redundant.size(), 10u);
    }
  EXPECT_EQ((*comp)->stats().penalized_evicted, 16 * kLayers * kKvHeads);
}

// Runs `policy` over a decode of several sequences sharing one policy
// (interleaved like a batch), returning every kept gen_pos list.
std::vector<std::vector<int32_t>> RunBatch(const KvPolicyConfig& cfg, const std::vector<int64_t>& pads,
                                           int64_t steps) {
  auto policy = CreateKvPolicy(cfg);
  EXPECT_TRUE(policy.ok()) << policy.status().ToString();
  const int64_t prompt = 30;
  std::vector<SequenceKvCache> caches;
  std::vector<KvCompressor> comps;
  for (size_t r = 0; r < pads.size(); ++r) {
    const int64_t cap = (*policy)->CacheCapacity(prompt);
    caches.emplace_back(RandShape(), cap, cap);
    comps.emplace_back(*policy, static_cast<int64_t>(r));
    EXPECT_TRUE(comps.back().Reset(pads[r]).ok());
    for (int64_t p = 0; p < prompt; ++p) Feed(caches[r], 10 + r, static_cast<int32_t>(p), p >= pads[r]);
    comps[r].AfterForward(caches[r], 0, prompt, ForwardKind::kPrefill);
  }
  for (int64_t l = prompt; l < prompt + steps; ++l)
    for (size_t r = 0; r < pads.size(); ++r) {
      EXPECT_TRUE(caches[r].Reserve(1).ok());
      Feed(caches[r], 10 + r, static_cast<int32_t>(l), true);
      comps[r].AfterForward(caches[r], l, l + 1, ForwardKind::kDecode);
    }
  std::vector<std::vector<int32_t>> kept;
  for (size_t r = 0; r < pads.size(); ++r) {
    EXPECT_GT(comps[r].stats().compressions, 5);
    for (int layer = 0; layer < kLayers; ++layer)
      for (int h = 0; h < kKvHeads; ++h) kept.push_back(Kept(caches[r], layer, h));
  }
  return kept;
}

TEST(SkipkvPolicy, WithTEmptySelectsExactlyWhatRkvSelects) {
  // Ragged: three sequences; padded: Δpad 0, 3, 7.
  for (PadPolicy pad : {PadPolicy::kRagged, PadPolicy::kPadded}) {
    const std::vector<int64_t> pads =
        pad == PadPolicy::kPadded ? std::vector<int64_t>{0, 3, 7} : std::vector<int64_t>{0, 0, 0};
    auto rkv = Config("rkv", 24, 4), skip = Config("skipkv", 24, 4);
    rkv.pad_policy = skip.pad_policy = pad;
    const auto a = RunBatch(rkv, pads, 150), b = RunBatch(skip, pads, 150);
    EXPECT_EQ(a, b);
  }
}

TEST(SkipkvPolicy, InvariantsHoldWhileTGrows) {
  // §6.13 with a non-empty, growing T (the EveryPolicy suite covers T
  // empty): after every compression each (layer, head) holds exactly B
  // slots in ascending gen_pos ending with the α most recent positions, the
  // cache never exceeds B + Δt, and the per-compression report adds up.
  for (PadPolicy pad : {PadPolicy::kRagged, PadPolicy::kPadded}) {
    auto cfg = Config("skipkv", 24, 4, 8);
    cfg.pad_policy = pad;
    const int64_t n_pad = pad == PadPolicy::kPadded ? 5 : 0;
    auto comp = KvCompressor::Create(cfg, 0);
    ASSERT_TRUE(comp.ok());
    SkipkvSequenceState* state = InstallState(**comp, true, n_pad);
    SequenceKvCache cache(RandShape(), 32, 32);
    for (int p = 0; p < 20; ++p) Feed(cache, 9, p, p >= n_pad);
    std::mt19937 rng(5);
    int32_t open_b = static_cast<int32_t>(n_pad);
    for (int64_t l = 20; l < 400; ++l) {
      ASSERT_TRUE(cache.Reserve(1).ok());
      Feed(cache, 9, static_cast<int32_t>(l), true);
      if (rng() % 6 == 0) {  // a sentence closes; every other one is redundant
        if (rng() % 2) state->penalty.Add(open_b, static_cast<int32_t>(l), 0.95f + 0.01f * (rng() % 5));
        open_b = static_cast<int32_t>(l) + 1;
      }
      const int64_t before = cache.size(0);
      (*comp)->AfterForward(cache, l, l + 1, ForwardKind::kDecode);
      ASSERT_LE(cache.size(0), 24 + 8);
      if (l % 8 != 0 || before <= 24) continue;
      for (int layer = 0; layer < kLayers; ++layer)
        for (int h = 0; h < kKvHeads; ++h) {
          const auto kept = Kept(cache, layer, h);
          ASSERT_EQ(kept.size(), 24u);
          for (size_t i = 1; i < kept.size(); ++i) ASSERT_LT(kept[i - 1], kept[i]);
          for (int i = 0; i < 4; ++i) ASSERT_EQ(kept[20 + i], l - 3 + i);
          for (int64_t i = 0; i < n_pad; ++i) ASSERT_EQ(kept[i], i) << "pads are kept";
        }
    }
    const auto& st = (*comp)->stats();
    EXPECT_GT(st.compressions, 40);
    ASSERT_EQ(st.penalized_evicted_per_compression.size(), static_cast<size_t>(st.compressions));
    int64_t sum = 0;
    for (int64_t x : st.penalized_evicted_per_compression) sum += x;
    EXPECT_EQ(sum, st.penalized_evicted);
    EXPECT_GT(sum, 0);
    EXPECT_LT(sum, st.slots_evicted);
  }
}

TEST(SkipkvPolicy, TraceCarriesTheReportAndThePadding) {
  // One padded compression, every layer traced: each line names |T|, the
  // penalised slots it evicted (summing to the stats), Δpad and B − Δpad.
  auto cfg = Config("skipkv", 24, 4);
  cfg.pad_policy = PadPolicy::kPadded;
  // Per process: CTest runs this test once per SIMD target at the same time.
  cfg.trace_path = ::testing::TempDir() + "/kv_skipkv_trace_" + std::to_string(::getpid()) + ".jsonl";
  auto comp = KvCompressor::Create(cfg, 7);
  ASSERT_TRUE(comp.ok());
  SkipkvSequenceState* state = InstallState(**comp, true, 3);
  state->penalty.Add(5, 9, 0.96f);
  state->penalty.Add(12, 13, 0.97f);
  SequenceKvCache cache(RandShape(), 40, 40);
  for (int p = 0; p < 40; ++p) Feed(cache, 3, p, p >= 3);
  (*comp)->CompressNow(cache, 40);
  comp->reset();  // flushes and closes the trace
  std::ifstream in(cfg.trace_path);
  int lines = 0;
  int64_t evicted = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    EXPECT_NE(line.find("\"seq\":7"), std::string::npos) << line;
    EXPECT_NE(line.find("\"penalized_ranges\":2,"), std::string::npos) << line;
    EXPECT_NE(line.find("\"pad_len\":3,\"effective_budget\":21"), std::string::npos) << line;
    const size_t at = line.find("\"penalized_evicted\":");
    ASSERT_NE(at, std::string::npos) << line;
    evicted += std::stoll(line.substr(at + 20));
  }
  EXPECT_EQ(lines, kLayers);
  EXPECT_EQ(evicted, 7 * kLayers * kKvHeads) << "all 7 redundant slots go in every head";
  std::remove(cfg.trace_path.c_str());
}

TEST(SkipkvPolicy, NoSentenceScoringIgnoresT) {
  const auto cfg = Config("skipkv", 24, 4);
  auto run = [&](bool scoring, bool with_t) {
    auto comp = KvCompressor::Create(cfg, 0);
    EXPECT_TRUE(comp.ok());
    SkipkvSequenceState* st = InstallState(**comp, scoring);
    if (with_t) st->penalty.Add(3, 17, 0.98f);
    SequenceKvCache cache(RandShape(), 40, 40);
    for (int p = 0; p < 40; ++p) Feed(cache, 4, p, true);
    (*comp)->CompressNow(cache, 40);
    EXPECT_EQ((*comp)->stats().penalized_evicted_per_compression.size(), scoring ? 1u : 0u);
    return Kept(cache, 1, 1);
  };
  EXPECT_EQ(run(false, true), run(true, false));
  EXPECT_NE(run(true, true), run(true, false));
}

TEST(SkipkvPolicy, PolicyStateIsTyped) {
  // The policy's own per-sequence state (KvCompressor::Create) is a
  // SkipkvSequenceState honouring sentence_scoring.
  auto cfg = Config("skipkv", 24, 4);
  auto comp = KvCompressor::Create(cfg, 0);
  ASSERT_TRUE(comp.ok());
  ASSERT_NE((*comp)->state(), nullptr);
  EXPECT_NE((*comp)->state()->adjuster(), nullptr);
  cfg.skipkv.sentence_scoring = false;
  comp = KvCompressor::Create(cfg, 0);
  ASSERT_TRUE(comp.ok());
  EXPECT_EQ((*comp)->state()->adjuster(), nullptr);
}

TEST(SkipkvPolicy, BadValuesAreRefused) {
  auto cfg = Config("skipkv", 64, 8);
  EXPECT_TRUE(ValidateKvPolicyConfig(cfg).ok());
  for (float tau : {0.f, -0.5f, 1.01f, NAN}) {
    cfg.skipkv.sim_threshold = tau;
    const auto msg = ValidateKvPolicyConfig(cfg).message();
    EXPECT_NE(msg.find("sim_threshold"), std::string::npos) << msg;
  }
  cfg.skipkv.sim_threshold = 1.f;
  EXPECT_TRUE(ValidateKvPolicyConfig(cfg).ok());
  cfg.skipkv.max_sentences = -3;
  EXPECT_NE(ValidateKvPolicyConfig(cfg).message().find("max_sentences (-3)"), std::string::npos)
      << ValidateKvPolicyConfig(cfg).message();
  cfg.skipkv.max_sentences = 16;
  cfg.skipkv.min_sentence_tokens = 0;
  EXPECT_NE(ValidateKvPolicyConfig(cfg).message().find("min_sentence_tokens (0)"), std::string::npos);
}

// ---- Range monitoring: literal Eq. 9–11 vs the gen_pos mapping --------------------

// Literal Algorithm 1 for one (layer, row, KV head), docs/spec.md §1.2/§1.4. Sentences
// are contiguous gen-space spans [b_i, e_i] covering 0.. (as the tracker's
// spans do with min_sentence_tokens = 1). Case 1 (Eq. 9) applies while no
// eviction has happened (the spec's "gs and cs coincide"); case 2 (Eq. 10)
// appends sentences completed since the last compression with
// b = e^cs of the last sentence that still has a range + 1 (0 if none) and
// e = l^cs − (l^gs − e^gs); Eq. 11 remaps every range through the survivors.
class LiteralRanges {
 public:
  // Maps the completed sentences[n_mapped_..) into cache space; l_gs = tokens
  // processed, l_cs = cache length before eviction.
  void Map(const std::vector<std::pair<int32_t, int32_t>>& sentences, int64_t l_gs, int64_t l_cs) {
    for (size_t i = n_mapped_; i < sentences.size(); ++i) {
      const auto [b_gs, e_gs] = sentences[i];
      if (!evicted_) {
        cs_[i] = {b_gs, e_gs};  // Eq. 9
      } else {
        int64_t prev_e = -1;
        for (const auto& [j, r] : cs_)
          if (j < i) prev_e = r.second;  // the last range still present
        const int64_t b = prev_e + 1, e = l_cs - (l_gs - e_gs);  // Eq. 10
        if (b <= e) cs_[i] = {b, e};
      }
    }
    n_mapped_ = sentences.size();
  }
  // Eq. 11 with survivors p (old cs indices, ascending).
  void Remap(const std::vector<int64_t>& p) {
    evicted_ = true;
    std::map<size_t, std::pair<int64_t, int64_t>> next;
    for (const auto& [i, r] : cs_) {
      const int64_t nb = std::lower_bound(p.begin(), p.end(), r.first) - p.begin();
      const int64_t ne = std::upper_bound(p.begin(), p.end(), r.second) - p.begin() - 1;
      if (nb <= ne) next[i] = {nb, ne};
    }
    cs_ = std::move(next);
  }
  const std::map<size_t, std::pair<int64_t, int64_t>>& ranges() const { return cs_; }

 private:
  std::map<size_t, std::pair<int64_t, int64_t>> cs_;  // sentence index -> inclusive cs range
  size_t n_mapped_ = 0;
  bool evicted_ = false;
};

TEST(SkipkvRangeMonitoring, LiteralEq9To11EqualsTheGenPosMapping) {
  std::mt19937 rng(20251201);
  int compared = 0, penalised_compared = 0;
  for (int history = 0; history < 200; ++history) {
    const int64_t budget = 8 + rng() % 24, window = 1 + rng() % 6, interval = 1 + rng() % 20;
    if (window >= budget) continue;
    std::vector<int32_t> gen_pos;  // the head's cache: gen_pos per slot
    std::vector<std::pair<int32_t, int32_t>> sentences;
    int32_t open_b = 0;
    LiteralRanges literal;
    for (int64_t l = 0; l < 400; ++l) {
      gen_pos.push_back(static_cast<int32_t>(l));
      if (rng() % 4 == 0) {  // a delimiter closes [open_b, l]
        sentences.push_back({open_b, static_cast<int32_t>(l)});
        open_b = static_cast<int32_t>(l) + 1;
      }
      const int64_t l_gs = l + 1, n = static_cast<int64_t>(gen_pos.size());
      if (l_gs % interval != 0 || n <= budget) continue;
      // Compression: the literal cs ranges of every completed sentence
      // before the eviction must equal [lower_bound, upper_bound − 1].
      literal.Map(sentences, l_gs, n);
      for (size_t i = 0; i < sentences.size(); ++i) {
        const auto [b, e] = sentences[i];
        const int64_t lo = std::lower_bound(gen_pos.begin(), gen_pos.end(), b) - gen_pos.begin();
        const int64_t hi = std::upper_bound(gen_pos.begin(), gen_pos.end(), e) - gen_pos.begin() - 1;
        const auto it = literal.ranges().find(i);
        if (lo <= hi) {
          ASSERT_NE(it, literal.ranges().end()) << "history " << history << " sentence " << i;
          ASSERT_EQ(it->second, std::make_pair(lo, hi)) << "history " << history << " sentence " << i;
        } else {
          ASSERT_EQ(it, literal.ranges().end()) << "history " << history << " sentence " << i;
        }
        ++compared;
      }
      // GenPosRangePenalty (the engine's Φ) subtracts λ exactly over the
      // literal ranges clamped to the candidates [0, n − window).
      GenPosRangePenalty pen;
      std::vector<float> want(n - window, 0.f), got(n - window, 0.f);
      for (size_t i = 0; i < sentences.size(); ++i) {
        if (rng() % 3) continue;
        const float lambda = 0.95f + 0.01f * static_cast<float>(i % 5);
        pen.Add(sentences[i].first, sentences[i].second, lambda);
        const auto it = literal.ranges().find(i);
        if (it == literal.ranges().end()) continue;
        for (int64_t s = it->second.first; s <= std::min(it->second.second, n - window - 1); ++s) want[s] -= lambda;
      }
      pen.Adjust(0, 0, gen_pos, got);
      ASSERT_EQ(got, want) << "history " << history;
      ++penalised_compared;
      // Random eviction: keep the last `window` slots and budget − window others.
      std::vector<int64_t> cand(n - window);
      for (int64_t s = 0; s < n - window; ++s) cand[s] = s;
      std::shuffle(cand.begin(), cand.end(), rng);
      std::vector<int64_t> keep(cand.begin(), cand.begin() + (budget - window));
      for (int64_t s = n - window; s < n; ++s) keep.push_back(s);
      std::sort(keep.begin(), keep.end());
      std::vector<int32_t> next;
      for (int64_t s : keep) next.push_back(gen_pos[s]);
      gen_pos = std::move(next);
      literal.Remap(keep);
    }
  }
  EXPECT_GT(compared, 10000);
  EXPECT_GT(penalised_compared, 1000);
}

TEST(SkipkvRangeMonitoring, CountPenalizedCountsTheUnionOnce) {
  GenPosRangePenalty pen;
  pen.Add(2, 5, 0.95f);
  pen.Add(4, 8, 0.96f);  // overlaps: 2..8
  pen.Add(12, 12, 0.97f);
  const std::vector<int32_t> gp = {0, 1, 2, 5, 8, 9, 11, 12, 13};
  EXPECT_EQ(pen.CountPenalized(gp), 4);  // 2, 5, 8, 12
  EXPECT_EQ(GenPosRangePenalty().CountPenalized(gp), 0);
}

}  // namespace
}  // namespace skipkv
