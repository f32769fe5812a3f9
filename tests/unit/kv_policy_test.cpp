// Policies + KvCompressor on real SequenceKvCaches: the §6.13 invariants over
// a simulated long decode for every policy, the schedule and capacity bound,
// padded mode, per-sequence independence in a batch, configuration errors,
// statistics and the eviction trace.
#include "kv/kv_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "kv/kv_compressor.h"
#include "kv/policies/scored_policy.h"
#include "kv/score_adjust.h"
#include "util/check.h"
#include "util/thread_pool.h"

namespace skipkv {
namespace {

constexpr int kLayers = 3, kHeads = 4, kKvHeads = 2, kDim = 16;

std::shared_ptr<const KvPolicy> MustCreate(const KvPolicyConfig& cfg) {
  auto policy = CreateKvPolicy(cfg);
  SKIPKV_CHECK_MSG(policy.ok(), policy.status().ToString().c_str());
  return *policy;
}

int64_t CacheCapacity(const KvPolicyConfig& cfg, int64_t prompt) {
  return MustCreate(cfg)->CacheCapacity(prompt);
}

KvCacheShape Shape(const KvPolicyConfig& cfg, KvDType dtype = KvDType::kF32) {
  KvCacheShape s;
  s.n_layers = kLayers;
  s.n_heads = kHeads;
  s.n_kv_heads = kKvHeads;
  s.head_dim = kDim;
  s.dtype = dtype;
  MustCreate(cfg)->ConfigureCacheShape(&s);
  return s;
}

// Feeds tokens into a cache the way the forward pass does: per layer, append
// K/V (random), push the query, and (for H2O) accumulate some attention.
class FakeModel {
 public:
  explicit FakeModel(uint64_t seed) : rng_(seed) {}
  void Feed(SequenceKvCache& cache, int32_t gen_pos, bool valid) {
    std::vector<float> k(kKvHeads * kDim), v(kKvHeads * kDim), q(kHeads * kDim);
    for (int layer = 0; layer < cache.shape().n_layers; ++layer) {
      for (auto& x : k) x = nd_(rng_);
      for (auto& x : v) x = nd_(rng_);
      for (auto& x : q) x = nd_(rng_);
      // Some near-duplicate keys so the redundancy term has clusters.
      if (gen_pos % 5 == 0)
        for (int i = 0; i < kDim; ++i) k[i] = 1.f + 0.1f * k[i];
      cache.Append(layer, k.data(), v.data(), gen_pos, valid);
      cache.PushQuery(layer, q.data());
      for (int h = 0; h < kKvHeads; ++h) {
        float* acc = cache.AttentionScore(layer, h);
        if (!acc) continue;
        const uint8_t* vl = cache.Valid(layer, h);
        for (int64_t s = 0; s < cache.size(layer); ++s)
          if (vl[s]) acc[s] += std::abs(nd_(rng_)) / (1 + s % 7);
      }
    }
  }

