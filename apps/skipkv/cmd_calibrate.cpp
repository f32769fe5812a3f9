// `skipkv calibrate`: SkipKV's τ and α0 for a model, chosen on a validation
// split by documented rules, written as a preset file (issue 39 item 1;
// docs/calibration.md). The work is src/eval/calibrate.*.
//
//   skipkv calibrate [-m :testbed:] [--dataset testbed-val] [--limit N] [--steer FILE] [-o FILE]
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "command_registry.h"
#include "engine_options.h"
#include "eval/calibrate.h"
#include "eval/dataset.h"
#include "eval_cli.h"

namespace skipkv::cli {
namespace {

constexpr const char* kRules =
    "Rules (docs/calibration.md):\n"
    "  tau: FullKV greedy traces of the validation problems are cut into sentences by the skipkv\n"
    "    policy's own tracker; PSS(i, j) = cosine of the sentences' mean final hidden states (Eq. 1-2),\n"
    "    over the pairs the policy compares (generated sentences of one trace, j - i <= K).\n"
    "    tau = the --percentile-th percentile (default 5, linear interpolation) of the PSS of\n"
    "    word-for-word duplicate pairs (identical token ids), rounded down to 0.001: about\n"
    "    (100 - percentile) % of the duplicates are flagged (PSS > tau). Check: the share of same-kind\n"
    "    pairs (same first token, different content) above tau, shown beside the paper's 0.95.\n"
    "  alpha0: SEAL (FullKV, fixed strength alpha0) on the same problems over --alpha-grid;\n"
    "    alpha0 = the largest value whose accuracy is >= FullKV's - --tolerance-points;\n"
    "    gamma = alpha0 * 0.02 / 1 (the paper's gamma / alpha0).\n"
    "Output: presets rkv+sentence-cal (tau), skipkv-cal and rkv+sentence+steering-cal (tau, alpha0,\n"
    "gamma), seal-cal (alpha0), each with the provenance; use them with\n"
    "`skipkv eval --presets FILE --methods skipkv-cal`.";

struct CalibrateOptions {
  std::string model = ":testbed:";
  std::string data_dir = eval::DefaultDataDir();
  std::string dataset = "testbed-val";
  std::string question_field, answer_field, id_field;
  bool allow_test = false;
  int64_t limit = 0;
  std::string steer = "auto";
  int steer_layer = -1;
  int threads = 0;
  int batch_size = 8;
  int64_t max_gen = 0;
  std::string prompt = "auto";
  std::string output = "calibrated-presets.json";
  std::string rows;
  std::string traces;
  double percentile = 5;
  double tolerance = 1;
  std::string alpha_grid = "1,0.5,0.25,0.125";
  bool quiet = false;
};

int Fail(const std::string& msg) {
  std::fprintf(stderr, "skipkv calibrate: %s\n", msg.c_str());
  return 1;
}

// Whether a file name marks a test split: "test" as a word of its stem
// (words split at anything but letters and digits: gsm8k_test, test-2024;
// not testbed_val).
bool NamedTest(const std::string& file) {
  const std::string stem = std::filesystem::path(file).stem().string();
  std::string word;
  for (size_t i = 0; i <= stem.size(); ++i) {
    const char c = i < stem.size() ? stem[i] : ' ';
    if (std::isalnum(static_cast<unsigned char>(c))) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      continue;
    }
    if (word == "test") return true;
    word.clear();
  }
  return false;
}

// The command line, shell-quoted where needed, for the provenance.
std::string CommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  std::stringstream ss(all);
  for (std::string a; std::getline(ss, a, '\0');) args.push_back(a);
  std::string out = "skipkv";
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789-_=.,/:+@") == std::string::npos;
    out += " " + (plain ? a : "'" + a + "'");
  }
  return out;
}

std::string Pct(double share) {
  char b[16];
  std::snprintf(b, sizeof b, "%.1f%%", 100.0 * share);
  return b;
}

