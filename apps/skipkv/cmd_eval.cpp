// `skipkv eval`: the paper's accuracy experiments (docs/eval-protocol.md).
//   skipkv eval -m MODEL --dataset math500 --methods rkv,skipkv --budgets 512,1024 -o rows.jsonl
//   skipkv eval grade FILE.jsonl           grade {"prediction", "reference"} lines, or
//                                          {"prediction", LiveCodeBench fields} lines (eval_code.cpp)
//   skipkv eval merge -o ALL.jsonl A B ... join shard files (refuses mixed configurations)
//   skipkv eval summary FILE...            metrics per (method, budget)
//   skipkv eval fidelity --text FILE ...   teacher-forced agreement with FullKV (eval_fidelity.cpp)
//   skipkv eval report DIR                 summary.md, report.html, eviction view (eval_report.cpp)
// The work is src/eval (datasets, prompt, grader, presets, sweep, results).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "command_registry.h"
#include "eval_cli.h"
#include "eval_code.h"
#include "engine_options.h"
#include "eval/dataset.h"
#include "eval/jsonl.h"
#include "eval/math_equal.h"
#include "skipkv/presets.h"
#include "eval/results.h"
#include "eval/sweep.h"
#include "eval_subcommands.h"
#include "method_flags.h"
#include "preset_file_flag.h"
#include "skipkv/steering.h"

namespace skipkv::cli {
namespace {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "skipkv eval: %s\n", msg.c_str());
  return 1;
}

std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// One JSON line per input: the extracted answer, the normalised reference
// and the verdict; for LiveCodeBench lines the extracted program and the
// per-test outcomes. Every line is checked before anything is printed (and,
// when any line is code, the sandbox before anything runs).
int RunGrade(const std::string& path, const CodeGradeFlags& flags) {
  auto lines = eval::ReadJsonl(path);
  if (!lines.ok()) return Fail(lines.status().message());
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<bool> is_code;
  std::unique_ptr<eval::Sandbox> sandbox;
  eval::CodeGradeOptions code_options;
  for (const auto& l : *lines) {
    is_code.push_back(eval::IsLcbRow(l.value));
    if (is_code.back()) {
      const std::string where = path + ":" + std::to_string(l.line);
      auto p = eval::StringField(l.value, "prediction", path, l.line);
      if (!p.ok()) return Fail(p.status().message());
      auto problem = eval::ParseLcbRow(l.value, where);
      if (!problem.ok()) return Fail(problem.status().message());
      pairs.emplace_back(std::move(*p), "");
      if (!sandbox) {
        auto o = flags.Options();
        if (!o.ok()) return Fail(o.status().message());
        code_options = *o;
        auto sb = ReadySandbox(code_options.jobs);
        if (!sb.ok()) return Fail(sb.status().message());
        sandbox = std::move(*sb);
      }
      continue;
    }
    auto p = eval::StringField(l.value, "prediction", path, l.line);
    if (!p.ok()) return Fail(p.status().message());
    auto r = eval::StringField(l.value, "reference", path, l.line);
    if (!r.ok()) return Fail(r.status().message());
    pairs.emplace_back(std::move(*p), std::move(*r));
  }
  size_t equal = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (is_code[i]) {
      const auto& l = (*lines)[i];
      auto v = GradeCodeLine(l.value, path + ":" + std::to_string(l.line), *sandbox, code_options);
      if (!v.ok()) return Fail(v.status().message());
      (*v)["line"] = l.line;
      equal += (*v)["equal"].get<bool>();
      std::printf("%s\n", Dump(*v).c_str());
      std::fflush(stdout);
      continue;
    }
    const eval::Grade g = eval::GradeOutput(pairs[i].first, pairs[i].second);
    equal += g.equal;
    std::printf("%s\n", Dump({{"line", (*lines)[i].line},
                              {"extracted", g.extracted},
                              {"reference", g.reference},
                              {"equal", g.equal}})
                            .c_str());
  }
  std::fprintf(stderr, "skipkv eval grade: %zu of %zu equal\n", equal, pairs.size());
  return 0;
}