 private:
  std::mt19937 rng_;
  std::normal_distribution<float> nd_;
};

// Checks §6.13 on every layer: exactly B slots per head after a compression
// (all heads equal), gen_pos strictly increasing, the last R slots are the R
// most recent positions (l − R .. l − 1).
void ExpectCompressedInvariants(const SequenceKvCache& cache, const KvPolicy& policy, int layer, int64_t l) {
  const int64_t r = policy.recent_window();
  ASSERT_EQ(cache.size(layer), policy.budget()) << policy.name() << " layer " << layer;
  for (int h = 0; h < kKvHeads; ++h) {
    const int32_t* gp = cache.GenPos(layer, h);
    for (int64_t i = 1; i < cache.size(layer); ++i) ASSERT_LT(gp[i - 1], gp[i]) << policy.name();
    for (int64_t i = 0; i < r; ++i) {
      ASSERT_EQ(gp[cache.size(layer) - r + i], l - r + i)
          << policy.name() << " layer " << layer << " head " << h;
    }
  }
}

struct Sim {
  int64_t max_slots = 0;
  int compressions = 0;
};

// Prefill `prompt` tokens (the first n_pad invalid), then decode `steps`
// tokens, calling the compressor after every forward and checking the
// schedule, the capacity bound and the invariants.
Sim Simulate(const KvPolicyConfig& cfg, int64_t prompt, int64_t n_pad, int64_t steps, uint64_t seed,
             SequenceKvCache* out_cache = nullptr) {
  auto comp_or = KvCompressor::Create(cfg, 0);
  EXPECT_TRUE(comp_or.ok()) << comp_or.status().ToString();
  auto& comp = **comp_or;
  EXPECT_TRUE(comp.Reset(n_pad).ok());
  const int64_t cap = CacheCapacity(cfg, prompt);
  SequenceKvCache cache(Shape(cfg), cap == SequenceKvCache::kUnbounded ? 16 : cap, cap);
  FakeModel model(seed);
  Sim sim;
  EXPECT_TRUE(cache.Reserve(prompt).ok());
  for (int64_t p = 0; p < prompt; ++p) model.Feed(cache, static_cast<int32_t>(p), p >= n_pad);
  comp.AfterForward(cache, 0, prompt, ForwardKind::kPrefill);
  const bool evicts = comp.policy().evicts();
  if (evicts && prompt > cfg.budget) {
    for (int layer = 0; layer < kLayers; ++layer)
      ExpectCompressedInvariants(cache, comp.policy(), layer, prompt);
    ++sim.compressions;
  }
  for (int64_t l = prompt; l < prompt + steps; ++l) {
    EXPECT_TRUE(cache.Reserve(1).ok()) << "capacity exceeded at l=" << l;
    model.Feed(cache, static_cast<int32_t>(l), true);
    sim.max_slots = std::max(sim.max_slots, cache.size(0));
    const int64_t before = cache.size(0);
    comp.AfterForward(cache, l, l + 1, ForwardKind::kDecode);
    const bool due = evicts && l > 0 && l % cfg.interval == 0 && before > cfg.budget;
    if (due) {
      ++sim.compressions;
      for (int layer = 0; layer < kLayers; ++layer)
        ExpectCompressedInvariants(cache, comp.policy(), layer, l + 1);
    } else {
      EXPECT_EQ(cache.size(0), before) << comp.policy().name() << " compressed off-schedule at l=" << l;
    }
    if (evicts) {
      EXPECT_LE(cache.size(0), std::max(prompt, cfg.budget + cfg.interval));
    }
  }
  EXPECT_EQ(comp.stats().compressions, sim.compressions);
  if (out_cache) *out_cache = std::move(cache);
  return sim;
}

KvPolicyConfig Config(const std::string& policy, int64_t budget = 24, int window = 4, int64_t interval = 8) {
  KvPolicyConfig c;
  c.policy = policy;
  c.budget = budget;
  c.window = window;
  c.interval = interval;
  return c;
}

class EveryPolicy : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryPolicy, LongDecodeKeepsInvariantsAndCapacity) {
  const auto cfg = Config(GetParam());
  // Prompt longer than B (prompt compression) and shorter than B.
  for (int64_t prompt : {30, 10}) {
    const Sim sim = Simulate(cfg, prompt, 0, 300, 42);
    EXPECT_GT(sim.compressions, 30) << GetParam();
    EXPECT_EQ(sim.max_slots, cfg.budget + cfg.interval) << GetParam();
  }
}

TEST_P(EveryPolicy, PaddedModeKeepsEveryPad) {
  auto cfg = Config(GetParam(), 32, 4, 8);
  cfg.pad_policy = PadPolicy::kPadded;
  const int64_t n_pad = 6;
  SequenceKvCache cache(Shape(cfg), 1, 1);
  Simulate(cfg, 40, n_pad, 193, 7, &cache);  // the last forward (l0 = 232) compresses
  for (int layer = 0; layer < kLayers; ++layer) {
    for (int h = 0; h < kKvHeads; ++h) {
      const int32_t* gp = cache.GenPos(layer, h);
      const uint8_t* vl = cache.Valid(layer, h);
      int64_t pads = 0;
      for (int64_t i = 0; i < cache.size(layer); ++i) {
        if (!vl[i]) {
          EXPECT_EQ(gp[i], pads) << "pads stay in the first slots";
          ++pads;
        }
      }
      EXPECT_EQ(pads, n_pad) << GetParam();
      EXPECT_EQ(cache.size(layer) - pads, cfg.budget - n_pad) << "real slots = B − Δpad";
    }
  }
}

TEST_P(EveryPolicy, BudgetNeverReachedLeavesCacheUntouched) {
  const auto cfg = Config(GetParam(), 1000, 4, 8);
  SequenceKvCache cache(Shape(cfg), 1, 1);
  const Sim sim = Simulate(cfg, 20, 0, 100, 3, &cache);
  EXPECT_EQ(sim.compressions, 0);
  for (int layer = 0; layer < kLayers; ++layer) {
    ASSERT_EQ(cache.size(layer), 120);
    for (int64_t i = 0; i < 120; ++i) EXPECT_EQ(cache.GenPos(layer, 1)[i], i);
  }
}

INSTANTIATE_TEST_SUITE_P(Kv, EveryPolicy,
                         ::testing::Values("streaming", "h2o", "h2o_rkv", "h2o_acc", "snapkv", "rkv", "skipkv"));

TEST(KvPolicy, FullNeverEvicts) {
  const auto cfg = Config("full");
  SequenceKvCache cache(Shape(cfg), 1, 1);
  Simulate(cfg, 30, 0, 200, 5, &cache);
  for (int layer = 0; layer < kLayers; ++layer) {
    ASSERT_EQ(cache.size(layer), 230);
    for (int64_t i = 0; i < 230; ++i) ASSERT_EQ(cache.GenPos(layer, 0)[i], i);
  }
  EXPECT_EQ(CacheCapacity(cfg, 30), SequenceKvCache::kUnbounded);
}

TEST(KvPolicy, StreamingKeepsSinksAndRecent) {
  const auto cfg = Config("streaming", 24, 4, 8);
  SequenceKvCache cache(Shape(cfg), 1, 1);
  Simulate(cfg, 30, 0, 37, 5, &cache);  // last compression at l0 = 64 -> l = 65, then 2 appends
  const int32_t* gp = cache.GenPos(0, 0);
  ASSERT_EQ(cache.size(0), 26);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(gp[i], i);
  for (int i = 4; i < 26; ++i) EXPECT_EQ(gp[i], 65 - 20 + (i - 4));
}

TEST(KvPolicy, H2oAccKeepsTheHeaviestAccumulators) {
  // Accumulators chosen so the heavy hitters are known: slot s gets s % 3 == 0
  // ? 10 : 1. B = 8, heavy = recent = 4; 12 slots: candidates 0..7 (recent
  // 8..11); heavy = the 4 largest among 0..7: slots 0, 3, 6 (10) and then the
  // lowest of the ties at 1: slot 1.
  auto cfg = Config("h2o_acc", 8, 2, 4);
  auto comp = KvCompressor::Create(cfg, 0);
  ASSERT_TRUE(comp.ok());
  SequenceKvCache cache(Shape(cfg), 16, 16);
  FakeModel model(1);
  for (int p = 0; p < 12; ++p) model.Feed(cache, p, true);
  for (int layer = 0; layer < kLayers; ++layer)
    for (int h = 0; h < kKvHeads; ++h)
      for (int s = 0; s < 12; ++s) cache.AttentionScore(layer, h)[s] = s % 3 == 0 ? 10.f : 1.f;
  EXPECT_EQ((*comp)->CompressNow(cache, 12), kLayers);
  const std::vector<int32_t> want = {0, 1, 3, 6, 8, 9, 10, 11};
  for (int layer = 0; layer < kLayers; ++layer)
    for (int h = 0; h < kKvHeads; ++h) {
      EXPECT_EQ(std::vector<int32_t>(cache.GenPos(layer, h), cache.GenPos(layer, h) + 8), want);
      EXPECT_EQ(cache.AttentionScore(layer, h)[2], 10.f) << "accumulators move with their slots";
    }
}

TEST(KvPolicy, ScheduleFollowsRkv) {
  auto comp = KvCompressor::Create(Config("rkv", 24, 4, 128), 0);
  ASSERT_TRUE(comp.ok());
  const auto& c = **comp;
  EXPECT_FALSE(c.Scheduled(0, 1, ForwardKind::kDecode));  // l0 = 0 never
  EXPECT_TRUE(c.Scheduled(128, 129, ForwardKind::kDecode));
  EXPECT_FALSE(c.Scheduled(127, 128, ForwardKind::kDecode));  // fires in the *next* forward
  EXPECT_TRUE(c.Scheduled(256, 257, ForwardKind::kDecode));
  EXPECT_TRUE(c.Scheduled(120, 130, ForwardKind::kDecode));  // multi-token forward crossing 128
  EXPECT_FALSE(c.Scheduled(129, 200, ForwardKind::kDecode));
  EXPECT_TRUE(c.Scheduled(0, 500, ForwardKind::kPrefill));
  EXPECT_FALSE(c.Scheduled(0, 500, ForwardKind::kPrefillPartial));
  EXPECT_EQ(CacheCapacity(Config("rkv", 1024, 8, 128), 100), 1152);
  EXPECT_EQ(CacheCapacity(Config("rkv", 1024, 8, 128), 3000), 3000);
}

TEST(KvPolicy, BatchRowsAreIndependent) {
  // Two sequences decoded together (shared policy, one pool, interleaved
  // calls) keep exactly what each keeps when decoded alone.
  const auto cfg = Config("rkv", 24, 4, 8);
  auto policy = CreateKvPolicy(cfg);
  ASSERT_TRUE(policy.ok());
  ThreadPool pool(2);
  auto run = [&](std::vector<uint64_t> seeds) {
    std::vector<SequenceKvCache> caches;
    std::vector<KvCompressor> comps;
    std::vector<FakeModel> models;
    for (size_t r = 0; r < seeds.size(); ++r) {
      caches.emplace_back(Shape(cfg), 32, 32);
      comps.emplace_back(*policy, static_cast<int64_t>(r));
      models.emplace_back(seeds[r]);
    }
    for (int64_t l = 0; l < 100; ++l) {
      for (size_t r = 0; r < seeds.size(); ++r) {
        EXPECT_TRUE(caches[r].Reserve(1).ok());
        models[r].Feed(caches[r], static_cast<int32_t>(l), true);
        comps[r].AfterForward(caches[r], l, l + 1, ForwardKind::kDecode, &pool);
      }
    }
    std::vector<std::vector<int32_t>> kept;
    for (auto& c : caches)
      for (int layer = 0; layer < kLayers; ++layer)
        for (int h = 0; h < kKvHeads; ++h)
          kept.emplace_back(c.GenPos(layer, h), c.GenPos(layer, h) + c.size(layer));
    return kept;
  };
  const auto alone0 = run({11}), alone1 = run({22}), together = run({11, 22});
  const size_t per_row = kLayers * kKvHeads;
  ASSERT_EQ(together.size(), 2 * per_row);
  for (size_t i = 0; i < per_row; ++i) {
    EXPECT_EQ(together[i], alone0[i]);
    EXPECT_EQ(together[per_row + i], alone1[i]);
  }
  EXPECT_NE(alone0, alone1) << "different data must give different kept sets";
}

TEST(KvPolicy, PenaltyEvictsAPenalisedRangeFirst) {
  // §6.13: a range with λ ≥ 0.95 is evicted before any unpenalised token (rkv
  // scores lie in [−0.9, 0.1]), as long as enough unpenalised candidates exist.
  const auto cfg = Config("rkv", 24, 4, 8);
  auto comp = KvCompressor::Create(cfg, 0);
  ASSERT_TRUE(comp.ok());
  GenPosRangePenalty pen;
  pen.Add(5, 12, 0.95f);
  (*comp)->set_score_adjuster(&pen);
  SequenceKvCache cache(Shape(cfg), 32, 32);
  FakeModel model(3);
  for (int p = 0; p < 32; ++p) model.Feed(cache, p, true);
  (*comp)->CompressNow(cache, 32);
  // 28 candidates, 20 kept, 8 penalised: all 8 evicted.
  for (int layer = 0; layer < kLayers; ++layer)
    for (int h = 0; h < kKvHeads; ++h)
      for (int64_t i = 0; i < cache.size(layer); ++i) {
        const int32_t g = cache.GenPos(layer, h)[i];
        EXPECT_TRUE(g < 5 || g > 12) << "penalised position " << g << " survived";
      }
}

// Keeps per (layer, head) after prefilling `prompt` tokens (AfterForward
// records the prompt length), feeding up to 32 and compressing at l = 32.
std::vector<std::vector<int32_t>> KeptAfterPrompt(KvPolicyConfig cfg, int64_t prompt, uint64_t seed) {
  auto comp = KvCompressor::Create(cfg, 0);
  SKIPKV_CHECK(comp.ok());
  SequenceKvCache cache(Shape(cfg), 32, 32);
  FakeModel model(seed);
  for (int p = 0; p < prompt; ++p) model.Feed(cache, p, true);
  (*comp)->AfterForward(cache, 0, prompt, ForwardKind::kPrefill);  // prompt < B: no compression
  EXPECT_EQ((*comp)->prompt_len(), prompt);
  for (int p = static_cast<int>(prompt); p < 32; ++p) model.Feed(cache, p, true);
  (*comp)->CompressNow(cache, 32);
  std::vector<std::vector<int32_t>> kept;
  for (int layer = 0; layer < kLayers; ++layer)
    for (int h = 0; h < kKvHeads; ++h)
      kept.emplace_back(cache.GenPos(layer, h), cache.GenPos(layer, h) + cache.size(layer));
  EXPECT_TRUE((*comp)->Reset().ok());
  EXPECT_EQ((*comp)->prompt_len(), 0) << "Reset forgets the prompt";
  return kept;
}

TEST(KvPolicy, PinPromptNeverEvictsThePrompt) {
  // issue 39, rkv+pinned. B = 24, window 4: 20 candidates of 28 are kept.
  auto cfg = Config("rkv", 24, 4, 8);
  cfg.pin_prompt = true;
  // A 22-token prompt exceeds B − α = 20: by hand, the kept set is its
  // first 20 positions (+inf ties go to the lower gen_pos) and the window.
  std::vector<int32_t> expect;
  for (int32_t g = 0; g < 20; ++g) expect.push_back(g);
  for (int32_t g = 28; g < 32; ++g) expect.push_back(g);
  for (const auto& k : KeptAfterPrompt(cfg, 22, 5)) EXPECT_EQ(k, expect);
  // A 10-token prompt: all 10 kept, plus 10 scored candidates and the window.
  bool plain_evicts_prompt = false;
  const auto pinned = KeptAfterPrompt(cfg, 10, 5);
  cfg.pin_prompt = false;
  const auto plain = KeptAfterPrompt(cfg, 10, 5);
  for (size_t i = 0; i < pinned.size(); ++i) {
    ASSERT_EQ(pinned[i].size(), 24u);
    for (int32_t g = 0; g < 10; ++g) EXPECT_EQ(pinned[i][g], g) << "prompt position " << g << " evicted";
    for (int32_t g = 0; g < 4; ++g) EXPECT_EQ(pinned[i][20 + g], 28 + g);
    plain_evicts_prompt |= plain[i].size() < 10 || plain[i][9] != 9;
  }
  EXPECT_TRUE(plain_evicts_prompt) << "the data must make plain R-KV evict some prompt slot";
}

TEST(KvPolicy, StatsAccountBytesExactly) {
  const auto cfg = Config("snapkv", 24, 4, 8);
  auto comp = KvCompressor::Create(cfg, 0);
  ASSERT_TRUE(comp.ok());
  SequenceKvCache cache(Shape(cfg, KvDType::kF16), 32, 32);
  FakeModel model(2);
  for (int64_t l = 0; l < 100; ++l) {
    ASSERT_TRUE(cache.Reserve(1).ok());
    model.Feed(cache, static_cast<int32_t>(l), true);
    (*comp)->AfterForward(cache, l, l + 1, ForwardKind::kDecode);
  }
  const auto& s = (*comp)->stats();
  const size_t row_bytes = kDim * 2 /*f16*/ * 2 /*K and V*/ * kKvHeads * kLayers;
  EXPECT_EQ(s.peak_slots, 32);
  EXPECT_EQ(s.peak_live_kv_bytes, 32 * row_bytes);
  EXPECT_EQ(s.live_kv_bytes, cache.LiveKvBytes());
  EXPECT_EQ(s.allocated_kv_bytes, 32 * row_bytes);
  // Compressions at l0 = 24 (25 slots), 32, ..., 96: 10; each evicts (N − 24) per head per layer.
  EXPECT_EQ(s.compressions, 10);
  EXPECT_EQ(s.layer_compressions, 10 * kLayers);
  EXPECT_EQ(s.slots_evicted, (1 + 9 * 8) * kKvHeads * kLayers);
  EXPECT_GT(s.seconds, 0.0);
}

TEST(KvPolicy, TraceWritesKeptRunsForSelectedLayers) {
  auto cfg = Config("rkv", 24, 4, 8);
  // Per process: CTest runs this test once per SIMD target at the same time.
  cfg.trace_path = ::testing::TempDir() + "kv_trace_test_" + std::to_string(::getpid()) + ".jsonl";
  cfg.trace_layers = {1};
  auto comp = KvCompressor::Create(cfg, 7);
  ASSERT_TRUE(comp.ok());
  SequenceKvCache cache(Shape(cfg), 32, 32);
  FakeModel model(4);
  for (int64_t l = 0; l < 50; ++l) {
    ASSERT_TRUE(cache.Reserve(1).ok());
    model.Feed(cache, static_cast<int32_t>(l), true);
    (*comp)->AfterForward(cache, l, l + 1, ForwardKind::kDecode);
  }
  comp->reset();  // closes the file
  std::ifstream in(cfg.trace_path);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["seq"], 7);
    EXPECT_EQ(j["layer"], 1);
    int64_t kept = 0;
    for (const auto& head : j["kept"]) {
      kept = 0;
      for (const auto& run : head) kept += run[1].get<int64_t>() - run[0].get<int64_t>() + 1;
      EXPECT_EQ(kept, 24);
    }
    EXPECT_EQ(j["kept"].size(), static_cast<size_t>(kKvHeads));
    ++lines;
  }
  EXPECT_EQ(lines, 4);  // l0 = 24, 32, 40, 48
  std::remove(cfg.trace_path.c_str());
}

