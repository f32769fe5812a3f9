// KV compression cost on the DeepSeek-R1-Distill-Qwen-1.5B attention shape
// (28 layers, 12 query heads, 2 KV heads, head_dim 128, f16 cache) at the
// paper's operating point B = 1024, Δt = 128, α = 8: a compression sees
// 1152 slots per (layer, head) and keeps 1024. The figure to compare is the
// time of one all-layer compression divided by Δt against the decode step
// time (target ≤ 5% amortised). Also: the parts of one head's R-KV score,
// and the other policies for scale.
//
//   build-kv/bench/bench_kv --benchmark_filter=AllLayers
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kv/kv_compressor.h"
#include "kv/kv_policy.h"
#include "kv/scores.h"
#include "util/thread_pool.h"

namespace skipkv {
namespace {

constexpr int kLayers = 28, kHeads = 12, kKvHeads = 2, kDim = 128;
constexpr int64_t kBudget = 1024, kInterval = 128;

KvPolicyConfig Config(const char* policy) {
  KvPolicyConfig c;
  c.policy = policy;
  c.budget = kBudget;
  c.window = 8;
  c.interval = kInterval;
  return c;
}

// Appends `n` tokens of random post-RoPE-like K/V (clustered keys, as real
// keys share directions) and pushes their queries.
void Feed(SequenceKvCache& cache, int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::vector<float> centres(8 * kDim);
  for (auto& x : centres) x = nd(rng);
  std::vector<float> k(kKvHeads * kDim), v(kKvHeads * kDim), q(kHeads * kDim);
  for (int64_t t = 0; t < n; ++t) {
    const int32_t pos = cache.size(0) == 0 ? 0 : cache.GenPos(0, 0)[cache.size(0) - 1] + 1;
    for (int layer = 0; layer < kLayers; ++layer) {
      const int c = static_cast<int>(rng() % 8);
      for (int i = 0; i < kKvHeads * kDim; ++i) k[i] = centres[c * kDim + i % kDim] + 0.7f * nd(rng);
      for (auto& x : v) x = nd(rng);
      for (auto& x : q) x = nd(rng);
      cache.Append(layer, k.data(), v.data(), pos, true);
      cache.PushQuery(layer, q.data());
    }
  }
}

KvCacheShape Shape(const KvPolicy& policy) {
  KvCacheShape s;
  s.n_layers = kLayers;
  s.n_heads = kHeads;
  s.n_kv_heads = kKvHeads;
  s.head_dim = kDim;
  s.dtype = KvDType::kF16;
  policy.ConfigureCacheShape(&s);
  return s;
}

// One compression of all 28 layers from 1152 to 1024 slots; the 128 new
// tokens are appended outside the timed region. Arg: threads.
void BM_CompressAllLayers(benchmark::State& state, const char* policy) {
  const auto cfg = Config(policy);
  auto comp = KvCompressor::Create(cfg, 0);
  if (!comp.ok()) {
    state.SkipWithError(comp.status().ToString().c_str());
    return;
  }
  const KvPolicy& pol = (*comp)->policy();
  const int64_t cap = pol.CacheCapacity(0);
  SequenceKvCache cache(Shape(pol), cap, cap);
  std::mt19937 rng(1);
  Feed(cache, cap, rng);
  ThreadPool pool(static_cast<int>(state.range(0)));
  int64_t l = cap;
  for (auto _ : state) {
    (*comp)->CompressNow(cache, l, &pool);
    state.PauseTiming();
    if (pol.needs_attention_scores())
      for (int layer = 0; layer < kLayers; ++layer)
        for (int h = 0; h < kKvHeads; ++h)
          for (int64_t s = 0; s < cache.size(layer); ++s)
            cache.AttentionScore(layer, h)[s] += 1.f / (1 + s % 13);
    Feed(cache, kInterval, rng);
    l += kInterval;
    state.ResumeTiming();
  }
  // The time column is ms per compression; this is the same amortised over
  // the Δt decode steps between two compressions (printed in seconds).
  state.counters["ms_per_decode_step"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kInterval,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK_CAPTURE(BM_CompressAllLayers, rkv, "rkv")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CompressAllLayers, snapkv, "snapkv")
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CompressAllLayers, h2o_rkv, "h2o_rkv")
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CompressAllLayers, h2o_acc, "h2o_acc")
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CompressAllLayers, streaming, "streaming")
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The parts of one head's R-KV score at N = 1152.
struct HeadData {
  std::vector<float> k, q;
  HeadData() : k(1152 * kDim), q(6 * 8 * kDim) {
    // Clustered keys (real keys share directions; many pairs pass the 0.5
    // similarity threshold, which exercises the retain-last bookkeeping).
    std::mt19937 rng(2);
    std::normal_distribution<float> nd;
    std::vector<float> centres(8 * kDim);
    for (auto& x : centres) x = nd(rng);
    for (size_t i = 0; i < k.size(); ++i) k[i] = centres[(i / kDim % 8) * kDim + i % kDim] + 0.7f * nd(rng);
    for (auto& x : q) x = nd(rng);
  }
};

void BM_RedundancyOneHead(benchmark::State& state) {
  HeadData data;
  KvScratch scratch;
  std::vector<float> out(1152);
  for (auto _ : state) {
    kvscore::Redundancy(data.k.data(), 1152, kDim, nullptr, out.data(), scratch);
    benchmark::DoNotOptimize(out.data());
  }
  // Multiply-adds actually done: the upper triangle of the 1152² Gram matrix.
  state.counters["GFMA/s"] =
      benchmark::Counter(1152.0 * 1153 / 2 * kDim * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RedundancyOneHead)->Unit(benchmark::kMillisecond);

void BM_ImportanceOneHead(benchmark::State& state) {
  HeadData data;
  KvScratch scratch;
  std::vector<float> out(1144);
  for (auto _ : state) {
    kvscore::AttentionImportance(data.q.data(), 6, 8, data.k.data(), 1144, kDim, nullptr, out.data(),
                                 scratch);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_ImportanceOneHead)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace skipkv

BENCHMARK_MAIN();
