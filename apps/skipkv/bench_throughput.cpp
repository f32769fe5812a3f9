// `skipkv bench throughput --kv-memory 8GiB --methods fullkv,rkv,skipkv --budget 1024 -m MODEL`:
// the paper's Table 1 protocol. For each method, the largest batch whose KV
// caches fit the memory limit (src/eval/throughput.h: computed from the
// model's KV shape and the engine's cache capacity, with the longest prompt
// of the dataset), then one end-to-end Generate call of that batch on the
// dataset's first prompts (R-KV's instruction, chat template), each request
// generating exactly --gen tokens (EOS ignored; --until-eos: to EOS, at most
// max_length): latency = the call's wall time, tokens/s = generated tokens /
// latency. --max-run-batch caps the batch
// actually run (small machines); --batches adds runs at other batch sizes
// for the throughput-vs-batch curve. The table goes to stdout; --json FILE
// writes the document `skipkv eval report` reads (DIR/throughput.json).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench_subcommands.h"
#include "eval_cli.h"
#include "engine_options.h"
#include "eval/dataset.h"
#include "skipkv/presets.h"
#include "eval/prompt.h"
#include "eval/throughput.h"

namespace skipkv::cli {
namespace {

struct ThroughputOptions {
  std::string model;
  std::string tokenizer;
  int threads = 0;
  std::string kv_type = "f16";
  std::string kv_memory = "8GiB";
  std::string methods = "fullkv,rkv,skipkv";
  int64_t budget = 1024;
  std::vector<std::string> overrides;
  std::string dataset = "gsm8k";
  std::string data_dir = eval::DefaultDataDir();
  int gen = 16;
  int64_t max_length = 0;
  int64_t max_run_batch = 0;
  std::vector<int> batches;
  bool until_eos = false;
  std::string json_path;
};

int Fail(const std::string& msg) {
  std::fprintf(stderr, "skipkv bench throughput: %s\n", msg.c_str());
  return 1;
}

struct Timed {
  int64_t batch = 0;
  double latency_s = 0, tokens_per_s = 0;
  uint64_t kv_allocated = 0;
};

int RunThroughput(const ThroughputOptions& o) {
  if (o.model.empty())
    return Fail("-m/--model is required (e.g. a `skipkv make-model --preset r1-qwen-1.5b` GGUF)");
  if (o.gen < 1) return Fail("--gen (" + std::to_string(o.gen) + ") must be >= 1");
  if (o.max_length < 0 || o.max_run_batch < 0) return Fail("--max-length and --max-run-batch must be >= 0");
  for (int b : o.batches)
    if (b < 1) return Fail("--batches: " + std::to_string(b) + " must be >= 1");
  auto memory = eval::ParseByteSize(o.kv_memory);
  if (!memory.ok()) return Fail("--kv-memory: " + memory.status().message());
  auto spec = eval::ResolveDataset(o.dataset, o.data_dir, "", "", "");
  if (!spec.ok()) return Fail(spec.status().message());
  auto loaded = eval::LoadDataset(*spec, false);
  if (!loaded.ok()) return Fail(loaded.status().message());
  const std::vector<eval::Problem>& problems = loaded->problems;
  const int64_t max_length = o.max_length > 0 ? o.max_length : spec->max_gen;

  std::vector<MethodPreset> presets;
  for (const auto& m : SplitComma(o.methods)) {
    auto p = MakePreset(m, o.budget, o.overrides);
    if (!p.ok()) return Fail(p.status().message());
    presets.push_back(*p);
  }
  if (presets.empty()) return Fail("--methods is empty");

  auto eo = CommonEngineOptions(o.model, o.tokenizer, o.threads, o.kv_type, 512);
  if (!eo.ok()) return Fail(eo.status().message());
  auto created = Engine::Create(*eo);
  if (!created.ok()) return Fail(created.status().ToString());
  Engine& engine = **created;
  const ModelInfo& info = engine.info();
  const uint64_t per_slot =
      eval::KvBytesPerSlot(info.n_layers, info.n_kv_heads, info.head_dim, o.kv_type == "f32" ? 4 : 2);

  // Prompts as the eval sweep builds them; the longest one sizes every row.
  std::vector<std::vector<int32_t>> prompts;
  int64_t longest = 0;
  for (const auto& p : problems) {
    auto ids = engine.Tokenize(eval::RkvInstruction(p.question), true, /*chat=*/true);
    if (!ids.ok()) return Fail(ids.status().ToString());
    longest = std::max<int64_t>(longest, static_cast<int64_t>(ids->size()));
    prompts.push_back(std::move(*ids));
  }

  nlohmann::json doc = {{"model", info.name},
                        {"model_path", info.path},
                        {"kv_memory_bytes", *memory},
                        {"kv_type", o.kv_type},
                        {"dataset", spec->name},
                        {"longest_prompt", longest},
                        {"max_length", max_length},
                        {"gen", o.until_eos ? nlohmann::json("until-eos") : nlohmann::json(o.gen)},
                        {"threads", o.threads},
                        {"methods", nlohmann::json::array()}};
  std::printf(
      "%s, KV memory %.1f MiB, prompts %s (longest %lld tokens), FullKV holds %lld generated tokens\n",
      info.name.c_str(), static_cast<double>(*memory) / (1ull << 20), spec->name.c_str(),
      static_cast<long long>(longest), static_cast<long long>(max_length));
  std::printf("%-14s %7s %10s %12s %9s %9s %11s %10s\n", "method", "budget", "slots/seq", "KV/seq MiB",
              "max batch", "run batch", "latency s", "tokens/s");
  bool capped = false;
  for (const auto& preset : presets) {
    auto plan = eval::PlanMaxBatch(preset.method.kv, longest, max_length, per_slot, *memory);
    if (!plan.ok()) return Fail(preset.method.name + ": " + plan.status().message());
    std::vector<int64_t> sizes;
    int64_t run_batch = plan->max_batch;
    if (o.max_run_batch > 0 && run_batch > o.max_run_batch) run_batch = o.max_run_batch, capped = true;
    run_batch = std::min<int64_t>(run_batch, static_cast<int64_t>(prompts.size()));
    for (int b : o.batches)
      if (b <= run_batch) sizes.push_back(b);
    if (run_batch > 0 && std::find(sizes.begin(), sizes.end(), run_batch) == sizes.end())
      sizes.push_back(run_batch);
    std::sort(sizes.begin(), sizes.end());
    std::vector<Timed> timed;
    for (int64_t b : sizes) {
      std::vector<Request> reqs(b);
      for (int64_t i = 0; i < b; ++i) {
        reqs[i].prompt_tokens = prompts[i];
        // Fixed length by default; --until-eos lets each request end at EOS
        // (the paper's setting: shorter generations finish sooner), bounded by max_length.
        reqs[i].max_new_tokens = o.until_eos ? static_cast<int>(max_length) : o.gen;
        reqs[i].ignore_eos = !o.until_eos;
        reqs[i].method = preset.method;
      }
      const auto t0 = std::chrono::steady_clock::now();
      auto res = engine.Generate(reqs);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!res.ok())
        return Fail(preset.method.name + ", batch " + std::to_string(b) + ": " + res.status().ToString());
      Timed t;
      t.batch = b;
      t.latency_s = s;
      int64_t tokens = 0;
      for (const auto& r : *res)
        tokens += static_cast<int64_t>(r.tokens.size()), t.kv_allocated += r.kv.allocated_bytes;
      t.tokens_per_s = tokens / s;
      timed.push_back(t);
    }
    const Timed main_run = timed.empty() ? Timed{} : timed.back();
    std::printf("%-14s %7lld %10lld %12.1f %9lld %9lld %11.2f %10.1f\n", preset.method.name.c_str(),
                static_cast<long long>(preset.full() ? 0 : o.budget),
                static_cast<long long>(plan->slots_per_sequence),
                static_cast<double>(plan->bytes_per_sequence) / (1 << 20),
                static_cast<long long>(plan->max_batch), static_cast<long long>(main_run.batch),
                main_run.latency_s, main_run.tokens_per_s);
    std::fflush(stdout);
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& t : timed)
      runs.push_back({{"batch", t.batch},
                      {"latency_s", t.latency_s},
                      {"tokens_per_s", t.tokens_per_s},
                      {"kv_allocated_bytes", t.kv_allocated}});
    doc["methods"].push_back({{"method", preset.method.name},
                              {"budget", preset.full() ? 0 : o.budget},
                              {"slots_per_sequence", plan->slots_per_sequence},
                              {"bytes_per_sequence", plan->bytes_per_sequence},
                              {"max_batch", plan->max_batch},
                              {"run_batch", main_run.batch},
                              {"latency_s", main_run.latency_s},
                              {"tokens_per_s", main_run.tokens_per_s},
                              {"batches", runs}});
  }
  doc["run_batch_capped"] = capped;
  if (capped) {
    std::fprintf(
        stderr,
        "skipkv bench throughput: the batch run was capped at --max-run-batch %lld; latency and "
        "tokens/s are of that batch, not of the max batch (timings on a shared small machine are noisy)\n",
        static_cast<long long>(o.max_run_batch));
  }
  if (!o.json_path.empty()) {
    std::ofstream f(o.json_path, std::ios::binary | std::ios::trunc);
    f << doc.dump(2) << "\n";
    if (!f) return Fail("cannot write '" + o.json_path + "'");
  }
  return 0;
}

}  // namespace