TEST(KvPolicy, ResultsDoNotDependOnThreadsOrCacheDtype) {
  // The same data in an f16 cache and in an f32 cache holding the f16-rounded
  // values, compressed with and without a thread pool, keep the same slots.
  const auto cfg = Config("rkv", 24, 4, 8);
  auto policy = CreateKvPolicy(cfg);
  ASSERT_TRUE(policy.ok());
  ThreadPool pool(2);
  SequenceKvCache f16(Shape(cfg, KvDType::kF16), 40, 40), f32(Shape(cfg, KvDType::kF32), 40, 40);
  FakeModel model(9);
  for (int p = 0; p < 40; ++p) model.Feed(f16, p, true);
  std::vector<float> k(kKvHeads * kDim), v(kKvHeads * kDim), q(kHeads * kDim, 0.f);
  for (int layer = 0; layer < kLayers; ++layer) {
    for (int p = 0; p < 40; ++p) {
      for (int h = 0; h < kKvHeads; ++h) {
        f16.ReadK(layer, h, p, k.data() + h * kDim);
        f16.ReadV(layer, h, p, v.data() + h * kDim);
      }
      f32.Append(layer, k.data(), v.data(), p, true);
    }
    // Same query window: copy it over, oldest first.
    std::vector<float> win(kHeads * cfg.window * kDim);
    f16.CopyQueryWindow(layer, win.data());
    for (int w = 0; w < cfg.window; ++w) {
      for (int h = 0; h < kHeads; ++h)
        std::copy_n(win.data() + (h * cfg.window + w) * kDim, kDim, q.data() + h * kDim);
      f32.PushQuery(layer, q.data());
    }
  }
  KvCompressor a(*policy, 0), b(*policy, 1);
  a.CompressNow(f16, 40, &pool);
  b.CompressNow(f32, 40, nullptr);
  for (int layer = 0; layer < kLayers; ++layer)
    for (int h = 0; h < kKvHeads; ++h) {
      ASSERT_EQ(f16.size(layer), 24);
      EXPECT_EQ(std::vector<int32_t>(f16.GenPos(layer, h), f16.GenPos(layer, h) + 24),
                std::vector<int32_t>(f32.GenPos(layer, h), f32.GenPos(layer, h) + 24));
    }
}

