// `skipkv bench`: llama-bench-style throughput of the forward pass: pp<N>
// (prefill), tg<N> (decode from an empty cache) and bd@<depth> (batched
// decode at a depth under --kv-policy). The measurements are the library's
// ForwardBench (skipkv/bench.h, which documents what each test does); this
// file parses the flags, repeats each test -r times after one warm-up and
// prints the median, the spread (min..max, coefficient of variation) and,
// for tg<N>, the decode bandwidth against the memory read bandwidth measured
// per thread count at start-up and again right after its tg test, the larger
// kept (or given with --bandwidth-gbs); --json writes one JSON object
// per test. `skipkv bench throughput` (Table 1) is bench_throughput.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_subcommands.h"
#include "command_registry.h"
#include "engine_options.h"
#include "method_flags.h"
#include "skipkv/bench.h"
#include "skipkv/method_args.h"

namespace skipkv::cli {
namespace {

struct BenchOptions {
  std::string model;
  std::vector<int> threads = {2};
  int n_prompt = 512;
  int n_gen = 128;
  int repetitions = 3;
  std::string kv_type = "f16";
  std::string weights = "auto";
  std::vector<int> batches;  // batched decode: batch sizes
  std::vector<int> depths;   // batched decode: context depths
  int decode_steps = 8;
  std::string json_path;
  double bandwidth_gbs = 0;  // > 0: the machine's read bandwidth, GB/s, instead of measuring it
  MethodConfig method;  // its kv: policy "full" = no compression
  std::shared_ptr<MethodFlags> method_flags = std::make_shared<MethodFlags>();  // writes method.kv
};

struct Sample {
  std::string test{};
  int threads = 0;
  int batch = 1;
  int depth = 0;
  std::vector<double> tokens_per_s{};
  std::vector<double> compress_share{};  // compression time / decode time (policies only)
  std::vector<double> sentence_share{};  // skipkv: sentence hooks' time / decode time
  double redundant_sentences = 0;      // skipkv: |T| of sequence 0 (last repetition)
  int64_t penalized_evicted = 0;       // skipkv: its penalised slots evicted
  size_t kv_bytes = 0;                 // allocated K+V bytes of all sequences
  double decode_gbs = 0;               // tg: median tokens/s x decode weight bytes (0 otherwise)
  double read_gbs = 0;                 // tg: the read bandwidth of this thread count: the larger of
  double read_gbs_startup = 0;         //   the start-up probe and the probe run right after the test
  double read_gbs_after = 0;           //   (both 0 with --bandwidth-gbs, which read_gbs is then)
  double Median() const {
    auto v = tokens_per_s;
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
  }
  // Coefficient of variation of tokens/s over the repetitions: sample
  // standard deviation / mean (0 with one repetition).
  double Cv() const {
    const size_t n = tokens_per_s.size();
    if (n < 2) return 0;
    double mean = 0;
    for (double v : tokens_per_s) mean += v;
    mean /= static_cast<double>(n);
    double ss = 0;
    for (double v : tokens_per_s) ss += (v - mean) * (v - mean);
    return mean > 0 ? std::sqrt(ss / static_cast<double>(n - 1)) / mean : 0;
  }
};

std::string HumanBytes(double b) {
  char buf[32];
  if (b >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1 << 30));
  else std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1 << 20));
  return buf;
}

