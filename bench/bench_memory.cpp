// STREAM-style memory bandwidth of this machine (copy, scale, add, triad over
// arrays far larger than the caches), with 1 and N threads of skipkv's
// ThreadPool. Decode is bandwidth-bound, so BENCHMARKS.md relates decode
// tokens/s x weight bytes per token to the triad figure measured here.
// Bytes counted as STREAM does: triad a = b + s*c moves 3 arrays.
#include <benchmark/benchmark.h>

#include <vector>

#include "util/aligned_buffer.h"
#include "util/thread_pool.h"

namespace skipkv {
namespace {

constexpr int64_t kElems = 32 << 20;  // 32 Mi doubles = 256 MiB per array

struct Arrays {
  AlignedBuffer a{kElems * sizeof(double)}, b{kElems * sizeof(double)}, c{kElems * sizeof(double)};
  Arrays() {
    for (int64_t i = 0; i < kElems; ++i) {
      a.as<double>()[i] = 1.0;
      b.as<double>()[i] = 2.0;
      c.as<double>()[i] = 0.5;
    }
  }
};

Arrays& SharedArrays() {
  static Arrays arrays;
  return arrays;
}

void BM_StreamTriad(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  Arrays& arr = SharedArrays();
  double* a = arr.a.as<double>();
  const double* b = arr.b.as<double>();
  const double* c = arr.c.as<double>();
  const double s = 3.0;
  const int64_t chunk = (kElems + threads - 1) / threads;
  for (auto _ : state) {
    pool.ParallelFor(kElems, chunk, [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) a[i] = b[i] + s * c[i];
    });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kElems * 3 * static_cast<int64_t>(sizeof(double)));
}
BENCHMARK(BM_StreamTriad)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_StreamRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  Arrays& arr = SharedArrays();
  const double* b = arr.b.as<double>();
  const int64_t chunk = (kElems + threads - 1) / threads;
  std::vector<double> partial(threads * 8);
  for (auto _ : state) {
    pool.ParallelFor(kElems, chunk, [&](int64_t begin, int64_t end, int w) {
      double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = begin;
      for (; i + 4 <= end; i += 4) {
        s0 += b[i];
        s1 += b[i + 1];
        s2 += b[i + 2];
        s3 += b[i + 3];
      }
      for (; i < end; ++i) s0 += b[i];
      partial[w * 8] += s0 + s1 + s2 + s3;
    });
    benchmark::DoNotOptimize(partial.data());
  }
  state.SetBytesProcessed(state.iterations() * kElems * static_cast<int64_t>(sizeof(double)));
}
BENCHMARK(BM_StreamRead)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace skipkv

BENCHMARK_MAIN();
