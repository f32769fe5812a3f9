// `skipkv eval fidelity -m MODEL --text FILE --methods rkv,skipkv --budgets 64,128`:
// per (method, budget), top-1 agreement with FullKV and mean KL(FullKV || method)
// of the next-token distributions, teacher-forced over the text
// (src/eval/fidelity.h). The table goes to stderr, one JSON line per row to
// stdout (and -o FILE as a JSON document with the run's settings).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine_options.h"
#include "eval/fidelity.h"
#include "skipkv/presets.h"
#include "eval/provenance.h"
#include "eval_cli.h"
#include "eval_subcommands.h"

namespace skipkv::cli {
namespace {

struct FidelityOptions {
  std::string model = ":default:";
  std::string tokenizer;
  int threads = 0;
  std::string kv_type = "f16";
  std::string text;
  std::string methods;
  std::string budgets;
  std::vector<std::string> overrides;
  int64_t prompt_tokens = 1;
  int64_t max_tokens = 0;
  std::string output;
};

int Fail(const std::string& msg) {
  std::fprintf(stderr, "skipkv eval fidelity: %s\n", msg.c_str());
  return 1;
}

int RunFidelityCommand(const FidelityOptions& o) {
  if (o.text.empty()) return Fail("--text is required (a text file to force)");
  if (o.methods.empty()) return Fail("--methods is required (e.g. fullkv,rkv,skipkv)");
  std::ifstream in(o.text, std::ios::binary);
  if (!in) return Fail("cannot open text file '" + o.text + "'");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto parsed_budgets = ParseBudgetList(o.budgets);
  if (!parsed_budgets.ok()) return Fail(parsed_budgets.status().message());
  const std::vector<int64_t>& budgets = *parsed_budgets;
  eval::FidelityConfig c;
  c.prompt_tokens = o.prompt_tokens;
  c.max_tokens = o.max_tokens;
  for (const auto& m : SplitComma(o.methods)) {
    auto probe = MakePreset(m, budgets.empty() ? 1024 : budgets[0], o.overrides);
    if (!probe.ok()) return Fail(probe.status().message());
    if (probe->full()) {
      c.pairs.push_back(*probe);
      continue;
    }
    if (budgets.empty()) return Fail("--budgets is required for method '" + m + "'");
    for (int64_t b : budgets) {
      auto p = MakePreset(m, b, o.overrides);
      if (!p.ok()) return Fail(p.status().message());
      c.pairs.push_back(*p);
    }
  }
  auto eo = CommonEngineOptions(o.model, o.tokenizer, o.threads, o.kv_type, 512);
  if (!eo.ok()) return Fail(eo.status().message());
  auto engine = Engine::Create(*eo);
  if (!engine.ok()) return Fail(engine.status().ToString());
  auto res = eval::RunFidelity(**engine, text, c);
  if (!res.ok()) return Fail(res.status().ToString());

  std::fprintf(stderr, "fidelity: %s, %s: %lld of %lld text tokens, prompt %lld, %lld forced\n",
               (*engine)->info().name.c_str(), o.text.c_str(), static_cast<long long>(res->used_tokens),
               static_cast<long long>(res->text_tokens), static_cast<long long>(o.prompt_tokens),
               static_cast<long long>(res->used_tokens - o.prompt_tokens));
  std::fprintf(stderr, "%-16s %7s %6s %9s %11s %10s %6s %6s\n", "method", "budget", "steps", "top-1 %",
               "KL mean", "KL max", "compr", "peak");
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : res->rows) {
    std::fprintf(stderr, "%-16s %7lld %6lld %8.2f%% %11.6f %10.5f %6lld %6lld\n", r.method.c_str(),
                 static_cast<long long>(r.budget), static_cast<long long>(r.steps), r.top1_agreement,
                 r.kl_mean, r.kl_max, static_cast<long long>(r.compressions),
                 static_cast<long long>(r.peak_slots));
    std::printf("%s\n", r.ToJson().dump().c_str());
    nlohmann::json j = r.ToJson();
    j["method_config"] = nlohmann::json::parse(PresetJson(c.pairs[rows.size()]));
    rows.push_back(std::move(j));
  }
  if (!o.output.empty()) {
    auto digest = eval::ContentDigest(o.model);
    nlohmann::json doc = {{"model", (*engine)->info().name},
                          {"model_digest", digest.ok() ? *digest : std::string("unknown")},
                          {"text", o.text},
                          {"text_tokens", res->text_tokens},
                          {"used_tokens", res->used_tokens},
                          {"prompt_tokens", o.prompt_tokens},
                          {"commit", eval::SourceCommit()},
                          {"rows", rows}};
    std::ofstream f(o.output, std::ios::binary | std::ios::trunc);
    f << doc.dump(2) << "\n";
    if (!f) return Fail("cannot write '" + o.output + "'");
  }
  return 0;
}

}  // namespace

EvalSubcommand AddEvalFidelity(CLI::App& eval) {
  auto o = std::make_shared<FidelityOptions>();
  CLI::App* f = eval.add_subcommand(
      "fidelity", "Teacher-forced top-1 agreement and KL against FullKV per method and budget over a text");
  f->add_option("-m,--model", o->model,
                "GGUF file, HF checkpoint directory or llama2.c .bin (default: embedded)");
  f->add_option("--tokenizer", o->tokenizer, "llama2.c models: tokenizer.bin (default: beside the model)");
  f->add_option("-t,--threads", o->threads, "Worker threads (0 = all cores)")->capture_default_str();
  f->add_option("--kv-type", o->kv_type, "KV cache element type: f16 or f32")->capture_default_str();
  f->add_option("--text", o->text, "Text file whose tokens are forced");
  f->add_option("--methods", o->methods, "Comma-separated presets or LABEL=PRESET (as skipkv eval)");
  f->add_option("--budgets", o->budgets, "Comma-separated KV budgets (fullkv runs once)");
  f->add_option("--set", o->overrides,
                "Override a preset field: FIELD=VALUE or METHOD.FIELD=VALUE (repeatable)");
  f->add_option("--prompt-tokens", o->prompt_tokens, "Text tokens prefilled before forcing (BOS included)")
      ->capture_default_str();
  f->add_option("--max-tokens", o->max_tokens, "Most text tokens used (0 = up to the context)")
      ->capture_default_str();
  f->add_option("-o,--output", o->output, "Also write the rows and settings as a JSON file");
  return {f, [o] { return RunFidelityCommand(*o); }};
}

}  // namespace skipkv::cli
