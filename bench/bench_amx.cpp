// Interleaved Q8_0, Q4_K and Q6_K products (DType::kQ8_0x16, kQ4_Kx16,
// kQ6_Kx16: the engine's layout for weights read into memory) with the AMX tiles on and off, in one
// process (issue 40): the engine's kernels::MatMul on the
// R1-Distill-Qwen-1.5B shapes at several thread counts, AMX tiles
// (matmul_amx_x16_x86.cpp, where the CPU and Linux allow them) against the
// interleaved AVX-512 VNNI kernels (internal::SetAmxModeForTesting(kOff)),
// the same results bit for bit.
//   BM_Q8_0x16Batch, BM_Q4_Kx16Batch, BM_Q6_Kx16Batch  prefill: n = 512 tokens
//                 (Q6_K: the ffn_down, attn_v and output of Q4_K_M files in part).
//   BM_Q8_0x16Batch16, BM_Q4_Kx16Batch16  16 tokens (a batched decode step),
//                 weights rotated over copies totalling >= 512 MiB so they
//                 stream from DRAM.
//   BM_Q4_Kx16Batch64, BM_Q6_Kx16Batch64  64 tokens, weights from DRAM as
//                 above: the smallest Q4_K / Q6_K batch on tiles (AmxMinTokens),
//                 where the tiles' own unpacking of the weights costs the most.
//   BM_Q4_Kx16Batch16Tiles  16 tokens from DRAM with the threshold lowered
//                 (SetAmxMinTokensForTesting), so that amx:1 runs the tiles
//                 below it: whether Q4_K batched decode should take them.
// Counter GMAC/s. Args: amx (0 off, 1 on), shape index, threads. Without AMX
// the amx = 1 runs are skipped with the reason.
//   BM_Q8_0x16Decode, BM_Q4_Kx16Decode, BM_Q6_Kx16Decode  one token (decode
//                 never runs on the tiles; Q6_K, which Q4_K_M files hold
//                 beside Q4_K, has no tile kernel), weights from DRAM
//                 as above, with the decode kernels' software prefetch at
//                 several distances
//                 (internal::SetDecodePrefetchForTesting; the runs' switch is
//                 SKIPKV_DECODE_PREFETCH): whether the CPU's hardware
//                 prefetcher keeps up without one. Counter GB/s (weight bytes
//                 read per second). Args: prefetch (bytes ahead; -1 the
//                 defaults), shape index, threads. Streams at their defaults.
//   BM_Q8_0x16DecodeStreams, BM_Q4_Kx16DecodeStreams, BM_Q6_Kx16DecodeStreams
//                 as the decode rows, with the one-token kernels reading 1, 2, 4 or 8
//                 weight streams side by side (internal::SetDecodeStreamsForTesting;
//                 the runs' switch is SKIPKV_DECODE_STREAMS), the prefetch at
//                 its defaults and off: whether more streams in flight lift one
//                 core's read rate (llama.cpp's AMX decode kernel reads 4 at once).
//                 Args: streams (-1 the defaults), shape index, threads (1,
//                 16), prefetch (-1 its defaults, 0 none).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/simd_internal.h"
#include "tensor/interleaved.h"
#include "tensor/quant.h"
#include "util/aligned_buffer.h"