void PrintSummary(const eval::CalibrationConfig& c, const eval::CalibrationResult& r,
                  const std::string& model, const nlohmann::json& provenance,
                  const std::vector<PresetFileEntry>& presets, const std::string& out) {
  std::printf("skipkv calibrate: %s on %s, %zu validation problems\n", model.c_str(),
              c.sweep.dataset.name.c_str(), c.sweep.problems.size());
  std::printf(
      "FullKV: %lld/%lld correct (%.1f%%), mean %.0f generated tokens; %lld traces, %lld sentences in the "
      "PSS, %lld pairs compared\n\n",
      static_cast<long long>(r.fullkv.correct), static_cast<long long>(r.fullkv.n), r.fullkv.accuracy(),
      r.fullkv.mean_tokens, static_cast<long long>(r.traces), static_cast<long long>(r.sentences),
      static_cast<long long>(r.pairs.compared));
  if (r.policy_compared >= 0) {
    const bool same = r.policy_compared == r.pairs.compared && r.policy_similar == r.pairs.similar;
    std::printf(
        "check against the policy's own PSS: %lld pairs compared, %lld with PSS >= 0.95 (recorded: %lld, "
        "%lld)%s\n\n",
        static_cast<long long>(r.policy_compared), static_cast<long long>(r.policy_similar),
        static_cast<long long>(r.pairs.compared), static_cast<long long>(r.pairs.similar),
        same ? ": equal" : ": DIFFERENT (the recorded sentences are not what the policy sees)");
  }
  std::printf("PSS of sentence pairs              pairs      p5     p25     p50     p75     p95\n");
  for (const auto& [name, v] : {std::pair{"duplicates (same token ids)", &r.pairs.duplicate},
                                std::pair{"same kind, other content", &r.pairs.same_kind}}) {
    std::printf("  %-29s %8zu", name, v->size());
    for (double p : {5.0, 25.0, 50.0, 75.0, 95.0}) {
      if (v->empty())
        std::printf("       -");
      else
        std::printf("  %6.3f", eval::Percentile(*v, p));
    }
    std::printf("\n");
  }
  std::printf("\ntau = the %gth percentile of the duplicates' PSS (%.4f), rounded down: %.3f\n",
              r.tau.percentile, r.tau.exact, r.tau.tau);
  std::printf("                 tau   duplicates flagged   same-kind pairs flagged\n");
  std::printf("  calibrated   %.3f   %18s   %23s\n", r.tau.tau, Pct(r.tau.recall).c_str(),
              Pct(r.tau.same_kind_above).c_str());
  std::printf("  paper        %.3f   %18s   %23s\n", r.tau.paper_tau, Pct(r.tau.paper_recall).c_str(),
              Pct(r.tau.paper_same_kind_above).c_str());
  std::printf("  at the calibrated tau        duplicates  flagged   same kind  flagged\n");
  auto line = [](const std::string& name, const nlohmann::json& k) {
    const long long dup = k["duplicate_pairs"].get<long long>(), kind = k["same_kind_pairs"].get<long long>();
    std::printf("    %-25s %12lld %8s %11lld %8s\n", name.c_str(), dup,
                dup > 0 ? Pct(k["duplicate_above_tau"].get<double>()).c_str() : "-", kind,
                kind > 0 ? Pct(k["same_kind_above_tau"].get<double>()).c_str() : "-");
  };
  line("non-execution sentences", provenance["tau"]["nonexec_sentences"]);
  line("other sentences", provenance["tau"]["other_sentences"]);
  for (const auto& k : provenance["tau"]["kinds"])
    line("first token " + nlohmann::json(k["first_token"]).dump(), k);
  std::printf("\n");
  if (!c.vector.enabled) {
    std::printf("alpha0: not calibrated (no steering vector; --steer FILE)\n");
  } else {
    std::printf(
        "alpha0 = the largest grid value whose SEAL accuracy is >= FullKV's %.1f%% minus %g point%s\n",
        r.fullkv.accuracy(), c.tolerance_points, c.tolerance_points == 1 ? "" : "s");
    std::printf("  alpha0   SEAL accuracy   vs FullKV   mean tokens\n");
    for (const auto& g : r.grid) {
      const bool chosen = r.alpha.alpha0 && *r.alpha.alpha0 == g.alpha0;
      std::printf("  %-6g   %12.1f%%   %+9.1f   %11.0f%s\n", g.alpha0, g.accuracy(),
                  g.accuracy() - r.fullkv.accuracy(), g.mean_tokens, chosen ? "   <- chosen" : "");
    }
    if (r.alpha.alpha0)
      std::printf("  calibrated: alpha0 %g, gamma %g (paper: alpha0 %g, gamma %g)\n", *r.alpha.alpha0,
                  r.alpha.gamma, r.paper_alpha0, r.paper_gamma);
    else
      std::printf(
          "  no grid value stays within %g points of FullKV: alpha0 not calibrated (add smaller values "
          "to --alpha-grid)\n",
          c.tolerance_points);
  }
  std::printf("\n%s:", out.c_str());
  for (const auto& p : presets) {
    std::printf("\n  %-26s base %-22s", p.name.c_str(), p.base.c_str());
    for (const auto& s : p.settings) std::printf(" %s", s.c_str());
  }
  std::printf("\nuse: skipkv eval --presets %s --methods rkv+sentence-cal,... (rows of this run: %s)\n",
              out.c_str(), c.sweep.output.c_str());
}

