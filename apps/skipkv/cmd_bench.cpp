// `skipkv bench`: llama-bench-style throughput of the forward pass.
//   pp<N>  prefill N tokens in one call (tokens/s)
//   tg<N>  decode N tokens one at a time from an empty cache (tokens/s)
//   bd     batched decode: B sequences whose caches are filled to a depth D
//          directly (FillSyntheticKv; prefilling 16 x 16k tokens would take
//          hours on a CPU), then S decode steps of one token per sequence
//          (tokens/s summed over the batch)
//   With --kv-policy the batched-decode caches hold what the policy holds at
//   that depth in steady state just before a compression (B + Δt − 1 slots
//   plus the query window), each step feeds the sequence's KvCompressor,
//   and the first step of a repetition starts on a compression boundary
//   (l % Δt == 0), so every repetition pays one full compression of every
//   layer of every sequence at the real length N = B + Δt. The t/s shown is
//   amortised over Δt steps: batch·steps / (decode time + compression time
//   · steps/Δt); the compression share of decode time is printed beside it.
//   --kv-policy skipkv also runs each sequence's sentence hooks (the tracker
//   fed every final hidden row, the PSS / T update before the compressing
//   forward) after a warm-up through the whole history (sentences of 16
//   tokens whose hidden rows repeat every 8 sentences, so T fills up), and
//   reports their time apart: "sentences" = (bookkeeping per step + PSS
//   per Δt steps) / decode time. The decode time excludes it.
// `skipkv bench throughput` (Table 1) is bench_throughput.cpp.
// Each test runs -r times after one warm-up; the table shows the median and
// the spread (min..max); --json writes one JSON object per test.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_subcommands.h"
#include "command_registry.h"
#include "skipkv_options.h"
#include "io/model_source.h"
#include "kernels/ops.h"
#include "kv/kv_compressor.h"
#include "kv/kv_policy.h"
#include "kv/policies/skipkv.h"
#include "steer/skipkv_hooks.h"
#include "steer/token_sets.h"
#include "tokenizer/tokenizer.h"
#include "model/forward.h"
#include "model/model.h"
#include "util/thread_pool.h"

namespace skipkv::cli {
namespace {

struct BenchOptions {
  std::string model;
  std::vector<int> threads = {2};
  int n_prompt = 512;
  int n_gen = 128;
  int repetitions = 3;
  std::string kv_type = "f16";
  std::vector<int> batches;  // batched decode: batch sizes
  std::vector<int> depths;   // batched decode: context depths
  int decode_steps = 8;
  std::string json_path;
  KvPolicyConfig kv;  // policy "full" = no compression
  std::shared_ptr<SkipkvOptions> skipkv_opts = std::make_shared<SkipkvOptions>();  // writes kv.skipkv
};

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Sample {
  std::string test;
  int threads = 0;
  int batch = 1;
  int depth = 0;
  std::vector<double> tokens_per_s;
  std::vector<double> compress_share;  // compression time / decode time (policies only)
  std::vector<double> sentence_share;  // skipkv: sentence hooks' time / decode time
  double redundant_sentences = 0;      // skipkv: |T| of sequence 0 (last repetition)
  int64_t penalized_evicted = 0;       // skipkv: its penalised slots evicted
  size_t kv_bytes = 0;                 // allocated K+V bytes of all sequences
  double Median() const {
    auto v = tokens_per_s;
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
  }
};

struct DecodeResult {
  double tokens_per_s = 0;
  double compress_share = 0;
  size_t kv_bytes = 0;
  double sentence_share = 0;
  // skipkv, sequence 0 at the end: |T| and the penalised slots evicted (all
  // compressions of the repetition), so a run shows the penalty was exercised.
  double redundant_sentences = 0;
  int64_t penalized_evicted = 0;
};

class Bench {
 public:
  Bench(const Model& model, KvDType kv_type, const KvPolicyConfig& kv,
        std::shared_ptr<const SkipkvTokenSets> skipkv_sets = nullptr)
      : model_(model), kv_type_(kv_type), kv_(kv), fwd_(model), sets_(std::move(skipkv_sets)) {}