// The metrics table on stderr, one JSON line per (method, budget) on stdout.
void PrintSummary(const std::vector<nlohmann::json>& summary, bool quiet) {
  if (!quiet) {
    std::fprintf(stderr, "%-24s %7s %6s %8s %10s %10s %12s\n", "method", "budget", "rows", "pass@1", "tokens",
                 "mean tok", "KV peak MiB");
    for (const auto& s : summary) {
      std::fprintf(stderr, "%-24s %7lld %6lld %7.1f%% %10.0f %10.1f %12.2f\n",
                   s["method"].get<std::string>().c_str(), static_cast<long long>(s["budget"].get<int64_t>()),
                   static_cast<long long>(s["rows"].get<int64_t>()), s["pass@1"].get<double>(),
                   s["tokens_total"].get<double>(), s["tokens_mean"].get<double>(),
                   s["kv_peak_bytes_max"].get<double>() / (1024.0 * 1024.0));
    }
  }
  for (const auto& s : summary) std::printf("%s\n", Dump(s).c_str());
}

int RunMerge(const std::string& out, const std::vector<std::string>& inputs, bool quiet) {
  auto rows = eval::MergeResults(inputs);
  if (!rows.ok()) return Fail(rows.status().message());
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  if (!f) return Fail("cannot write '" + out + "'");
  for (const auto& r : *rows) f << Dump(r) << "\n";
  f.close();
  if (!f) return Fail("cannot write '" + out + "'");
  if (!quiet)
    std::fprintf(stderr, "skipkv eval merge: %zu rows from %zu files -> %s\n", rows->size(), inputs.size(),
                 out.c_str());
  PrintSummary(eval::Summarize(*rows), quiet);
  return 0;
}

int RunSummary(const std::vector<std::string>& inputs) {
  auto rows = eval::MergeResults(inputs);
  if (!rows.ok()) return Fail(rows.status().message());
  PrintSummary(eval::Summarize(*rows), false);
  return 0;
}

struct SweepOptions {
  std::string model = ":default:";
  std::string tokenizer;
  int threads = 0;
  std::string kv_type = "f16";
  std::string weights = "auto";
  int n_ubatch = 512;
  int64_t n_ctx = 0;
  std::string dataset;
  std::string data_dir = eval::DefaultDataDir();
  std::string question_field, answer_field, id_field;
  bool skip_bad = false;
  int64_t limit = 0;
  std::string methods;
  std::string budgets;
  std::vector<std::string> overrides;
  std::string prompt = "auto";
  std::string chat_template = "auto";
  int64_t max_gen = 0;
  int batch_size = 10;
  int samples = 1;
  SamplingParams sampling;
  std::string shard = "1/1";
  std::string output;
  std::string summary;
  bool quiet = false;
  // --pad-policy and the steering vector of the presets that steer (seal,
  // rkv+sentence+steering, skipkv): the declared parameters of kArgEval.
  MethodConfig method;
  MethodFlags method_flags;
  CodeGradeFlags grading;  // code datasets (LiveCodeBench)
  PresetFileFlag presets;  // --presets FILE
};