int RunCalibrate(const CalibrateOptions& o) {
  if (o.limit < 0) return Fail("--limit (" + std::to_string(o.limit) + ") must be >= 0");
  if (o.batch_size < 1) return Fail("--batch-size (" + std::to_string(o.batch_size) + ") must be >= 1");
  if (o.max_gen < 0) return Fail("--max-gen (" + std::to_string(o.max_gen) + ") must be >= 0");
  if (!(o.percentile > 0 && o.percentile < 50))
    return Fail("--percentile (" + std::to_string(o.percentile) + ") must be in (0, 50)");
  if (!(o.tolerance >= 0))
    return Fail("--tolerance-points (" + std::to_string(o.tolerance) + ") must be >= 0");
  eval::CalibrationConfig c;
  c.percentile = o.percentile;
  c.traces_path = o.traces;
  c.tolerance_points = o.tolerance;
  c.alpha_grid.clear();
  for (const auto& item : SplitComma(o.alpha_grid)) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (end != item.c_str() + item.size() || !(v > 0 && v < 1e6))
      return Fail("--alpha-grid: '" + item + "' is not a positive number");
    c.alpha_grid.push_back(v);
  }
  if (c.alpha_grid.empty()) return Fail("--alpha-grid is empty");

  // The dataset: a validation split, never a test split.
  auto spec = eval::ResolveDataset(o.dataset, o.data_dir, o.question_field, o.answer_field, o.id_field);
  if (!spec.ok()) return Fail(spec.status().message());
  const bool benchmark = spec->reported_split;
  if (benchmark || NamedTest(spec->path)) {
    const std::string why = "--dataset " + o.dataset + " (" + spec->path + ") is " +
                            (benchmark ? "a benchmark the results are reported on" : "named as a test split");
    if (!o.allow_test)
      return Fail(why + ": calibrate on a validation split (e.g. testbed-val); --allow-test-split overrides");
    std::fprintf(
        stderr,
        "skipkv calibrate: WARNING: %s; values calibrated on it must not be reported as results on it\n",
        why.c_str());
  }
  auto loaded = eval::LoadDataset(*spec, false);
  if (!loaded.ok()) return Fail(loaded.status().message());
  c.sweep.dataset = *spec;
  c.sweep.problems = std::move(loaded->problems);
  if (o.limit > 0 && static_cast<size_t>(o.limit) < c.sweep.problems.size()) c.sweep.problems.resize(o.limit);
  auto style =
      eval::ParsePromptStyle(o.prompt == "auto" ? (spec->plain_prompt ? "plain" : "chat") : o.prompt);
  if (!style.ok()) return Fail(style.status().message());
  c.sweep.prompt = *style;
  c.sweep.prompt_given = o.prompt != "auto";
  c.sweep.max_gen = o.max_gen > 0 ? o.max_gen : spec->max_gen;
  c.sweep.max_gen_given = o.max_gen > 0;
  c.sweep.batch_size = o.batch_size;
  c.sweep.model_path = o.model;
  std::string rows = o.rows;
  if (rows.empty()) {
    std::filesystem::path p(o.output);
    rows = (p.parent_path() / (p.stem().string() + ".rows.jsonl")).string();
  }
  c.sweep.output = rows;
  if (std::filesystem::exists(rows))
    return Fail("the rows file " + rows +
                " exists (calibration needs every FullKV trace generated afresh): "
                "remove it or give --rows");

  // The steering vector of the α0 grid.
  const bool testbed = o.model == ":testbed:";
  if (o.steer != "none") {
    std::string vfile = o.steer;
    if (o.steer == "auto") vfile = testbed ? o.data_dir + "/models/testbed/steer_vector.gguf" : "";
    if (!vfile.empty()) {
      int layer = o.steer_layer;
      if (layer < 0 && testbed) layer = 2;  // as skipkv demo: the output of layer 2 of the testbed's 4
      if (layer < 0)
        return Fail("--steer " + vfile + ": give --steer-layer L (the direction the vector is used at)");
      c.vector.enabled = true;
      c.vector.file = vfile;
      c.vector.layer = layer;
    }
  }

  auto eo = CommonEngineOptions(o.model, "", o.threads, "f16", 512);
  if (!eo.ok()) return Fail(eo.status().message());
  eo->batch_size = o.batch_size;
  eo->sort_by_length = false;
  eo->observe_sentences = true;  // the policy's own pair counts, to check the recorded ones
  auto engine = Engine::Create(*eo);
  if (!engine.ok()) return Fail(engine.status().ToString());
  if (c.vector.enabled) {
    const Status st = CheckSteeringVectorFile(c.vector.file, c.vector.layer, (*engine)->info().n_layers,
                                              (*engine)->info().d_model);
    if (!st.ok()) return Fail("--steer: " + st.ToString());
  }

  SweepBar bar(o.quiet);
  const size_t n = c.sweep.problems.size();
  auto stage = [&](const std::string& s) {
    if (o.quiet) return;
    if (s == "traces")
      std::fprintf(stderr,
                   "skipkv calibrate: 1/3 FullKV traces of %zu problems (%s), sentences recorded -> %s\n", n,
                   c.sweep.dataset.name.c_str(), rows.c_str());
    if (s == "pss") std::fprintf(stderr, "skipkv calibrate: 2/3 PSS of sentence pairs\n");
    if (s == "grid")
      std::fprintf(stderr, "skipkv calibrate: 3/3 SEAL on FullKV, alpha0 in {%s}, vector %s (layer %d)\n",
                   o.alpha_grid.c_str(), c.vector.file.c_str(), c.vector.layer);
  };
  auto result = eval::RunCalibration(
      c, **engine, [&](const eval::SweepProgress& p) { bar.Update(p); }, stage);
  if (!result.ok()) return Fail(result.status().message());
  auto prov = eval::CalibrationProvenance(c, *result, **engine, CommandLine());
  if (!prov.ok()) return Fail(prov.status().message());
  std::vector<PresetFileEntry> presets = eval::CalibratedPresets(*result, *prov);
  for (auto& e : presets) {
    e.source = o.output;
    const Status st = ValidatePresetFileEntry(e);
    if (!st.ok()) return Fail("internal: preset " + e.name + " does not validate: " + st.ToString());
  }
  const std::string tmp = o.output + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << PresetFileJson(presets);
    if (!f) return Fail("cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, o.output, ec);
  if (ec) return Fail("cannot rename " + tmp + " to " + o.output + ": " + ec.message());
  // What eval / demo / serve --presets will read.
  auto reread = LoadPresetFile(o.output);
  if (!reread.ok()) return Fail("the written file does not load: " + reread.status().ToString());
  PrintSummary(c, *result, o.model + " (" + (*engine)->info().name + ")", *prov, presets, o.output);
  return 0;
}