  // Prefill n tokens into a fresh cache in one call; returns tokens/s.
  StatusOr<double> Prefill(int n, ThreadPool& pool, uint64_t seed) {
    SequenceKvCache cache(model_.KvShape(kv_type_), n, SequenceKvCache::kUnbounded);
    std::vector<int32_t> tokens = RandomTokens(n, seed), pos(n);
    for (int i = 0; i < n; ++i) pos[i] = i;
    SequenceInput in;
    in.cache = &cache;
    in.tokens = tokens;
    in.pos = pos;
    in.logits = LogitsMode::kLast;
    ForwardBatch batch;
    batch.seqs = std::span<const SequenceInput>(&in, 1);
    const auto t0 = Clock::now();
    SKIPKV_ASSIGN_OR_RETURN(auto out, fwd_.Run(batch, pool));
    (void)out;
    return n / Seconds(t0, Clock::now());
  }

  // Decode `steps` tokens per sequence for `n_seqs` sequences at context
  // depth `depth` (caches filled directly); see the file comment.
  StatusOr<DecodeResult> Decode(int n_seqs, int depth, int steps, ThreadPool& pool, uint64_t seed) {
    SKIPKV_ASSIGN_OR_RETURN(auto kv_policy, CreateKvPolicy(kv_));
    const bool policy = kv_policy->evicts();
    KvCacheShape shape = model_.KvShape(kv_type_);
    kv_policy->ConfigureCacheShape(&shape);
    std::vector<std::unique_ptr<SequenceKvCache>> caches;
    std::vector<std::unique_ptr<KvCompressor>> compressors;
    for (int s = 0; s < n_seqs; ++s) {
      // Steady state under a policy: B slots after the last compression plus
      // Δt − 1 appended since, so the first timed step appends the Δt-th and
      // compresses at the real length N = B + Δt (spec §2.1), as a long
      // generation does every Δt steps.
      const int64_t filled = policy ? std::min<int64_t>(depth, kv_.budget + kv_.interval - 1) : depth;
      // A policy's cache is bounded by B + Δt however deep the generation
      // (the depth came from decoding, not from a long prompt).
      const int64_t capacity = kv_policy->CacheCapacity(filled);
      caches.push_back(std::make_unique<SequenceKvCache>(shape, filled + steps, capacity));
      if (filled > 0) SKIPKV_RETURN_IF_ERROR(FillSyntheticKv(*caches.back(), filled, seed + s));
      if (policy) {
        SKIPKV_ASSIGN_OR_RETURN(auto c, KvCompressor::Create(kv_, s));
        SKIPKV_RETURN_IF_ERROR(c->Reset());
        compressors.push_back(std::move(c));
        FillQueryWindow(*caches.back(), seed + 1000 + s);
      }
    }
    std::vector<int32_t> tokens = RandomTokens(n_seqs, seed), pos(n_seqs), gen_pos(n_seqs);
    std::vector<SequenceInput> inputs(n_seqs);
    ForwardBatch batch;
    double decode_s = 0, compress_s = 0, book_s = 0, pss_s = 0;
    // Policies: start on a compression boundary so each repetition pays one.
    const int64_t l0 = policy ? (depth + kv_.interval - 1) / kv_.interval * kv_.interval : depth;
    // SkipKV: the sentence hooks of each sequence, linked to its compressor's
    // state, warmed up through the history 0..l0−1.
    std::vector<std::unique_ptr<SequenceHooks>> hooks;
    if (kv_policy->uses_sentences()) {
      for (int s = 0; s < n_seqs; ++s) {
        auto state = std::make_unique<SkipkvSequenceState>(kv_.skipkv.sentence_scoring);
        hooks.push_back(MakeSkipkvSentenceHooks(kv_.skipkv, sets_,
                                                kv_.skipkv.sentence_scoring ? &state->penalty : nullptr));
        SKIPKV_RETURN_IF_ERROR(compressors[s]->Reset(0, std::move(state)));
        WarmSentences(*hooks.back(), l0, seed + 2000 + s);
      }
      batch.final_hidden_hook = [&](std::span<const BatchToken> rows, const float* hidden) {
        const auto t = Clock::now();
        for (size_t i = 0; i < rows.size(); ++i) {
          hooks[rows[i].seq]->OnFinalHidden(rows.subspan(i, 1), hidden + i * model_.config().d_model);
        }
        book_s += Seconds(t, Clock::now());
      };
    }
    for (int step = 0; step < steps; ++step) {
      for (int s = 0; s < n_seqs; ++s) {
        pos[s] = static_cast<int32_t>(l0 + step);
        gen_pos[s] = pos[s];
        inputs[s].cache = caches[s].get();
        inputs[s].tokens = std::span<const int32_t>(&tokens[s], 1);
        inputs[s].pos = std::span<const int32_t>(&pos[s], 1);
        inputs[s].logits = LogitsMode::kLast;
      }
      batch.seqs = inputs;
      if (!hooks.empty()) {
        const auto t = Clock::now();
        for (int s = 0; s < n_seqs; ++s) {
          SequenceStep st;
          st.l_before = l0 + step;
          st.l_after = l0 + step + 1;
          st.compresses = compressors[s]->Scheduled(st.l_before, st.l_after, ForwardKind::kDecode);
          hooks[s]->BeforeForward(st);
        }
        pss_s += Seconds(t, Clock::now());
      }
      auto t0 = Clock::now();
      SKIPKV_ASSIGN_OR_RETURN(auto out, fwd_.Run(batch, pool));
      decode_s += Seconds(t0, Clock::now());
      // Feed back the greedy token so the work is that of real decoding.
      for (int s = 0; s < n_seqs; ++s) {
        const float* row = out.LastRow(s);
        tokens[s] = static_cast<int32_t>(std::max_element(row, row + out.vocab) - row);
      }
      if (policy) {
        t0 = Clock::now();
        for (int s = 0; s < n_seqs; ++s)
          compressors[s]->AfterForward(*caches[s], l0 + step, l0 + step + 1, ForwardKind::kDecode, &pool);
        compress_s += Seconds(t0, Clock::now());
      }
    }
    DecodeResult r;
    // Amortise: one compression (and one PSS update) per Δt steps in steady
    // state; the per-token bookkeeping ran inside the forward, so it is
    // taken out of the decode time and counted apart.
    decode_s -= book_s;
    const double per_dt = policy ? std::max(steps, static_cast<int>(kv_.interval)) : 1;
    const double compress_per_step = policy ? compress_s / per_dt : 0;
    const double sentence_per_step = book_s / steps + pss_s / per_dt;
    r.tokens_per_s =
        static_cast<double>(n_seqs) * steps / (decode_s + (compress_per_step + sentence_per_step) * steps);
    r.compress_share = policy ? compress_per_step * steps / decode_s : 0;
    r.sentence_share = sentence_per_step * steps / decode_s;
    if (!hooks.empty()) {
      for (const auto& [name, value] : hooks[0]->Diagnostics())
        if (name == "skipkv.redundant_sentences") r.redundant_sentences = value;
      r.penalized_evicted = compressors[0]->stats().penalized_evicted;
    }
    for (const auto& c : caches) r.kv_bytes += c->AllocatedKvBytes();
    return r;
  }