int RunBench(const BenchOptions& o) {
  if (o.n_prompt < 0 || o.n_gen < 0 || o.repetitions < 1 || o.decode_steps < 1) {
    std::fprintf(stderr, "skipkv bench: -p/-n must be >= 0, -r and --decode-steps >= 1\n");
    return 2;
  }
  if (!(o.bandwidth_gbs >= 0) || !std::isfinite(o.bandwidth_gbs)) {
    std::fprintf(stderr, "skipkv bench: --bandwidth-gbs must be a positive GB/s figure (0 = measure), got %g\n",
                 o.bandwidth_gbs);
    return 2;
  }
  if (o.kv_type != "f16" && o.kv_type != "f32") {
    std::fprintf(stderr, "skipkv bench: --kv-type must be f16 or f32, got '%s'\n", o.kv_type.c_str());
    return 2;
  }
  const KvPolicyConfig& kv_config = o.method.kv;
  const KvDType kv = o.kv_type == "f32" ? KvDType::kF32 : KvDType::kF16;
  StatusOr<FileLoad> weights = ParseFileLoad(o.weights);
  if (!weights.ok()) {
    std::fprintf(stderr, "skipkv bench: %s\n", weights.status().message().c_str());
    return 2;
  }
  auto opened = ForwardBench::Open(o.model, kv, kv_config, *weights);
  if (!opened.ok()) {
    const bool config = opened.status().code() == StatusCode::kInvalidArgument;
    std::fprintf(stderr, "skipkv bench: %s\n",
                 config ? opened.status().message().c_str() : opened.status().ToString().c_str());
    return config ? 2 : 1;
  }
  ForwardBench& fb = **opened;
  for (int t : o.threads) {  // every count checked before any test runs
    if (Status st = fb.SetThreads(t); !st.ok()) {
      std::fprintf(stderr, "skipkv bench: %s\n", st.message().c_str());
      return 2;
    }
  }
  const size_t weight_bytes = fb.weight_bytes();
  const size_t decode_bytes = fb.decode_weight_bytes();
  const std::string name = o.model.substr(o.model.find_last_of('/') + 1);
  std::printf("model: %s (%s)\nweights: %s (%.3f GB read per decode step), %.2f B params, %s, SIMD target %s, KV %s\n",
              name.c_str(), fb.ModelDescription().c_str(), HumanBytes(weight_bytes).c_str(), decode_bytes / 1e9,
              fb.parameters() / 1e9, fb.WeightsLoad().c_str(), ForwardBench::SimdTarget(), o.kv_type.c_str());
  std::printf("AMX tiles: %s\n", ForwardBench::AmxStatus().c_str());
  std::printf("decode weight prefetch: %s\n", ForwardBench::DecodePrefetchStatus().c_str());
  std::printf("decode weight streams (AVX-512 VNNI): %s\n", ForwardBench::DecodeStreamsStatus().c_str());
  // The bandwidth limit tg<N> is held against: --bandwidth-gbs, or measured
  // once per thread count before any test (1 GiB read 6 times, ~1 s) and
  // again after that count's tg test.
  std::map<int, double> stream;  // threads -> GB/s, when measured
  if (o.n_gen > 0 && o.bandwidth_gbs > 0) {
    std::printf("memory read bandwidth: %.1f GB/s (--bandwidth-gbs)\n", o.bandwidth_gbs);
  } else if (o.n_gen > 0) {
    for (int t : o.threads) {
      if (stream.count(t)) continue;
      if (Status st = fb.SetThreads(t); !st.ok()) return 2;
      auto gbs = fb.ReadBandwidthGBs();
      if (!gbs.ok()) {
        std::fprintf(stderr, "skipkv bench: %s\n", gbs.status().ToString().c_str());
        return 1;
      }
      stream[t] = *gbs;
      std::printf("memory read bandwidth, %d thread%s: %.1f GB/s (1 GiB in huge pages, 4 MiB vector-read chunks, best of 5 passes)\n",
                  t, t == 1 ? "" : "s", *gbs);
    }
  }
  std::printf("\n");
  std::printf("| %-7s | %-6s | %-12s | %12s | %-20s | spread, bandwidth\n", "threads", "batch", "test",
              "t/s (median)", "min .. max");
  std::printf("|---------|--------|--------------|--------------|----------------------|-------------------\n");

  const bool sentences = TraitsOf(kv_config).uses_sentences;
  std::vector<Sample> samples;
  for (int threads : o.threads) {
    if (Status st = fb.SetThreads(threads); !st.ok()) return 2;  // checked above
    auto run = [&](Sample s, auto fn) -> bool {
      auto warm = fn(0);
      if (!warm.ok()) {
        std::fprintf(stderr, "skipkv bench: %s\n", warm.status().ToString().c_str());
        return false;
      }
      for (int r = 0; r < o.repetitions; ++r) {
        auto v = fn(r + 1);
        if (!v.ok()) return false;
        s.tokens_per_s.push_back(v->tokens_per_s);
        s.compress_share.push_back(v->compress_share);
        s.sentence_share.push_back(v->sentence_share);
        s.redundant_sentences = v->redundant_sentences;
        s.penalized_evicted = v->penalized_evicted;
        s.kv_bytes = v->kv_bytes;
      }
      auto [lo, hi] = std::minmax_element(s.tokens_per_s.begin(), s.tokens_per_s.end());
      std::printf("| %7d | %6d | %-12s | %12.2f | %8.2f .. %8.2f | cv %.1f%%", threads, s.batch, s.test.c_str(),
                  s.Median(), *lo, *hi, 100 * s.Cv());
      if (s.test.rfind("tg", 0) == 0) {
        s.decode_gbs = s.Median() * static_cast<double>(decode_bytes) / 1e9;
        if (o.bandwidth_gbs > 0) {
          s.read_gbs = o.bandwidth_gbs;
        } else {
          // Measured again right after the test, and the better of the two
          // kept: a neighbour's burst during one second of probing must not
          // make the bound lower than what decode itself read.
          s.read_gbs_startup = stream.at(threads);
          auto after = fb.ReadBandwidthGBs();
          if (!after.ok()) {
            std::fprintf(stderr, "skipkv bench: %s\n", after.status().ToString().c_str());
            return false;
          }
          s.read_gbs_after = *after;
          s.read_gbs = std::max(s.read_gbs_startup, s.read_gbs_after);
        }
        std::printf(", decode %.1f GB/s = %.0f%% of read bandwidth", s.decode_gbs, 100 * s.decode_gbs / s.read_gbs);
        if (s.read_gbs_after > 0) {
          std::printf(" %.1f GB/s (start-up %.1f, after the test %.1f)", s.read_gbs, s.read_gbs_startup,
                      s.read_gbs_after);
        }
      }
      if (s.kv_bytes) std::printf(", KV %s", HumanBytes(static_cast<double>(s.kv_bytes)).c_str());
      if (TraitsOf(kv_config).evicts && s.depth > 0) {
        auto c = s.compress_share;
        std::sort(c.begin(), c.end());
        std::printf(", compression %.1f%% of decode", 100 * c[c.size() / 2]);
        if (sentences) {
          auto t = s.sentence_share;
          std::sort(t.begin(), t.end());
          std::printf(", sentences %.4f%% (|T| %.0f, penalised slots evicted %lld)", 100 * t[t.size() / 2],
                      s.redundant_sentences, static_cast<long long>(s.penalized_evicted));
        }
      }
      std::printf("\n");
      std::fflush(stdout);
      samples.push_back(std::move(s));
      return true;
    };
    if (o.n_prompt > 0 &&
        !run(Sample{.test = "pp" + std::to_string(o.n_prompt), .threads = threads, .batch = 1, .depth = 0},
             [&](int r) -> StatusOr<BenchResult> {
               SKIPKV_ASSIGN_OR_RETURN(double tps, fb.Prefill(o.n_prompt, 100 + r));
               BenchResult b;
               b.tokens_per_s = tps;
               return b;
             }))
      return 1;
    if (o.n_gen > 0 && !run(Sample{.test = "tg" + std::to_string(o.n_gen), .threads = threads, .batch = 1, .depth = 0},
                            [&](int r) { return fb.Decode(1, 0, o.n_gen, /*with_policy=*/false, 200 + r); }))
      return 1;
    for (int b : o.batches)
      for (int d : o.depths) {
        if (!run(Sample{.test = "bd@" + std::to_string(d), .threads = threads, .batch = b, .depth = d},
                 [&](int r) { return fb.Decode(b, d, o.decode_steps, /*with_policy=*/true, 300 + r); }))
          return 1;
      }
  }
  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path);
    for (const auto& s : samples) {
      nlohmann::json j = {{"model", name},
                          {"test", s.test},
                          {"threads", s.threads},
                          {"batch", s.batch},
                          {"depth", s.depth},
                          {"kv_type", o.kv_type},
                          {"simd", ForwardBench::SimdTarget()},
                          {"amx", ForwardBench::AmxStatus()},
                          {"decode_prefetch", ForwardBench::DecodePrefetchStatus()},
                          {"decode_streams", ForwardBench::DecodeStreamsStatus()},
                          {"tokens_per_s", s.tokens_per_s},
                          {"median_tokens_per_s", s.Median()},
                          {"weight_bytes", weight_bytes},
                          {"kv_policy", kv_config.policy},
                          {"kv_budget", kv_config.budget},
                          {"kv_interval", kv_config.interval},
                          {"kv_bytes", s.kv_bytes},
                          {"compress_share", s.compress_share},
                          {"sentence_share", s.sentence_share},
                          {"redundant_sentences", s.redundant_sentences},
                          {"penalized_evicted", s.penalized_evicted},
                          {"cv", s.Cv()},
                          {"decode_weight_bytes", decode_bytes},
                          {"weights_load", fb.WeightsLoad()}};
      if (s.decode_gbs > 0) {
        j["decode_gbs"] = s.decode_gbs;
        j["read_gbs"] = s.read_gbs;
        if (s.read_gbs_after > 0) {
          j["read_gbs_startup"] = s.read_gbs_startup;
          j["read_gbs_after"] = s.read_gbs_after;
        }
        j["read_share"] = s.decode_gbs / s.read_gbs;
      }
      // Every declared KV parameter (skipkv/method_args.h), as `run --json` has them.
      j["kv"] = nlohmann::json::parse(MethodArgsJson(o.method));
      out << j.dump() << "\n";
    }
    if (!out) {
      std::fprintf(stderr, "skipkv bench: cannot write '%s'\n", o.json_path.c_str());
      return 1;
    }
  }
  return 0;
}