CommandRegistrar reg(
    "calibrate",
    "Choose SkipKV's tau and steering alpha0 for a model on a validation split; writes a preset file",
    [](CLI::App& sub) {
      auto o = std::make_shared<CalibrateOptions>();
      sub.footer(kRules);
      sub.add_option("-m,--model", o->model, "Model (default: the embedded testbed, :testbed:)")
          ->capture_default_str();
      sub.add_option(
             "--dataset", o->dataset,
             "Validation split: a bundled name (testbed-val) or a .jsonl file. Test splits (the bundled "
             "benchmarks, files with the word 'test' in their name) are refused")
          ->capture_default_str();
      sub.add_flag("--allow-test-split", o->allow_test, "Calibrate on a test split anyway (warns)");
      sub.add_option("--data-dir", o->data_dir, "Where the bundled datasets live")->capture_default_str();
      sub.add_option("--question-field", o->question_field, "JSONL field of the problem text");
      sub.add_option("--answer-field", o->answer_field, "JSONL field of the reference answer");
      sub.add_option("--id-field", o->id_field, "JSONL field of a unique id");
      sub.add_option("--limit", o->limit, "Only the first N problems (0 = all)")->capture_default_str();
      sub.add_option(
             "--steer", o->steer,
             "Steering vector of the alpha0 grid: auto (the testbed's own for :testbed:, else none), none "
             "(tau only), or a control-vector GGUF")
          ->capture_default_str();
      sub.add_option(
          "--steer-layer", o->steer_layer,
          "Direction l of the vector (default: 2 for the testbed, as skipkv demo; required otherwise)");
      sub.add_option("-t,--threads", o->threads, "Worker threads (0 = all cores)")->capture_default_str();
      sub.add_option("--batch-size", o->batch_size, "Requests per batch")->capture_default_str();
      sub.add_option("--max-gen", o->max_gen, "Most generated tokens per sample (0 = the dataset's)")
          ->capture_default_str();
      sub.add_option("--prompt", o->prompt,
                     "auto (plain for the testbed, chat otherwise), chat, raw, seal-chat, plain")
          ->capture_default_str();
      sub.add_option("-o,--output", o->output, "The preset file to write")->capture_default_str();
      sub.add_option(
          "--rows", o->rows,
          "Results JSONL of the FullKV and SEAL runs (eval's rows; must not exist; default: the output's "
          "name with .rows.jsonl)");
      sub.add_option(
          "--traces", o->traces,
          "Also write the recorded sentences (token ids, unit embeddings; JSONL, one line per problem; "
          "must not exist), from which the tau rule can be recomputed");
      sub.add_option("--percentile", o->percentile, "tau = this percentile of the duplicates' PSS")
          ->capture_default_str();
      sub.add_option("--tolerance-points", o->tolerance,
                     "alpha0: SEAL may lose at most this many accuracy points")
          ->capture_default_str();
      sub.add_option("--alpha-grid", o->alpha_grid, "alpha0 values tried (comma-separated)")
          ->capture_default_str();
      sub.add_flag("-q,--quiet", o->quiet, "No progress on stderr");
      return [o]() { return RunCalibrate(*o); };
    });

}  // namespace
}  // namespace skipkv::cli
