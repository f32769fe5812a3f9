// `skipkv demo`: every KV method on the embedded testbed (issue 13 item 5).
//
//   skipkv demo [--testbed 1|2] [--limit 40] [--batch-size 8] [--fractions 0.2,0.35,0.5]
//               [-o skipkv-demo.jsonl]
//
// --testbed picks the instrument: 1, the embedded testbed (":testbed:", dataset
// testbed); 2, testbed v2 (issue 39: optional Wait lines, recovery from lost
// facts), whose model, vector and calibrated presets are files in --data-dir
// (models/testbed-v2/, presets/testbed2-calibrated.json; dataset testbed2).
// Two sweeps over the testbed's test split (src/eval, the code `skipkv eval`
// runs), one loaded model, one results file:
//   1. FullKV (and SEAL, FullKV with fixed-strength steering, when a steering
//      vector is in use), whose mean generated length L sets the budgets;
//   2. every method at budgets round(f * L) for each fraction f; skipkv steers
//      with SkipKV's adaptive strength when a vector is in use.
// The steering vector is the testbed's own (data/models/testbed[-v2]/
// steer_vector.gguf, from `skipkv steer-extract`) unless --steer names
// another file or `none`.
// With a preset file (by default, for the embedded testbed, the calibrated
// one in --data-dir: data/presets/testbed-calibrated.json, from `skipkv
// calibrate` on the testbed's validation split; issue 39), each method runs
// beside the file's presets built on it (skipkv beside skipkv-cal, SEAL beside
// seal-cal): the paper's literal values next to the calibrated ones.
// Then a table per (method, budget): accuracy, mean generated tokens, peak KV
// memory and compressions. The results file is appended per finished batch and
// a rerun resumes from it, as `skipkv eval` does.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "command_registry.h"
#include "engine_options.h"
#include "eval/dataset.h"
#include "skipkv/presets.h"
#include "eval/results.h"
#include "eval/sweep.h"
#include "eval_cli.h"
#include "preset_file_flag.h"
#include "skipkv/steering.h"