BenchSubcommand AddBenchThroughput(CLI::App& bench) {
  auto o = std::make_shared<ThroughputOptions>();
  CLI::App* t = bench.add_subcommand(
      "throughput",
      "Table 1: per method the largest batch fitting --kv-memory, then its latency and tokens/s");
  t->add_option("-m,--model", o->model, "Model (GGUF, HF directory or llama2.c checkpoint)");
  t->add_option("--tokenizer", o->tokenizer, "llama2.c models: tokenizer.bin (default: beside the model)");
  t->add_option("-t,--threads", o->threads, "Worker threads (0 = all cores)")->capture_default_str();
  t->add_option("--kv-type", o->kv_type, "KV cache element type: f16 or f32")->capture_default_str();
  t->add_option("--kv-memory", o->kv_memory, "KV memory limit, e.g. 8GiB, 512MiB")->capture_default_str();
  t->add_option("--methods", o->methods, "Comma-separated eval presets")->capture_default_str();
  t->add_option("--budget", o->budget, "KV budget B of the evicting methods")->capture_default_str();
  t->add_option("--set", o->overrides,
                "Override a preset field: FIELD=VALUE or METHOD.FIELD=VALUE (repeatable)");
  t->add_option("--dataset", o->dataset, "Prompts: gsm8k, math500, aime24 or a .jsonl file")
      ->capture_default_str();
  t->add_option("--data-dir", o->data_dir, "Where the bundled datasets live")->capture_default_str();
  t->add_option("--gen", o->gen, "Tokens each request generates in the timed run (EOS ignored)")
      ->capture_default_str();
  t->add_option("--max-length", o->max_length,
                "Generated tokens a FullKV sequence must hold (0 = the dataset's max_gen)")
      ->capture_default_str();
  t->add_option("--max-run-batch", o->max_run_batch, "Run at most this batch (0 = the max batch)")
      ->capture_default_str();
  t->add_option("--batches", o->batches, "Also time these batch sizes (<= the run batch), e.g. 1,2,4")
      ->delimiter(',');
  t->add_flag("--until-eos", o->until_eos,
              "Generate until EOS (at most --max-length tokens) instead of exactly --gen tokens");
  t->add_option("--json", o->json_path, "Write the results as JSON (for `skipkv eval report`)");
  return {t, [o] { return RunThroughput(*o); }};
}

}  // namespace skipkv::cli