CommandRegistrar reg(
    "bench", "Measure prefill, decode and batched-decode throughput (llama-bench style)", [](CLI::App& sub) {
      auto o = std::make_shared<BenchOptions>();
      sub.add_option("-m,--model", o->model, "Model file (GGUF, HF directory or llama2.c checkpoint; required)");
      sub.add_option("-t,--threads", o->threads, "Thread counts to test (repeat or comma-separate)")
          ->delimiter(',')
          ->capture_default_str();
      sub.add_option("-p,--n-prompt", o->n_prompt, "Prefill test: tokens in one call (0 = skip)")->capture_default_str();
      sub.add_option("-n,--n-gen", o->n_gen, "Decode test: tokens generated one by one (0 = skip)")
          ->capture_default_str();
      sub.add_option("-r,--repetitions", o->repetitions, "Timed repetitions per test (after one warm-up)")
          ->capture_default_str();
      sub.add_option("--kv-type", o->kv_type, "KV cache element type: f16 or f32")->capture_default_str();
      AddWeightsOption(sub, &o->weights);
      sub.add_option("-b,--batch", o->batches, "Batched decode: batch sizes, e.g. 1,4,8,16")->delimiter(',');
      sub.add_option("-d,--depth", o->depths,
                     "Batched decode: context depths, e.g. 512,4096 (caches filled directly)")
          ->delimiter(',');
      sub.add_option("--decode-steps", o->decode_steps, "Batched decode: timed steps per repetition")
          ->capture_default_str();
      sub.add_option("--json", o->json_path, "Also write one JSON object per test to this file");
      sub.add_option("--bandwidth-gbs,--stream-gbs", o->bandwidth_gbs,
                     "The machine's memory read bandwidth in GB/s, held against tg<N>'s decode bandwidth (0 = "
                     "measure it per thread count at start-up and again right after the tg test, the larger "
                     "kept: 1 GiB in huge pages read in 4 MiB chunks with vector loads, best of 5 passes, "
                     "about a second each; --stream-gbs is the old name)")
          ->capture_default_str();
      o->method_flags->Add(sub, &o->method, kArgBench);
      sub.require_subcommand(0, 1);
      const BenchSubcommand throughput = AddBenchThroughput(sub);
      return [o, throughput]() -> int {
        if (throughput.app->parsed()) return throughput.run();
        if (o->model.empty()) {
          std::fprintf(stderr, "skipkv bench: -m/--model is required\n");
          return 1;
        }
        if (Status st = o->method_flags->FinishKv(); !st.ok()) {
          std::fprintf(stderr, "skipkv bench: %s\n", st.message().c_str());
          return 2;
        }
        return RunBench(*o);
      };
    });

}  // namespace
}  // namespace skipkv::cli
