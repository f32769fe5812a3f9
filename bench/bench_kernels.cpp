// Kernel microbenchmarks on the R1-Distill-Qwen-1.5B shapes (hidden 1536,
// FFN 8960, vocab 151936, 12 query heads / 2 KV heads of 128).
//   BM_MatVec   decode matvec per weight type; counter GB/s = weight bytes / s.
//               "cold" rotates over copies of the matrix totalling >= 256 MiB
//               so the weights stream from DRAM (decode reality); "hot" reuses
//               one copy (cache-resident when it fits).
//   BM_MatMul   prefill / batched-decode GEMM; counter GFLOP/s = 2 rows in n / s.
//   BM_FmaPeak  the core's FMA roof in the dispatched target's vectors
//               (kernels::FmaChains: 12 chains, no loads); counter GFLOP/s on
//               the same scale as BM_MatMul's, so a float matmul's rate reads
//               as a share of it.
//   BM_AttentionDecode  one decode step's attention for `tasks` sequences at
//               4096 cached keys; counter us_per_token = us per cached token per
//               sequence (one layer, all heads), comparable to llama.cpp's figure
//               divided by the number of layers.
//   BM_AttentionPrefill  causal tiled attention of n queries over n keys.
//   BM_RmsNorm, BM_SiluMul, BM_Softmax, BM_Rope  elementwise kernels on one
//               activation row; counter GB/s = bytes read and written / s.
// Threads: argument `threads` (default machine: 2 cores). The 151936-row
// output projection is only registered with SKIPKV_BENCH_HUGE=1.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/ops.h"
#include "tensor/interleaved.h"
#include "tensor/quant.h"
#include "util/aligned_buffer.h"