namespace skipkv {
namespace {

struct Shape {
  int64_t rows, in;
};
constexpr Shape kShapes[] = {{8960, 1536}, {1536, 8960}, {2048, 1536}};

struct Weights {
  std::vector<AlignedBuffer> copies;
  size_t bytes = 0;
};

const Weights& GetWeights(DType type, Shape s, size_t min_total_bytes) {
  static std::map<std::tuple<DType, int64_t, int64_t, size_t>, std::unique_ptr<Weights>> cache;
  auto& slot = cache[std::make_tuple(type, s.rows, s.in, min_total_bytes)];
  if (slot) return *slot;
  slot = std::make_unique<Weights>();
  Weights& w = *slot;
  const DType file = FileTypeOf(type);  // interleaved types: quantised as the file's, then interleaved
  const size_t row_bytes = RowBytes(file, s.in);
  w.bytes = row_bytes * static_cast<size_t>(s.rows);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 0.05f);
  std::vector<float> row(s.in);
  const size_t n_copies = std::max<size_t>(1, (min_total_bytes + w.bytes - 1) / w.bytes);
  w.copies.resize(n_copies);
  for (auto& c : w.copies) c.Resize(w.bytes);
  for (int64_t r = 0; r < s.rows; ++r) {
    for (auto& v : row) v = nd(rng);
    QuantizeRow(file, row.data(), w.copies[0].as<uint8_t>() + r * row_bytes, s.in);
  }
  if (file != type) InterleaveRows(file, w.copies[0].as<uint8_t>(), s.rows, s.in);
  for (size_t i = 1; i < n_copies; ++i) std::memcpy(w.copies[i].as<uint8_t>(), w.copies[0].as<uint8_t>(), w.bytes);
  return w;
}

bool SelectAmx(benchmark::State& state) {
  std::string why;
  const auto mode = state.range(0) != 0 ? kernels::internal::AmxMode::kTiles : kernels::internal::AmxMode::kOff;
  if (!kernels::internal::SetAmxModeForTesting(mode, &why)) {
    state.SkipWithError(("AMX not usable: " + why).c_str());
    return false;
  }
  return true;
}

// Times MatMul of `n` tokens against shape index state.range(1) of `type`
// (copies totalling >= min_total_bytes, rotated) on state.range(2) threads;
// returns the bytes of one copy.
size_t TimeMatMul(benchmark::State& state, DType type, int64_t n, size_t min_total_bytes) {
  const Shape s = kShapes[state.range(1)];
  const Weights& w = GetWeights(type, s, min_total_bytes);
  ThreadPool pool(static_cast<int>(state.range(2)));
  std::vector<float> x(static_cast<size_t>(s.in * n)), y(static_cast<size_t>(s.rows * n));
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& v : x) v = nd(rng);
  TensorView v;
  v.type = type;
  v.n_dims = 2;
  v.ne[0] = s.in;
  v.ne[1] = s.rows;
  size_t i = 0;
  for (auto _ : state) {
    v.data = w.copies[i++ % w.copies.size()].as<uint8_t>();
    kernels::MatMul(v, x.data(), n, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  return w.bytes;
}

std::string ShapeName(const benchmark::State& state) {
  const Shape s = kShapes[state.range(1)];
  return std::to_string(s.rows) + "x" + std::to_string(s.in);
}

// min_tokens > 0: the AMX threshold for the amx:1 runs (else the default).
void Run(benchmark::State& state, DType type, int64_t n, size_t min_total_bytes, int64_t min_tokens = 0) {
  if (!SelectAmx(state)) return;
  kernels::internal::SetAmxMinTokensForTesting(state.range(0) != 0 ? min_tokens : 0);
  TimeMatMul(state, type, n, min_total_bytes);
  kernels::internal::ResetAmxModeForTesting();
  kernels::internal::SetAmxMinTokensForTesting(0);
  const Shape s = kShapes[state.range(1)];
  const double iters = static_cast<double>(state.iterations());
  state.counters["GMAC/s"] =
      benchmark::Counter(1e-9 * static_cast<double>(s.rows * s.in * n) * iters, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(state.range(0) ? "AMX " : "no AMX ") + kernels::SimdPathName() + " " +
                 ShapeName(state));
}

void BM_Q8_0x16Batch(benchmark::State& state) { Run(state, DType::kQ8_0x16, 512, 0); }
void BM_Q4_Kx16Batch(benchmark::State& state) { Run(state, DType::kQ4_Kx16, 512, 0); }
void BM_Q6_Kx16Batch(benchmark::State& state) { Run(state, DType::kQ6_Kx16, 512, 0); }
void BM_Q8_0x16Batch16(benchmark::State& state) { Run(state, DType::kQ8_0x16, 16, size_t{512} << 20); }
void BM_Q4_Kx16Batch16(benchmark::State& state) { Run(state, DType::kQ4_Kx16, 16, size_t{512} << 20); }
void BM_Q4_Kx16Batch64(benchmark::State& state) { Run(state, DType::kQ4_Kx16, 64, size_t{512} << 20); }
void BM_Q6_Kx16Batch64(benchmark::State& state) { Run(state, DType::kQ6_Kx16, 64, size_t{512} << 20); }
void BM_Q4_Kx16Batch16Tiles(benchmark::State& state) {
  Run(state, DType::kQ4_Kx16, 16, size_t{512} << 20, 16);
}

// Decode (one token) with the one-token tiles prefetching range(0) bytes
// ahead (-1: the defaults, whatever SKIPKV_DECODE_PREFETCH says).
void RunDecode(benchmark::State& state, DType type) {
  kernels::internal::ResetDecodeStreamsForTesting();
  const int64_t bytes = state.range(0);
  if (bytes >= 0) {
    kernels::internal::SetDecodePrefetchForTesting({bytes, bytes, bytes});
  } else {
    kernels::internal::ResetDecodePrefetchForTesting();
  }
  const std::string prefetch = kernels::internal::DecodePrefetchStatus();
  const size_t weight_bytes = TimeMatMul(state, type, 1, size_t{512} << 20);
  kernels::internal::ResetDecodePrefetchForTesting();
  state.counters["GB/s"] =
      benchmark::Counter(1e-9 * static_cast<double>(weight_bytes) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
  state.SetLabel(std::string(kernels::SimdPathName()) + " " + ShapeName(state) + "; " + prefetch);
}
// Decode reading range(0) weight streams (-1: the defaults, whatever
// SKIPKV_DECODE_STREAMS says), the prefetch at its defaults (range(3) -1) or
// off (0).
void RunDecodeStreams(benchmark::State& state, DType type) {
  if (state.range(3) == 0) {
    kernels::internal::SetDecodePrefetchForTesting({0, 0, 0});
  } else {
    kernels::internal::ResetDecodePrefetchForTesting();
  }
  const int64_t n = state.range(0);
  if (n > 0) {
    kernels::internal::SetDecodeStreamsForTesting({n, n, n});
  } else {
    kernels::internal::ResetDecodeStreamsForTesting();
  }
  const std::string streams = kernels::internal::DecodeStreamsStatus();
  const std::string prefetch = kernels::internal::DecodePrefetchStatus();
  const size_t weight_bytes = TimeMatMul(state, type, 1, size_t{512} << 20);
  kernels::internal::ResetDecodeStreamsForTesting();
  kernels::internal::ResetDecodePrefetchForTesting();
  state.counters["GB/s"] =
      benchmark::Counter(1e-9 * static_cast<double>(weight_bytes) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
  state.SetLabel(std::string(kernels::SimdPathName()) + " " + ShapeName(state) + "; " + streams +
                 "; prefetch " + prefetch);
}
void BM_Q8_0x16DecodeStreams(benchmark::State& state) { RunDecodeStreams(state, DType::kQ8_0x16); }
void BM_Q4_Kx16DecodeStreams(benchmark::State& state) { RunDecodeStreams(state, DType::kQ4_Kx16); }
void BM_Q6_Kx16DecodeStreams(benchmark::State& state) { RunDecodeStreams(state, DType::kQ6_Kx16); }

void BM_Q8_0x16Decode(benchmark::State& state) { RunDecode(state, DType::kQ8_0x16); }
void BM_Q4_Kx16Decode(benchmark::State& state) { RunDecode(state, DType::kQ4_Kx16); }
void BM_Q6_Kx16Decode(benchmark::State& state) { RunDecode(state, DType::kQ6_Kx16); }

void DecodeArgs(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 4, 16}) {
    for (int shape : {0, 1}) {
      for (int bytes : {-1, 0, 1024, 2048, 4096, 8192, 16384}) b->Args({bytes, shape, threads});
    }
  }
  b->ArgNames({"prefetch", "shape", "threads"})->UseRealTime()->MinTime(0.2);
}

// 1 thread (one core's memory parallelism, issue 40's 0.41x) and 16 (the
// Xeon's cores); not 4, to keep the device protocol's bench_amx step short.
// Every count with the prefetch at its defaults, and 1-8 streams again without
// it: on Zen 5 four streams of the K-quants read 0.6-0.8x one stream with
// their two-block prefetch, and dropping the prefetch did not bring them back
// (BENCHMARKS.md, thirteenth session), but the Xeon's prefetchers differ, so
// the two are swept together.
void DecodeStreamsArgs(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 16}) {
    for (int shape : {0, 1}) {
      for (int streams : {-1, 1, 2, 4, 8}) b->Args({streams, shape, threads, -1});
      for (int streams : {1, 2, 4, 8}) b->Args({streams, shape, threads, 0});
    }
  }
  b->ArgNames({"streams", "shape", "threads", "prefetch"})->UseRealTime()->MinTime(0.2);
}

// The arguments and timing every benchmark here takes.
void Common(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 4, 16}) {
    for (int shape : {0, 1}) {
      for (int amx : {0, 1}) b->Args({amx, shape, threads});
    }
  }
  b->ArgNames({"amx", "shape", "threads"})->UseRealTime()->MinTime(0.2);
}

BENCHMARK(BM_Q8_0x16Batch)->Apply(Common)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Q4_Kx16Batch)->Apply(Common)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Q6_Kx16Batch)->Apply(Common)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Q8_0x16Batch16)->Apply(Common)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Q4_Kx16Batch16)->Apply(Common)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Q4_Kx16Batch64)->Apply(Common)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Q6_Kx16Batch64)->Apply(Common)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Q4_Kx16Batch16Tiles)->Apply(Common)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Q8_0x16Decode)->Apply(DecodeArgs)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Q4_Kx16Decode)->Apply(DecodeArgs)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Q6_Kx16Decode)->Apply(DecodeArgs)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Q8_0x16DecodeStreams)->Apply(DecodeStreamsArgs)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Q4_Kx16DecodeStreams)->Apply(DecodeStreamsArgs)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Q6_Kx16DecodeStreams)->Apply(DecodeStreamsArgs)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace skipkv

BENCHMARK_MAIN();