 private:
  std::vector<int32_t> RandomTokens(int n, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> dist(0, model_.config().vocab_size - 1);
    std::vector<int32_t> t(n);
    for (auto& x : t) x = dist(rng);
    return t;
  }

  // Pushes `query_window` random queries into every layer (the observation
  // window a real decode would have left there).
  void FillQueryWindow(SequenceKvCache& cache, uint64_t seed) const {
    const auto& cs = cache.shape();
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> dist(0.f, 1.f);
    std::vector<float> q(static_cast<size_t>(cs.n_heads) * cs.head_dim);
    for (int l = 0; l < cs.n_layers; ++l)
      for (int w = 0; w < cs.query_window; ++w) {
        for (auto& x : q) x = dist(rng);
        cache.PushQuery(l, q.data());
      }
  }

  // Feeds the sentence hooks a history of `l0` tokens at gen_pos 0..l0−1 as
  // a real run would have: sentences of 16 tokens ending in a delimiter,
  // hidden rows = one of 8 fixed random directions per sentence plus noise
  // (so later sentences repeat earlier ones and T fills up), and a PSS
  // update at every multiple of Δt.
  void WarmSentences(SequenceHooks& hooks, int64_t l0, uint64_t seed) const {
    const int d = model_.config().d_model;
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> dirs(8 * static_cast<size_t>(d));
    for (auto& x : dirs) x = nd(rng);
    const std::vector<int32_t> prompt = RandomTokens(1, seed);
    SequenceStart start;
    start.prompt = prompt;
    start.d_model = d;
    hooks.OnStart(start);
    std::vector<float> row(d);
    for (int64_t p = 0; p < l0; ++p) {
      if (p > 0 && p % kv_.interval == 0) {
        SequenceStep st;
        st.l_before = p;
        st.l_after = p + 1;
        st.compresses = true;
        hooks.BeforeForward(st);
      }
      const int64_t sentence = p / 16;
      const bool delimiter = p % 16 == 15;
      for (int i = 0; i < d; ++i) row[i] = dirs[(sentence % 8) * d + i] + 0.05f * nd(rng);
      BatchToken t;
      t.token = delimiter && !sets_->delimiters.empty() ? sets_->delimiters[0] : 0;
      t.pos = t.gen_pos = static_cast<int32_t>(p);
      t.last = true;
      hooks.OnFinalHidden(std::span<const BatchToken>(&t, 1), row.data());
      if (p >= 1) hooks.OnToken(t.token, delimiter ? "\n" : "x");
    }
  }