int RunSweepCommand(SweepOptions& o) {
  if (o.dataset.empty())
    return Fail("--dataset is required (gsm8k, math500, aime24, a .jsonl file or a LiveCodeBench .jsonl file)");
  if (o.methods.empty()) return Fail("--methods is required (e.g. fullkv,rkv,skipkv)");
  if (o.output.empty()) return Fail("-o/--output is required (the results JSONL; a rerun resumes from it)");
  auto spec = eval::ResolveDataset(o.dataset, o.data_dir, o.question_field, o.answer_field, o.id_field);
  if (!spec.ok()) return Fail(spec.status().message());
  auto loaded = eval::LoadDataset(*spec, o.skip_bad);
  if (!loaded.ok())
    return Fail(loaded.status().message() + (o.skip_bad ? "" : " (--skip-bad leaves bad lines out)"));
  for (const auto& s : loaded->skipped) std::fprintf(stderr, "skipkv eval: skipped %s\n", s.c_str());
  auto shard = eval::ParseShard(o.shard);
  if (!shard.ok()) return Fail(shard.status().message());
  auto style = eval::ParsePromptStyle(o.prompt == "auto" ? (spec->plain_prompt ? "plain" : "chat") : o.prompt);
  if (!style.ok()) return Fail(style.status().message());
  if (o.limit < 0) return Fail("--limit (" + std::to_string(o.limit) + ") must be >= 0");
  if (o.max_gen < 0) return Fail("--max-gen (" + std::to_string(o.max_gen) + ") must be >= 0");

  eval::SweepConfig c;
  c.dataset = *spec;
  c.problems = std::move(loaded->problems);
  if (o.limit > 0 && static_cast<size_t>(o.limit) < c.problems.size()) c.problems.resize(o.limit);
  c.shard = *shard;
  c.prompt = *style;
  c.prompt_given = o.prompt != "auto";  // wins over the presets' own prompt (the *-authors presets)
  c.max_gen = o.max_gen > 0 ? o.max_gen : spec->max_gen;
  c.max_gen_given = o.max_gen > 0;  // wins over the presets' own max_length (the *-authors presets)
  c.samples = o.samples;
  c.sampling = o.sampling;
  c.batch_size = o.batch_size;
  c.output = o.output;
  c.model_path = o.model;
  // Code datasets: the sandbox must work before the model is even loaded.
  std::unique_ptr<eval::Sandbox> sandbox;
  if (spec->code) {
    auto go = o.grading.Options();
    if (!go.ok()) return Fail(go.status().message());
    c.code_grading = *go;
    auto sb = ReadySandbox(go->jobs);
    if (!sb.ok()) return Fail(sb.status().message());
    sandbox = std::move(*sb);
    c.sandbox = sandbox.get();
  }
  auto parsed_budgets = ParseBudgetList(o.budgets);
  if (!parsed_budgets.ok()) return Fail(parsed_budgets.status().message());
  const std::vector<int64_t>& budgets = *parsed_budgets;
  if (Status st = o.method_flags.FinishKv(); !st.ok()) return Fail(st.message());
  auto vector = o.method_flags.Vector();
  if (!vector.ok()) return Fail(vector.status().message());
  if (Status st = o.presets.Load(); !st.ok()) return Fail(st.message());
  // The *-authors presets' τ table and the preset file's presets.
  const PresetContext context = o.presets.context(o.model, spec->name);
  for (const auto& m : SplitComma(o.methods)) {
    auto probe = MakePreset(m, budgets.empty() ? 1024 : budgets[0], o.overrides, *vector, context);
    if (!probe.ok()) return Fail(probe.status().message());
    if (probe->full()) {
      c.pairs.push_back(*probe);
      continue;
    }
    if (budgets.empty()) return Fail("--budgets is required for method '" + m + "'");
    if (probe->steers_if_given && !vector->enabled && !o.quiet) {
      std::fprintf(stderr,
                   "skipkv eval: note: method '%s' runs without steering (no --steer): SkipKV's sentence "
                   "scoring and grouping only\n",
                   probe->method.name.c_str());
    }
    for (int64_t b : budgets) {
      auto p = MakePreset(m, b, o.overrides, *vector, context);
      if (!p.ok()) return Fail(p.status().message());
      c.pairs.push_back(*p);
    }
  }
  for (size_t i = 0; i < c.pairs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (c.pairs[i].method.name == c.pairs[j].method.name &&
          c.pairs[i].method.kv.budget == c.pairs[j].method.kv.budget)
        return Fail("method '" + c.pairs[i].method.name + "' is listed twice");

  auto eo = CommonEngineOptions(o.model, o.tokenizer, o.threads, o.kv_type, o.n_ubatch, o.weights);
  if (!eo.ok()) return Fail(eo.status().message());
  eo->kv.pad_policy = o.method.kv.pad_policy;
  eo->batch_size = o.batch_size;
  eo->sort_by_length = false;  // the sweep groups per method (presets with grouping)
  eo->n_ctx = o.n_ctx;
  eo->chat_template = o.chat_template;
  eo->observe_sentences = true;  // FullKV rows carry the sentence statistics too (report: Fig. 14)
  auto engine = Engine::Create(*eo);
  if (!engine.ok()) return Fail(engine.status().ToString());
  // The steering vector against the model, before anything is written (the
  // engine would check it only when a batch with a steering method starts).
  if (vector->enabled) {
    for (const auto& p : c.pairs) {
      if (!p.method.steer.enabled) continue;
      const Status st = CheckSteeringVectorFile(vector->file, p.method.steer.layer, (*engine)->info().n_layers,
                                                (*engine)->info().d_model);
      if (!st.ok()) return Fail("method '" + p.method.name + "': " + st.ToString());
    }
  }
  if (!o.quiet) {
    std::fprintf(
        stderr,
        "skipkv eval: %s, %s (%zu problems, shard %s), %zu method/budget pairs, %d sample(s), max_gen %lld\n",
        (*engine)->info().name.c_str(), spec->name.c_str(), c.problems.size(), o.shard.c_str(),
        c.pairs.size(), c.samples, static_cast<long long>(c.max_gen));
  }
  SweepBar bar(o.quiet);
  auto res = eval::RunSweep(c, **engine, [&](const eval::SweepProgress& p) { bar.Update(p); });
  if (!res.ok()) return Fail(res.status().message());
  const auto summary = eval::Summarize(res->rows);
  if (!o.quiet)
    std::fprintf(stderr, "skipkv eval: %lld rows generated, %lld resumed -> %s\n",
                 static_cast<long long>(res->generated), static_cast<long long>(res->resumed),
                 o.output.c_str());
  PrintSummary(summary, o.quiet);
  if (!o.summary.empty()) {
    std::ofstream f(o.summary, std::ios::binary | std::ios::trunc);
    f << nlohmann::json(summary).dump(2) << "\n";
    if (!f) return Fail("cannot write '" + o.summary + "'");
  }
  return 0;
}

std::string PresetList() {
  std::string s;
  for (const auto& p : KnownPresets()) s += (s.empty() ? "" : ", ") + p;
  return s;
}

CommandRegistrar reg(
    "eval", "Accuracy sweeps over math datasets; eval grade / merge / summary", [](CLI::App& sub) {
      sub.require_subcommand(0, 1);
      auto o = std::make_shared<SweepOptions>();
      sub.add_option("-m,--model", o->model,
                     "GGUF file, HF checkpoint directory or llama2.c .bin (default: embedded)");
      sub.add_option("--tokenizer", o->tokenizer,
                     "llama2.c models: tokenizer.bin (default: beside the model)");
      sub.add_option("-t,--threads", o->threads, "Worker threads (0 = all cores)")->capture_default_str();
      AddWeightsOption(sub, &o->weights);
      sub.add_option("--kv-type", o->kv_type, "KV cache element type: f16 or f32")->capture_default_str();
      sub.add_option("--ubatch", o->n_ubatch, "Prefill chunk per sequence per forward")
          ->capture_default_str();
      sub.add_option("-c,--ctx", o->n_ctx, "Context length to allow (0 = the model's)")
          ->capture_default_str();
      sub.add_option("--dataset", o->dataset, "gsm8k, math500, aime24, testbed, testbed2, a .jsonl file, or a LiveCodeBench code_generation_lite .jsonl (graded by running the code)");
      sub.add_option("--data-dir", o->data_dir, "Where the bundled datasets live (datasets/*.jsonl)")
          ->capture_default_str();
      sub.add_option("--question-field", o->question_field, "JSONL field of the problem text");
      sub.add_option("--answer-field", o->answer_field, "JSONL field of the reference answer");
      sub.add_option("--id-field", o->id_field, "JSONL field of a unique id (default: the row index)");
      sub.add_flag("--skip-bad", o->skip_bad,
                   "Leave malformed dataset lines out (reported) instead of stopping");
      sub.add_option("--limit", o->limit, "Only the first N problems (0 = all)")->capture_default_str();
      sub.add_option("--methods", o->methods, "Comma-separated presets or LABEL=PRESET: " + PresetList());
      sub.add_option("--budgets", o->budgets, "Comma-separated KV budgets (fullkv runs once)");
      o->presets.Add(sub);
      sub.add_option("--set", o->overrides,
                     "Override a preset field: FIELD=VALUE or METHOD.FIELD=VALUE (repeatable); besides the method "
                     "parameters: grouping, prompt, max_length, max_length_counts_prompt");
      sub.add_option("--prompt", o->prompt, "auto (plain for the testbed, chat otherwise), chat (R-KV's instruction in the model's "
                     "chat template), raw (the instruction without a template), seal-chat (the SkipKV authors' SEAL instruction in the "
                     "chat template) or plain (the problem text only). With auto, a preset with a prompt of its own uses it "
                     "(rkv-authors, fullkv-authors: raw; skipkv-authors: seal-chat; --set LABEL.prompt=STYLE) on datasets "
                     "other than the testbed and code; a --prompt given explicitly wins over every preset's")
          ->capture_default_str();
      sub.add_option("--chat-template", o->chat_template, "auto, r1-distill, chatml or raw")
          ->capture_default_str();
      sub.add_option("--max-gen", o->max_gen,
                     "Most generated tokens per sample (0 = the dataset's: 8192 / 16384, or a preset's own "
                     "max_length: the *-authors presets take the authors' total, MATH 8192, AIME 16384, GSM8K "
                     "8192); for a preset with max_length_counts_prompt (the *-authors presets; --set) the prompt "
                     "counts too, as the authors' max_length")
          ->capture_default_str();
      sub.add_option("--batch-size", o->batch_size, "Requests per batch (the paper: 10)")
          ->capture_default_str();
      sub.add_option("--samples", o->samples, "Samples per problem (pass@1 averages them)")
          ->capture_default_str();
      sub.add_option("--temp", o->sampling.temperature, "Sampling temperature (0 = greedy)")
          ->capture_default_str();
      sub.add_option("--top-k", o->sampling.top_k, "Top-k (0 = off)")->capture_default_str();
      sub.add_option("--top-p", o->sampling.top_p, "Top-p (1 = off)")->capture_default_str();
      sub.add_option("-s,--seed", o->sampling.seed, "Base seed; each (problem, sample) derives its own")
          ->capture_default_str();
      sub.add_option("--shard", o->shard, "i/N: run every N-th problem starting at the i-th (job arrays)")
          ->capture_default_str();
      sub.add_option("-o,--output", o->output, "Results JSONL (appended; a rerun resumes)");
      sub.add_option("--summary", o->summary, "Also write the metrics as a JSON file");
      sub.add_flag("-q,--quiet", o->quiet, "No progress or table on stderr");
      o->method_flags.Add(sub, &o->method, kArgEval);
      o->grading.Add(sub);

      auto grade_path = std::make_shared<std::string>();
      CLI::App* grade = sub.add_subcommand(
          "grade",
          "Grade {\"prediction\": ..., \"reference\": ...} lines (or prediction + LiveCodeBench fields: the "
          "program runs sandboxed on the tests); prints one JSON verdict per line");
      grade->add_option("file", *grade_path, "JSONL file")->required();
      auto grade_flags = std::make_shared<CodeGradeFlags>();
      grade_flags->Add(*grade);

      auto merge_out = std::make_shared<std::string>();
      auto merge_in = std::make_shared<std::vector<std::string>>();
      CLI::App* merge =
          sub.add_subcommand("merge", "Join shard result files; refuses rows of different runs");
      merge->add_option("-o,--output", *merge_out, "Merged JSONL")->required();
      merge->add_option("files", *merge_in, "Shard result files")->required();

      auto summary_in = std::make_shared<std::vector<std::string>>();
      CLI::App* summary = sub.add_subcommand("summary", "Metrics per (method, budget) of result files");
      summary->add_option("files", *summary_in, "Result files")->required();

      const EvalSubcommand fidelity = AddEvalFidelity(sub);
      const EvalSubcommand report = AddEvalReport(sub);

      return [=]() -> int {
        if (fidelity.app->parsed()) return fidelity.run();
        if (report.app->parsed()) return report.run();
        if (grade->parsed()) return RunGrade(*grade_path, *grade_flags);
        if (merge->parsed()) return RunMerge(*merge_out, *merge_in, o->quiet);
        if (summary->parsed()) return RunSummary(*summary_in);
        return RunSweepCommand(*o);
      };
    });

}  // namespace
}  // namespace skipkv::cli