// A policy with per-sequence state, the way SkipKV plugs in: R-KV-like
// scoring (here: prefer early slots) plus the state's range penalty.
class PenalisedPolicy final : public policies::ScoredPolicy {
 public:
  struct State : KvSequenceState {
    GenPosRangePenalty penalty;
    const SlotScoreAdjuster* adjuster() const override { return &penalty; }
  };
  explicit PenalisedPolicy(const KvPolicyConfig& c) : ScoredPolicy(c) {}
  std::string_view name() const override { return "test_penalised"; }
  int64_t recent_window() const override { return config().window; }
  std::unique_ptr<KvSequenceState> NewSequenceState() const override { return std::make_unique<State>(); }

 protected:
  void ScoreHead(const KvLayerInput& in, int h, KvScratch&, std::span<float> score) const override {
    for (size_t n = 0; n < score.size(); ++n) score[n] = -static_cast<float>(in.gen_pos[h][n]);
  }
};

TEST(KvPolicy, SequenceStateAdjusterIsAppliedPerSequence) {
  const auto cfg = Config("rkv", 12, 2, 8);
  auto policy = std::make_shared<const PenalisedPolicy>(cfg);
  KvCompressor penalised(policy, 0), plain(policy, 1);
  static_cast<PenalisedPolicy::State*>(penalised.state())->penalty.Add(0, 3, 100.f);
  SequenceKvCache c0(Shape(cfg), 20, 20), c1(Shape(cfg), 20, 20);
  FakeModel m0(1), m1(1);
  for (int p = 0; p < 20; ++p) m0.Feed(c0, p, true), m1.Feed(c1, p, true);
  penalised.CompressNow(c0, 20);
  plain.CompressNow(c1, 20);
  // Plain: the 10 earliest candidates + window {18, 19}. Penalised: 0..3
  // sink to the bottom, so 4..13 are kept instead.
  std::vector<int32_t> want_plain = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 18, 19};
  std::vector<int32_t> want_pen = {4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 18, 19};
  EXPECT_EQ(std::vector<int32_t>(c1.GenPos(2, 1), c1.GenPos(2, 1) + 12), want_plain);
  EXPECT_EQ(std::vector<int32_t>(c0.GenPos(2, 1), c0.GenPos(2, 1) + 12), want_pen);
}