  const Model& model_;
  KvDType kv_type_;
  KvPolicyConfig kv_;
  ForwardPass fwd_;
  std::shared_ptr<const SkipkvTokenSets> sets_;  // skipkv only
};

std::string HumanBytes(double b) {
  char buf[32];
  if (b >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1 << 30));
  else std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1 << 20));
  return buf;
}

int RunBench(BenchOptions o) {  // by value: thread counts are resolved in place
  if (o.n_prompt < 0 || o.n_gen < 0 || o.repetitions < 1 || o.decode_steps < 1) {
    std::fprintf(stderr, "skipkv bench: -p/-n must be >= 0, -r and --decode-steps >= 1\n");
    return 2;
  }
  if (o.kv_type != "f16" && o.kv_type != "f32") {
    std::fprintf(stderr, "skipkv bench: --kv-type must be f16 or f32, got '%s'\n", o.kv_type.c_str());
    return 2;
  }
  if (Status st = o.skipkv_opts->Finish(); !st.ok()) {
    std::fprintf(stderr, "skipkv bench: %s\n", st.message().c_str());
    return 2;
  }
  for (int& t : o.threads) {
    StatusOr<int> resolved = ResolveThreadCount(t, "--threads");
    if (!resolved.ok()) {
      std::fprintf(stderr, "skipkv bench: %s\n", resolved.status().message().c_str());
      return 2;
    }
    t = *resolved;
  }
  if (Status st = ValidateKvPolicyConfig(o.kv); !st.ok()) {
    std::fprintf(stderr, "skipkv bench: %s\n", st.message().c_str());
    return 2;
  }
  auto src = OpenModel(o.model);
  if (!src.ok()) {
    std::fprintf(stderr, "skipkv bench: %s\n", src.status().ToString().c_str());
    return 1;
  }
  std::shared_ptr<const ModelSource> source(std::move(src).value());
  auto model_or = Model::Load(source);
  if (!model_or.ok()) {
    std::fprintf(stderr, "skipkv bench: %s\n", model_or.status().ToString().c_str());
    return 1;
  }
  const Model& model = **model_or;
  std::shared_ptr<const SkipkvTokenSets> skipkv_sets;
  if (KvPolicyUsesSentences(o.kv)) {
    auto tok = Tokenizer::FromModelSource(*source);
    StatusOr<SkipkvTokenSets> sets = tok.ok() ? BuildSkipkvTokenSets(**tok, o.kv.skipkv.delimiters)
                                              : StatusOr<SkipkvTokenSets>(tok.status());
    if (!sets.ok()) {
      std::fprintf(stderr, "skipkv bench: SkipKV token sets: %s\n", sets.status().ToString().c_str());
      return 1;
    }
    skipkv_sets = std::make_shared<const SkipkvTokenSets>(std::move(sets).value());
  }
  size_t weight_bytes = 0;
  int64_t params = 0;
  for (const auto& t : source->tensors) {
    weight_bytes += t.NumBytes();
    params += t.NumElements();
  }
  const std::string name = o.model.substr(o.model.find_last_of('/') + 1);
  std::printf("model: %s (%s)\nweights: %s, %.2f B params, SIMD target %s, KV %s\n\n", name.c_str(),
              model.config().ToString().c_str(), HumanBytes(weight_bytes).c_str(), params / 1e9,
              kernels::SimdTargetName(), o.kv_type.c_str());
  std::printf("| %-7s | %-6s | %-12s | %12s | %-20s |\n", "threads", "batch", "test", "t/s (median)",
              "min .. max");
  std::printf("|---------|--------|--------------|--------------|----------------------|\n");

  const KvDType kv = o.kv_type == "f32" ? KvDType::kF32 : KvDType::kF16;
  std::vector<Sample> samples;
  for (int threads : o.threads) {
    ThreadPool pool(threads);
    KvPolicyConfig full;  // pp and tg measure the plain forward pass
    Bench plain(model, kv, full);
    Bench bench(model, kv, o.kv, skipkv_sets);
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
      std::printf("| %7d | %6d | %-12s | %12.2f | %8.2f .. %8.2f |", threads, s.batch, s.test.c_str(), s.Median(),
                  *lo, *hi);
      if (s.kv_bytes) std::printf(" KV %s", HumanBytes(static_cast<double>(s.kv_bytes)).c_str());
      if (KvPolicyEvicts(o.kv) && s.depth > 0) {
        auto c = s.compress_share;
        std::sort(c.begin(), c.end());
        std::printf(", compression %.1f%% of decode", 100 * c[c.size() / 2]);
        if (skipkv_sets) {
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
        !run(Sample{"pp" + std::to_string(o.n_prompt), threads, 1, 0, {}},
             [&](int r) -> StatusOr<DecodeResult> {
               SKIPKV_ASSIGN_OR_RETURN(double tps, plain.Prefill(o.n_prompt, pool, 100 + r));
               return DecodeResult{tps, 0, 0};
             }))
      return 1;
    if (o.n_gen > 0 &&
        !run(Sample{"tg" + std::to_string(o.n_gen), threads, 1, 0, {}},
             [&](int r) { return plain.Decode(1, 0, o.n_gen, pool, 200 + r); }))
      return 1;
    for (int b : o.batches)
      for (int d : o.depths) {
        if (!run(Sample{"bd@" + std::to_string(d), threads, b, d, {}},
                 [&](int r) { return bench.Decode(b, d, o.decode_steps, pool, 300 + r); }))
          return 1;
      }
  }
  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path);
    for (const auto& s : samples) {
      nlohmann::json j = {{"model", name},        {"test", s.test},     {"threads", s.threads},
                          {"batch", s.batch},     {"depth", s.depth},   {"kv_type", o.kv_type},
                          {"simd", kernels::SimdTargetName()},          {"tokens_per_s", s.tokens_per_s},
                          {"median_tokens_per_s", s.Median()},          {"weight_bytes", weight_bytes},
                          {"kv_policy", o.kv.policy},                    {"kv_budget", o.kv.budget},
                          {"kv_interval", o.kv.interval},                {"kv_bytes", s.kv_bytes},
                          {"compress_share", s.compress_share},          {"sentence_share", s.sentence_share},
                          {"redundant_sentences", s.redundant_sentences}, {"penalized_evicted", s.penalized_evicted}};
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
      sub.add_option("-b,--batch", o->batches, "Batched decode: batch sizes, e.g. 1,4,8,16")->delimiter(',');
      sub.add_option("-d,--depth", o->depths,
                     "Batched decode: context depths, e.g. 512,4096 (caches filled directly)")
          ->delimiter(',');
      sub.add_option("--decode-steps", o->decode_steps, "Batched decode: timed steps per repetition")
          ->capture_default_str();
      sub.add_option("--json", o->json_path, "Also write one JSON object per test to this file");
      sub.add_option("--kv-policy", o->kv.policy,
                     "Batched decode under a KV policy (full, streaming, h2o, h2o_acc, snapkv, rkv, skipkv)")
          ->capture_default_str();
      sub.add_option("--kv-budget", o->kv.budget, "Slots kept per (layer, KV head) after a compression")
          ->capture_default_str();
      sub.add_option("--kv-window", o->kv.window, "Observation window / recent slots always kept")
          ->capture_default_str();
      sub.add_option("--kv-interval", o->kv.interval, "Compression interval in tokens")->capture_default_str();
      o->skipkv_opts->Add(sub, &o->kv);
      sub.require_subcommand(0, 1);
      const BenchSubcommand throughput = AddBenchThroughput(sub);
      return [o, throughput]() -> int {
        if (throughput.app->parsed()) return throughput.run();
        if (o->model.empty()) {
          std::fprintf(stderr, "skipkv bench: -m/--model is required\n");
          return 1;
        }
        return RunBench(*o);
      };
    });

}  // namespace
}  // namespace skipkv::cli