namespace skipkv::cli {
namespace {

struct DemoOptions {
  int testbed = 1;    // 1: the embedded testbed; 2: testbed v2 (files in data_dir)
  std::string model;  // empty: the --testbed's own model
  int threads = 0;
  std::string data_dir = eval::DefaultDataDir();
  int64_t limit = 40;
  int batch_size = 8;
  // rkv+pinned: R-KV with the prompt never evicted, the control for claim 1.
  std::string methods = "streaming,h2o,snapkv,rkv,rkv+pinned,skipkv";
  std::string fractions = "0.2,0.35,0.5";
  int64_t interval = 32;
  std::string pad_policy = "ragged";
  std::string output = "skipkv-demo.jsonl";
  bool quiet = false;
  std::string steer = "auto";  // auto: the testbed's vector beside its model in --data-dir; none; or a file
  int steer_layer = 2;         // the output of layer 2, after 3 of the testbed's 4 layers: SEAL's depth (direction 20 of 28)
  float steer_coef = 1.0f;     // SEAL's default strength
  cli::PresetFileFlag presets;
};

// What one testbed brings: its model, bundled test split, steering vector
// and calibrated preset file (the last two may be absent from a data dir).
struct TestbedFiles {
  std::string model;
  std::string dataset;  // a bundled dataset name
  std::string steer;
  std::string presets;
};

TestbedFiles TestbedFor(const DemoOptions& o) {
  if (o.testbed == 2)
    return {o.data_dir + "/models/testbed-v2/testbed.gguf", "testbed2",
            o.data_dir + "/models/testbed-v2/steer_vector.gguf",
            o.data_dir + "/presets/testbed2-calibrated.json"};
  return {":testbed:", "testbed", o.data_dir + "/models/testbed/steer_vector.gguf",
          o.data_dir + "/presets/testbed-calibrated.json"};
}

// Whether the model (RunDemo has filled in the default) is the --testbed's
// own: its vector and presets fit it.
bool OwnModel(const DemoOptions& o) { return o.model == TestbedFor(o).model; }

// The steering vector the demo uses: --steer FILE, none, or (auto) the
// testbed's own beside the data when the model is the testbed's own.
StatusOr<SteeringConfig> DemoSteering(const DemoOptions& o) {
  SteeringConfig v;
  std::string file = o.steer;
  if (o.steer == "none") return v;
  if (o.steer == "auto") {
    file = TestbedFor(o).steer;
    if (!OwnModel(o) || !std::filesystem::exists(file)) return v;
  }
  v.enabled = true;
  v.file = file;
  v.layer = o.steer_layer;
  v.coef = o.steer_coef;
  return v;
}

// The testbed's calibrated presets when --presets was not given and the
// model is the testbed's own.
std::string DefaultPresetFile(const DemoOptions& o) {
  const std::string file = TestbedFor(o).presets;
  return OwnModel(o) && std::filesystem::exists(file) ? file : "none";
}

// `names` with each name followed by the file presets built on it (the
// calibrated variants run beside the paper's values).
std::vector<std::string> WithFilePresets(const std::vector<std::string>& names,
                                         const std::vector<PresetFileEntry>& entries) {
  std::vector<std::string> out;
  for (const auto& n : names) {
    out.push_back(n);
    for (const auto& e : entries)
      if (e.base == n && std::find(names.begin(), names.end(), e.name) == names.end()) out.push_back(e.name);
  }
  return out;
}

// One line per file preset the demo runs: its settings and description.
std::string FilePresetNote(const std::vector<std::string>& ran, const std::vector<PresetFileEntry>& entries) {
  std::string note;
  for (const auto& e : entries) {
    if (std::find(ran.begin(), ran.end(), e.name) == ran.end()) continue;
    std::string settings;
    for (const auto& s : e.settings) settings += (settings.empty() ? "" : " ") + s;
    note += "  " + e.name + " = " + e.base + " with " + settings + "  (" + e.description + ")\n";
  }
  return note;
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "skipkv demo: %s\n", msg.c_str());
  return 1;
}

// Mean output tokens of the fullkv rows.
double MeanFullLength(const std::vector<nlohmann::json>& rows) {
  double sum = 0;
  int64_t n = 0;
  for (const auto& r : rows) {
    if (r["method"] != "fullkv") continue;
    sum += r["output_tokens"].get<double>();
    ++n;
  }
  return n > 0 ? sum / static_cast<double>(n) : 0;
}

void PrintTable(const std::vector<nlohmann::json>& summary, double full_len) {
  std::printf("%-13s %7s %8s %9s %11s %12s %12s\n", "method", "budget", "of trace", "accuracy", "mean tokens",
              "peak KV KiB", "compressions");
  for (const auto& s : summary) {
    const int64_t budget = s["budget"].get<int64_t>();
    char share[16] = "-";
    if (budget > 0 && full_len > 0) std::snprintf(share, sizeof share, "%.0f%%", 100.0 * budget / full_len);
    std::printf("%-13s %7s %8s %8.1f%% %11.1f %12.1f %12.1f\n", s["method"].get<std::string>().c_str(),
                budget > 0 ? std::to_string(budget).c_str() : "full", share, s["pass@1"].get<double>(),
                s["tokens_mean"].get<double>(), s["kv_peak_bytes_max"].get<double>() / 1024.0,
                s.contains("compressions_mean") ? s["compressions_mean"].get<double>() : 0.0);
  }
}

int RunDemo(DemoOptions& o) {
  if (o.testbed != 1 && o.testbed != 2)
    return Fail("--testbed (" + std::to_string(o.testbed) + ") must be 1 or 2");
  const TestbedFiles testbed = TestbedFor(o);
  if (o.model.empty()) o.model = testbed.model;
  if (o.testbed == 2 && o.model == testbed.model && !std::filesystem::exists(o.model))
    return Fail("--testbed 2: the model " + o.model + " is missing (is --data-dir the project's data/?)");
  if (o.limit < 1) return Fail("--limit (" + std::to_string(o.limit) + ") must be >= 1");
  if (o.batch_size < 1) return Fail("--batch-size (" + std::to_string(o.batch_size) + ") must be >= 1");
  if (o.interval < 1) return Fail("--interval (" + std::to_string(o.interval) + ") must be >= 1");
  std::vector<double> fractions;
  for (const auto& f : SplitComma(o.fractions)) {
    char* end = nullptr;
    const double v = std::strtod(f.c_str(), &end);
    if (end != f.c_str() + f.size() || !(v > 0 && v <= 1))
      return Fail("--fractions: '" + f + "' is not a number in (0, 1]");
    fractions.push_back(v);
  }
  if (fractions.empty()) return Fail("--fractions is empty");
  const std::vector<std::string> overrides = {"interval=" + std::to_string(o.interval)};
  auto steering = DemoSteering(o);
  if (!steering.ok()) return Fail(steering.status().message());
  o.presets.SetDefault(DefaultPresetFile(o));
  if (Status st = o.presets.Load(); !st.ok()) return Fail(st.message());
  const PresetContext context = o.presets.context();
  const std::vector<std::string> methods = WithFilePresets(SplitComma(o.methods), o.presets.entries());
  // SEAL (with a vector) and the file's presets built on it run beside FullKV.
  std::vector<std::string> full_methods = {"fullkv"};
  if (steering->enabled) full_methods = WithFilePresets({"fullkv", "seal"}, o.presets.entries());
  std::vector<MethodPreset> full_pairs;
  for (const auto& m : full_methods) {
    auto p = MakePreset(m, 0, {}, *steering, context);
    if (!p.ok()) return Fail(p.status().message());
    full_pairs.push_back(*p);
  }
  for (const auto& m : methods) {  // check names and overrides before loading anything
    auto p = MakePreset(m, 1024, overrides, *steering, context);  // interval: skipped by methods that do not evict
    if (!p.ok()) return Fail(p.status().message());
  }

  auto spec = eval::ResolveDataset(testbed.dataset, o.data_dir, "", "", "");
  if (!spec.ok()) return Fail(spec.status().message());
  auto loaded = eval::LoadDataset(*spec, false);
  if (!loaded.ok()) return Fail(loaded.status().message());
  eval::SweepConfig c;
  c.dataset = *spec;
  c.problems = std::move(loaded->problems);
  if (static_cast<size_t>(o.limit) < c.problems.size()) c.problems.resize(o.limit);
  c.prompt = eval::PromptStyle::kPlain;
  c.max_gen = spec->max_gen;
  c.batch_size = o.batch_size;
  c.output = o.output;
  c.model_path = o.model;
  // Both sweeps write one file: its provenance names the vector even when
  // no method of the second sweep steers (--methods without skipkv).
  if (steering->enabled) c.provenance_steer_files = {steering->file};

  auto eo = CommonEngineOptions(o.model, "", o.threads, "f16", 512);
  if (!eo.ok()) return Fail(eo.status().message());
  auto pad = ParsePadPolicy(o.pad_policy);
  if (!pad.ok()) return Fail(pad.status().message());
  eo->kv.pad_policy = *pad;
  eo->batch_size = o.batch_size;
  eo->sort_by_length = false;
  auto engine = Engine::Create(*eo);
  if (!engine.ok()) return Fail(engine.status().ToString());
  if (steering->enabled) {  // refuse a vector that does not fit before any row is written
    const Status st = CheckSteeringVectorFile(steering->file, steering->layer, (*engine)->info().n_layers,
                                              (*engine)->info().d_model);
    if (!st.ok()) return Fail("--steer: " + st.ToString());
  }

  SweepBar bar(o.quiet);
  auto progress = [&](const eval::SweepProgress& p) { bar.Update(p); };
  if (!o.quiet)
    std::fprintf(stderr, "skipkv demo: %s, %zu %s problems, batch %d, %s batches, steering %s -> %s\n",
                 (*engine)->info().name.c_str(), c.problems.size(), testbed.dataset.c_str(), o.batch_size,
                 o.pad_policy.c_str(), steering->enabled ? steering->file.c_str() : "none", o.output.c_str());
  if (!o.presets.entries().empty()) {
    std::vector<std::string> ran = methods;
    ran.insert(ran.end(), full_methods.begin(), full_methods.end());
    std::printf("Calibrated presets from %s, each beside the method with the paper's values:\n%s",
                o.presets.path().c_str(), FilePresetNote(ran, o.presets.entries()).c_str());
    std::fflush(stdout);
  }
  // 1. FullKV: its mean trace length sets the budgets. SEAL (FullKV with
  // steering) runs in the same sweep: it has no budget, and one sweep keeps
  // the results file's provenance (the vector's digest) the same throughout.
  c.pairs = full_pairs;
  auto full_res = eval::RunSweep(c, **engine, progress);
  if (!full_res.ok()) return Fail(full_res.status().message());
  const double full_len = MeanFullLength(full_res->rows);
  std::vector<int64_t> budgets;
  for (double f : fractions) budgets.push_back(static_cast<int64_t>(std::lround(f * full_len)));
  if (!o.quiet) {
    std::fprintf(stderr, "skipkv demo: FullKV mean trace %.0f tokens -> budgets", full_len);
    for (size_t i = 0; i < budgets.size(); ++i)
      std::fprintf(stderr, " %lld (%.0f%%)", static_cast<long long>(budgets[i]), 100 * fractions[i]);
    std::fprintf(stderr, ", compression interval %lld\n", static_cast<long long>(o.interval));
  }
  // 2. Every method at every budget, one sweep (batches mix methods in ragged mode).
  c.pairs.clear();
  for (const auto& m : methods) {
    for (int64_t b : budgets) {
      auto p = MakePreset(m, b, overrides, *steering, context);
      if (!p.ok()) return Fail(p.status().message());
      c.pairs.push_back(*p);
    }
  }
  auto res = eval::RunSweep(c, **engine, progress);
  if (!res.ok()) return Fail(res.status().message());
  std::vector<nlohmann::json> rows = full_res->rows;
  rows.insert(rows.end(), res->rows.begin(), res->rows.end());
  PrintTable(eval::Summarize(rows), full_len);
  if (!o.quiet) std::fprintf(stderr, "skipkv demo: rows in %s (skipkv eval summary reads them)\n", o.output.c_str());
  return 0;
}

CommandRegistrar reg(
    "demo",
    "Every KV method on the testbed (embedded v1, or v2): accuracy, length and KV memory at three budgets",
    [](CLI::App& sub) {
      auto o = std::make_shared<DemoOptions>();
      sub.add_option("--testbed", o->testbed,
                     "Which testbed: 1, the embedded one (:testbed:, dataset testbed); 2, testbed v2 "
                     "(DATA_DIR/models/testbed-v2/testbed.gguf, dataset testbed2: optional Wait lines, "
                     "recovery from lost facts; its own vector and "
                     "DATA_DIR/presets/testbed2-calibrated.json)")
          ->capture_default_str();
      sub.add_option("-m,--model", o->model,
                     "Model (default: the --testbed's own; any model trained on that testbed's task)");
      sub.add_option("-t,--threads", o->threads, "Worker threads (0 = all cores)")->capture_default_str();
      sub.add_option("--data-dir", o->data_dir,
                     "Where the testbed's test split (datasets/testbed_test.jsonl, testbed2_test.jsonl), "
                     "testbed v2's model and the calibrated presets live")
          ->capture_default_str();
      sub.add_option("--limit", o->limit, "Test problems to run (each split has 500)")->capture_default_str();
      sub.add_option("--batch-size", o->batch_size, "Requests per batch")->capture_default_str();
      sub.add_option("--methods", o->methods,
                     "Methods besides FullKV (eval presets; rkv+pinned is R-KV with the prompt never evicted)")->capture_default_str();
      sub.add_option("--fractions", o->fractions, "Budgets as fractions of FullKV's mean generated length")
          ->capture_default_str();
      sub.add_option("--interval", o->interval,
                     "Compression interval Δt of every method (the testbed's traces are ~10x shorter than "
                     "R1's, so the paper's 128 is scaled down)")
          ->capture_default_str();
      sub.add_option("--pad-policy", o->pad_policy, "ragged or padded (left-padded batches)")
          ->capture_default_str();
      sub.add_option("-o,--output", o->output, "Results JSONL (appended; a rerun resumes)")
          ->capture_default_str();
      sub.add_option("--steer", o->steer,
                     "Steering vector: auto (the testbed's own, DATA_DIR/models/testbed[-v2]/"
                     "steer_vector.gguf, when the model is the testbed's), none, or a control-vector GGUF. "
                     "With one, SEAL runs beside FullKV and skipkv steers with SkipKV's adaptive strength")
          ->capture_default_str();
      sub.add_option("--steer-layer", o->steer_layer, "Direction l of the vector, added at the output of layer l (docs/steering.md)")
          ->capture_default_str();
      sub.add_option("--steer-coef", o->steer_coef, "SEAL's fixed strength")->capture_default_str();
      o->presets.Add(sub,
                     ". Default: DATA_DIR/presets/testbed-calibrated.json (τ and α0 calibrated on the testbed's "
                     "validation split; testbed2-calibrated.json for --testbed 2) when the model is the "
                     "testbed's; each method then runs beside the file's presets built on it (skipkv beside "
                     "skipkv-cal, seal beside seal-cal)");
      sub.add_flag("-q,--quiet", o->quiet, "No progress on stderr");
      return [o]() { return RunDemo(*o); };
    });

}  // namespace
}  // namespace skipkv::cli