namespace skipkv {
namespace {

// kQ4_Kx16, kQ8_0x16, kQ6_Kx16, kF32x16, kF16x16 (last): the Q4_K / Q8_0 / Q6_K / F32 / F16
// matrix interleaved in 16-row groups, as the model layer loads it where the kernels want it.
constexpr DType kTypes[] = {DType::kF32,     DType::kF16,     DType::kBF16,   DType::kQ8_0,
                            DType::kQ4_0,    DType::kQ4_K,    DType::kQ6_K,   DType::kQ4_Kx16,
                            DType::kQ8_0x16, DType::kQ6_Kx16, DType::kF32x16, DType::kF16x16};
constexpr int kNumTypes = static_cast<int>(std::size(kTypes));
struct Shape {
  int64_t rows, in;
};
constexpr Shape kShapes[] = {{1536, 1536}, {8960, 1536}, {1536, 8960}, {151936, 1536}};

// Quantised random weights, built once per (type, shape) and cached; `copies`
// distinct buffers (copies of the same bytes) let a benchmark defeat the caches.
struct Matrix {
  std::vector<AlignedBuffer> copies;
  TensorView view;
};

Matrix& GetMatrix(DType t, Shape s, int copies) {
  static std::map<std::tuple<int, int64_t, int64_t, int>, std::unique_ptr<Matrix>> cache;
  auto key = std::make_tuple(static_cast<int>(t), s.rows, s.in, copies);
  auto& slot = cache[key];
  if (!slot) {
    slot = std::make_unique<Matrix>();
    const DType file_type = FileTypeOf(t);
    const size_t row_bytes = RowBytes(file_type, s.in);
    AlignedBuffer first(row_bytes * s.rows);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.f, 0.05f);
    std::vector<float> row(s.in);
    for (int64_t r = 0; r < s.rows; ++r) {
      for (auto& v : row) v = nd(rng);
      QuantizeRow(file_type, row.data(), first.as<uint8_t>() + r * row_bytes, s.in);
    }
    if (file_type != t) InterleaveRows(file_type, first.as<uint8_t>(), s.rows, s.in);
    for (int c = 1; c < copies; ++c) {
      AlignedBuffer b(first.size());
      std::memcpy(b.data(), first.data(), first.size());
      slot->copies.push_back(std::move(b));
    }
    slot->copies.insert(slot->copies.begin(), std::move(first));
    slot->view.name = "bench";
    slot->view.type = t;
    slot->view.n_dims = 2;
    slot->view.ne = {s.in, s.rows, 1, 1};
  }
  return *slot;
}

std::vector<float> RandomActs(int64_t n) {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  return x;
}

// Args: type index, shape index, threads, cold (0/1).
void BM_MatVec(benchmark::State& state) {
  const DType t = kTypes[state.range(0)];
  const Shape s = kShapes[state.range(1)];
  const int threads = static_cast<int>(state.range(2));
  const bool cold = state.range(3) != 0;
  const size_t bytes = RowBytes(t, s.in) * s.rows;
  const int copies = cold ? static_cast<int>(std::max<size_t>(1, (256u << 20) / bytes + 1)) : 1;
  Matrix& m = GetMatrix(t, s, copies);
  ThreadPool pool(threads);
  const auto x = RandomActs(s.in);
  std::vector<float> y(s.rows);
  TensorView v = m.view;
  size_t i = 0;
  for (auto _ : state) {
    v.data = m.copies[i++ % m.copies.size()].as<uint8_t>();
    kernels::MatVec(v, x.data(), y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] = benchmark::Counter(1e-9 * static_cast<double>(bytes) * state.iterations(),
                                              benchmark::Counter::kIsRate);
  state.SetLabel(std::string(DTypeName(t)) + " " + std::to_string(s.rows) + "x" + std::to_string(s.in) +
                 (cold ? " cold" : " hot") + " target=" + kernels::SimdPathName());
}

void MatVecArgs(benchmark::internal::Benchmark* b) {
  const bool huge = std::getenv("SKIPKV_BENCH_HUGE") != nullptr;
  for (int ti = 0; ti < kNumTypes; ++ti) {
    for (int si = 0; si < (huge ? 4 : 3); ++si) {
      for (int threads : {1, 2}) b->Args({ti, si, threads, 1});
    }
    b->Args({ti, 0, 2, 0});  // small matrix, cache-resident
  }
}
BENCHMARK(BM_MatVec)->Apply(MatVecArgs)->ArgNames({"type", "shape", "threads", "cold"})->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Args: type index, shape index, tokens, threads.
void BM_MatMul(benchmark::State& state) {
  const DType t = kTypes[state.range(0)];
  const Shape s = kShapes[state.range(1)];
  const int64_t n = state.range(2);
  ThreadPool pool(static_cast<int>(state.range(3)));
  Matrix& m = GetMatrix(t, s, 1);
  TensorView v = m.view;
  v.data = m.copies[0].as<uint8_t>();
  const auto x = RandomActs(s.in * n);
  std::vector<float> y(s.rows * n);
  for (auto _ : state) {
    kernels::MatMul(v, x.data(), n, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(1e-9 * 2.0 * s.rows * s.in * n * state.iterations(),
                                                 benchmark::Counter::kIsRate);
  state.SetLabel(std::string(DTypeName(t)) + " " + std::to_string(s.rows) + "x" + std::to_string(s.in) +
                 " n=" + std::to_string(n));
}
void MatMulArgs(benchmark::internal::Benchmark* b) {
  for (int ti = 0; ti < kNumTypes; ++ti) {
    for (int n : {16, 128}) b->Args({ti, 1, n, 2});
    b->Args({ti, 1, 512, 2});  // as in a pp512 prefill
    b->Args({ti, 1, 512, 1});  // one thread: against BM_FmaPeak/threads:1, the core's roof
    b->Args({ti, 2, 128, 2});  // the FFN down projection: 35 KiB of f32 activations a token
    b->Args({ti, 2, 512, 2});  // ... and as in pp512: 17.5 MiB of them, beyond a cache share
    b->Args({ti, 2, 512, 1});
  }
}
BENCHMARK(BM_MatMul)->Apply(MatMulArgs)->ArgNames({"type", "shape", "n", "threads"})->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Args: threads. Each thread runs its own FmaChains; 2 flops per lane and step.
void BM_FmaPeak(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  constexpr int64_t kSteps = 1 << 20;
  const int64_t values = kernels::FmaChainValues();
  std::vector<float> out(static_cast<size_t>(values * threads));
  for (auto _ : state) {
    pool.Run(threads, [&](int64_t task, int) { kernels::FmaChains(kSteps, out.data() + task * values); });
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(1e-9 * 2.0 * values * kSteps * threads * state.iterations(),
                                                 benchmark::Counter::kIsRate);
  state.SetLabel(std::string("target=") + kernels::SimdPathName());
}
BENCHMARK(BM_FmaPeak)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// Attention inputs for `tasks` sequences: random K/V of `slots` cached keys
// per KV head and n_q query rows whose first sits at slot slots - n_q (causal).
struct AttentionSetup {
  static constexpr int kHeads = 12, kKvHeads = 2, kDim = 128;
  kernels::AttentionShape shape;
  std::vector<AlignedBuffer> storage;
  std::vector<std::vector<const void*>> kp, vp;
  std::vector<std::vector<float>> q, out;
  std::vector<kernels::AttentionTask> list;

  AttentionSetup(DType kv, int tasks, int64_t slots, int64_t n_q)
      : shape{kHeads, kKvHeads, kDim, kv, 1.f / std::sqrt(float(kDim))},
        kp(tasks), vp(tasks), q(tasks), out(tasks), list(tasks) {
    std::mt19937 rng(4);
    std::normal_distribution<float> nd;
    const size_t elem = kv == DType::kF16 ? 2 : 4;
    for (int t = 0; t < tasks; ++t) {
      for (int h = 0; h < kKvHeads; ++h) {
        for (int kvv = 0; kvv < 2; ++kvv) {  // K, then V: [slots][kDim]
          AlignedBuffer b(slots * kDim * elem);
          for (int64_t i = 0; i < slots * kDim; ++i) {
            if (kv == DType::kF16) {
              b.as<f16_t>()[i] = F32ToF16(nd(rng));
            } else {
              b.as<float>()[i] = nd(rng);
            }
          }
          (kvv == 0 ? kp : vp)[t].push_back(b.data());
          storage.push_back(std::move(b));
        }
      }
      q[t].resize(n_q * kHeads * kDim);
      for (auto& v : q[t]) v = nd(rng);
      out[t].resize(n_q * kHeads * kDim);
      list[t].q = q[t].data();
      list[t].n_q = n_q;
      list[t].n_slots = slots;
      list[t].first_query_slot = slots - n_q;
      list[t].k = kp[t].data();
      list[t].v = vp[t].data();
      list[t].out = out[t].data();
    }
  }
};

// Args: kv type (0 = f16, 1 = f32), tasks (sequences), threads, keys per KV
// head (from 2 * kernels::kAttnPartSlots a sequence's keys are split in parts).
void BM_AttentionDecode(benchmark::State& state) {
  const DType kv = state.range(0) == 0 ? DType::kF16 : DType::kF32;
  const int tasks = static_cast<int>(state.range(1));
  ThreadPool pool(static_cast<int>(state.range(2)));
  const int64_t slots = state.range(3);
  AttentionSetup s(kv, tasks, slots, 1);
  const size_t elem = kv == DType::kF16 ? 2 : 4;
  for (auto _ : state) {
    kernels::Attention(s.shape, s.list, pool);
    benchmark::DoNotOptimize(s.out[0].data());
  }
  // (tokens * 1e-6) per second, inverted = microseconds per token.
  state.counters["us_per_token"] =
      benchmark::Counter(1e-6 * static_cast<double>(state.iterations()) * slots * tasks,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["KV_GB/s"] =
      benchmark::Counter(1e-9 * static_cast<double>(state.iterations()) * tasks * AttentionSetup::kKvHeads *
                             2 * slots * AttentionSetup::kDim * elem,
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionDecode)
    ->ArgNames({"kv_f32", "tasks", "threads", "slots"})
    ->Args({0, 1, 1, 4096})
    ->Args({0, 1, 2, 4096})
    ->Args({0, 4, 2, 4096})
    ->Args({1, 1, 2, 4096})
    ->Args({0, 1, 1, 16384})
    ->Args({0, 1, 2, 16384})
    ->Args({0, 16, 2, 1024})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Prefill (tiled) attention: one sequence, n causal queries over n keys, f16 KV.
// Args: n, threads. GFLOP/s counts the causal half: 4 * heads * dim * n^2 / 2.
void BM_AttentionPrefill(benchmark::State& state) {
  const int64_t n = state.range(0);
  ThreadPool pool(static_cast<int>(state.range(1)));
  AttentionSetup s(DType::kF16, 1, n, n);
  for (auto _ : state) {
    kernels::Attention(s.shape, s.list, pool);
    benchmark::DoNotOptimize(s.out[0].data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      1e-9 * 2.0 * AttentionSetup::kHeads * AttentionSetup::kDim * static_cast<double>(n) * n *
          state.iterations(),
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionPrefill)->ArgNames({"n", "threads"})->Args({512, 2})->Args({2048, 2})
    ->UseRealTime()->Unit(benchmark::kMillisecond);

// Elementwise kernels over one 1.5B-shape activation row (GB/s = bytes read + written).
constexpr int64_t kHidden = 1536, kFfn = 8960;

void BM_RmsNorm(benchmark::State& state) {
  const auto x = RandomActs(kHidden), w = RandomActs(kHidden);
  std::vector<float> y(kHidden);
  for (auto _ : state) {
    kernels::RmsNorm(x.data(), w.data(), kHidden, 1e-6f, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] = benchmark::Counter(1e-9 * 3.0 * kHidden * 4 * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RmsNorm)->Unit(benchmark::kNanosecond);

void BM_SiluMul(benchmark::State& state) {
  const auto g = RandomActs(kFfn), u = RandomActs(kFfn);
  std::vector<float> y(kFfn);
  for (auto _ : state) {
    kernels::SiluMul(g.data(), u.data(), y.data(), kFfn);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] = benchmark::Counter(1e-9 * 3.0 * kFfn * 4 * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SiluMul)->Unit(benchmark::kNanosecond);

void BM_Softmax(benchmark::State& state) {
  const auto x0 = RandomActs(4096);
  std::vector<float> x(x0);
  for (auto _ : state) {
    std::copy(x0.begin(), x0.end(), x.begin());
    kernels::Softmax(x.data(), 4096);
    benchmark::DoNotOptimize(x.data());
  }
  state.counters["GB/s"] = benchmark::Counter(1e-9 * 2.0 * 4096 * 4 * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Softmax)->Unit(benchmark::kNanosecond);

// RoPE on the q rows of one token (12 heads of 128, rotate-half).
void BM_Rope(benchmark::State& state) {
  auto x = RandomActs(12 * 128);
  kernels::RopeParams p;
  int64_t pos = 0;
  for (auto _ : state) {
    kernels::Rope(x.data(), 12, 128, pos++ & 4095, p);
    benchmark::DoNotOptimize(x.data());
  }
  state.counters["GB/s"] = benchmark::Counter(1e-9 * 2.0 * 12 * 128 * 4 * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Rope)->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace skipkv

BENCHMARK_MAIN();