// ---- Configuration errors -----------------------------------------------------

std::string Error(const KvPolicyConfig& c) { return ValidateKvPolicyConfig(c).message(); }

TEST(KvPolicyConfigTest, RejectsBadConfigurationsWithClearMessages) {
  EXPECT_TRUE(ValidateKvPolicyConfig(Config("rkv", 1024, 8, 128)).ok());
  auto unknown = Error(Config("lru"));
  EXPECT_NE(unknown.find("unknown KV policy 'lru'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("full, streaming, h2o, h2o_rkv, h2o_acc, snapkv, rkv"), std::string::npos)
      << unknown;
  EXPECT_FALSE(CreateKvPolicy(Config("lru")).ok());
  auto small = Error(Config("rkv", 8, 8, 128));
  EXPECT_NE(small.find("budget (8) must be larger than the window (8)"), std::string::npos) << small;
  EXPECT_NE(Error(Config("snapkv", 64, 8, 0)).find("interval (0)"), std::string::npos);
  EXPECT_NE(Error(Config("snapkv", 64, 8, -5)).find("interval (-5)"), std::string::npos);
  EXPECT_NE(Error(Config("rkv", 64, 0, 8)).find("window (0)"), std::string::npos);
  auto lam = Config("rkv");
  lam.mix_lambda = 1.5f;
  EXPECT_NE(Error(lam).find("mix_lambda"), std::string::npos);
  auto h2o = Config("h2o_acc", 64, 8, 8);
  h2o.h2o_heavy = 40;
  h2o.h2o_recent = 40;
  EXPECT_NE(Error(h2o).find("sum to the budget (64)"), std::string::npos) << Error(h2o);
  h2o.h2o_recent = -1;  // automatic: 64 − 40
  EXPECT_TRUE(ValidateKvPolicyConfig(h2o).ok());
  auto sinks = Config("streaming", 16, 8, 8);
  sinks.streaming_sinks = 9;
  EXPECT_NE(Error(sinks).find("streaming_sinks (9)"), std::string::npos);
  // full ignores the budget fields.
  EXPECT_TRUE(ValidateKvPolicyConfig(Config("full", 0, 0, 0)).ok());
  auto trace = Config("full");
  trace.trace_layers = {0, -2};
  EXPECT_NE(Error(trace).find("trace layer -2 is negative"), std::string::npos) << Error(trace);
}

TEST(KvPolicyConfigTest, RegistryNamesCreateTheirPolicies) {
  // Every registered name creates a policy whose properties drive the cache:
  // the name it reports is itself registered (aliases map to a canonical
  // name), only `full` is unbounded and never evicts, and the cache tracks
  // attention exactly for the policies that read it.
  const auto names = KnownKvPolicyNames();
  for (const std::string& name : names) {
    auto policy = MustCreate(Config(name, 64, 8, 16));
    EXPECT_NE(std::find(names.begin(), names.end(), std::string(policy->name())), names.end()) << name;
    EXPECT_EQ(policy->evicts(), name != "full") << name;
    EXPECT_EQ(KvPolicyEvicts(Config(name, 64, 8, 16)), policy->evicts()) << name;
    EXPECT_EQ(policy->CacheCapacity(10), name == "full" ? SequenceKvCache::kUnbounded : 64 + 16) << name;
    KvCacheShape shape;
    policy->ConfigureCacheShape(&shape);
    EXPECT_EQ(shape.query_window, 8);
    EXPECT_EQ(shape.track_attention, policy->needs_attention_scores()) << name;
  }
  EXPECT_EQ(MustCreate(Config("h2o", 64, 8, 16))->name(), "h2o_rkv");
  EXPECT_TRUE(MustCreate(Config("h2o_acc", 64, 8, 16))->needs_attention_scores());
  EXPECT_FALSE(KvPolicyEvicts(Config("lru")));
  EXPECT_FALSE(KvPolicyEvicts(Config("rkv", 8, 8, 16))) << "invalid configurations do not evict";
}

TEST(KvPolicyConfigTest, PadLengthsAreCheckedAgainstTheBudget) {
  auto cfg = Config("rkv", 32, 8, 8);
  const std::vector<int64_t> ok_pads = {0, 3, 23}, bad_pads = {0, 24, 5};
  EXPECT_FALSE(ValidatePadLens(cfg, ok_pads).ok()) << "ragged mode has no pads";
  EXPECT_NE(ValidatePadLens(cfg, ok_pads).message().find("ragged"), std::string::npos);
  cfg.pad_policy = PadPolicy::kPadded;
  EXPECT_TRUE(ValidatePadLens(cfg, ok_pads).ok());  // 32 − 8 = 24 > 23
  const auto msg = ValidatePadLens(cfg, bad_pads).message();
  EXPECT_NE(msg.find("row 1 has Δpad = 24"), std::string::npos) << msg;
  EXPECT_NE(msg.find("at most 23"), std::string::npos) << msg;
  auto comp = KvCompressor::Create(cfg, 0);
  ASSERT_TRUE(comp.ok());
  EXPECT_FALSE((*comp)->Reset(24).ok());
  EXPECT_TRUE((*comp)->Reset(23).ok());
  EXPECT_EQ((*comp)->stats().effective_budget, 32 - 23);
}

}  // namespace
}  // namespace skipkv
