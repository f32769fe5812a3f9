// Calibration of τ and α0 (see calibrate.h; docs/calibration.md).
#include "eval/calibrate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "engine/engine_internals.h"
#include "eval/prompt.h"
#include "eval/provenance.h"
#include "sentence/sentence_recorder.h"
#include "sentence/token_sets.h"

namespace skipkv::eval {
namespace {

// "%.6g" (settings and labels: 0.125, 0.005, 1).
std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string Tau(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

// A sweep label for grid value a: "seal-a0p25" (labels may not hold '.').
std::string GridLabel(double a) {
  std::string s = "seal-a" + Num(a);
  std::replace(s.begin(), s.end(), '.', 'p');
  return s;
}

// Correct / rows / mean generated tokens of one method label's rows.
GridPoint Tally(const std::vector<nlohmann::json>& rows, const std::string& method, double alpha0) {
  GridPoint g;
  g.alpha0 = alpha0;
  double tokens = 0;
  for (const auto& r : rows) {
    if (r.value("method", "") != method) continue;
    ++g.n;
    g.correct += r.value("correct", false) ? 1 : 0;
    tokens += r.value("output_tokens", 0.0);
  }
  g.mean_tokens = g.n > 0 ? tokens / static_cast<double>(g.n) : 0;
  return g;
}

nlohmann::json Spread(const std::vector<float>& v) {
  nlohmann::json j = {{"pairs", v.size()}};
  if (v.empty()) return j;
  for (double p : {5.0, 25.0, 50.0, 75.0, 95.0}) j["p" + Num(p)] = std::round(Percentile(v, p) * 1e4) / 1e4;
  return j;
}

// Eq. 1 on unit embeddings, accumulated in double.
float Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double dot = 0;
  const size_t d = std::min(a.size(), b.size());
  for (size_t k = 0; k < d; ++k) dot += static_cast<double>(a[k]) * b[k];
  return static_cast<float>(dot);
}

// The paper's Fig. 14 threshold (RedundantSentenceSet::kFig14Threshold).
constexpr float kFig14Threshold = 0.95f;

double Round4(double v) { return std::round(v * 1e4) / 1e4; }

// A float setting as written ("0.95", not 0.949999988).
double Clean(float v) { return std::stod(Num(v)); }

}  // namespace

PssPairs CollectPssPairs(std::span<const CalTrace> traces, int64_t window) {
  PssPairs out;
  for (const CalTrace& t : traces) {
    const auto& s = t.sentences;
    for (size_t j = 0; j < s.size(); ++j) {
      const size_t from = j > static_cast<size_t>(window) ? j - static_cast<size_t>(window) : 0;
      for (size_t i = from; i < j; ++i) {
        ++out.compared;
        const float pss = Dot(s[i].embedding, s[j].embedding);
        out.similar += pss >= kFig14Threshold;
        const bool same = s[i].tokens == s[j].tokens;
        const bool kind = !same && !s[i].tokens.empty() && !s[j].tokens.empty() &&
                          s[i].tokens.front() == s[j].tokens.front();
        if (!same && !kind) continue;
        (same ? out.duplicate : out.same_kind).push_back(pss);
        (same ? out.duplicate_first : out.same_kind_first).push_back(s[j].tokens.front());
        (same ? out.duplicate_nonexec : out.same_kind_nonexec).push_back(s[j].nonexec ? 1 : 0);
      }
    }
  }
  return out;
}

std::vector<KindRow> KindBreakdown(const PssPairs& pairs, double tau, size_t top) {
  std::map<int32_t, KindRow> by;
  for (size_t i = 0; i < pairs.duplicate.size(); ++i) {
    KindRow& k = by[pairs.duplicate_first[i]];
    ++k.duplicate;
    k.duplicate_above += pairs.duplicate[i] > tau;
  }
  for (size_t i = 0; i < pairs.same_kind.size(); ++i) {
    KindRow& k = by[pairs.same_kind_first[i]];
    ++k.same_kind;
    k.same_kind_above += pairs.same_kind[i] > tau;
  }
  std::vector<KindRow> rows;
  for (auto& [first, k] : by) {
    k.first_token = first;
    if (k.duplicate > 0) k.duplicate_above /= static_cast<double>(k.duplicate);
    if (k.same_kind > 0) k.same_kind_above /= static_cast<double>(k.same_kind);
    rows.push_back(k);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const KindRow& a, const KindRow& b) {
    return a.same_kind + a.duplicate > b.same_kind + b.duplicate;
  });
  if (rows.size() > top) rows.resize(top);
  return rows;
}

KindRow ClassBreakdown(const PssPairs& pairs, double tau, bool nonexec) {
  KindRow k;
  for (size_t i = 0; i < pairs.duplicate.size(); ++i) {
    if ((pairs.duplicate_nonexec[i] != 0) != nonexec) continue;
    ++k.duplicate;
    k.duplicate_above += pairs.duplicate[i] > tau;
  }
  for (size_t i = 0; i < pairs.same_kind.size(); ++i) {
    if ((pairs.same_kind_nonexec[i] != 0) != nonexec) continue;
    ++k.same_kind;
    k.same_kind_above += pairs.same_kind[i] > tau;
  }
  if (k.duplicate > 0) k.duplicate_above /= static_cast<double>(k.duplicate);
  if (k.same_kind > 0) k.same_kind_above /= static_cast<double>(k.same_kind);
  return k;
}

double Percentile(std::vector<float> v, double p) {
  std::sort(v.begin(), v.end());
  const double h = static_cast<double>(v.size() - 1) * p / 100.0;
  const size_t lo = static_cast<size_t>(std::floor(h));
  if (lo + 1 >= v.size()) return v.back();
  return v[lo] + (h - static_cast<double>(lo)) * (static_cast<double>(v[lo + 1]) - v[lo]);
}

double ShareAbove(std::span<const float> values, double threshold) {
  if (values.empty()) return 0;
  const auto n = std::count_if(values.begin(), values.end(), [&](float x) { return x > threshold; });
  return static_cast<double>(n) / static_cast<double>(values.size());
}

StatusOr<TauChoice> ChooseTau(const PssPairs& pairs, double percentile, double paper_tau) {
  if (!(percentile >= 0 && percentile < 100))
    return InvalidArgument("percentile (" + Num(percentile) + ") must be in [0, 100)");
  if (pairs.duplicate.empty()) {
    return InvalidArgument("no word-for-word duplicate sentence pairs in the traces (" +
                           std::to_string(pairs.compared) +
                           " pairs compared): τ cannot be calibrated; run more problems");
  }
  TauChoice t;
  t.percentile = percentile;
  t.exact = Percentile(pairs.duplicate, percentile);
  // Down to the 0.001 grid; a value within 1e-6 below a grid point (float
  // noise of the PSS) counts as on it.
  t.tau = std::floor(t.exact * 1000.0 + 1e-3) / 1000.0;
  if (!(t.tau > 0 && t.tau <= 1)) {
    return InvalidArgument(
        "the " + Num(percentile) + "th percentile of the duplicates' PSS is " + Num(t.exact) + " (τ " +
        Tau(t.tau) + "), outside (0, 1]: this model's sentence embeddings do not tell duplicates apart");
  }
  t.recall = ShareAbove(pairs.duplicate, t.tau);
  t.same_kind_above = ShareAbove(pairs.same_kind, t.tau);
  t.paper_tau = paper_tau;
  t.paper_recall = ShareAbove(pairs.duplicate, paper_tau);
  t.paper_same_kind_above = ShareAbove(pairs.same_kind, paper_tau);
  return t;
}

AlphaChoice ChooseAlpha0(std::span<const GridPoint> grid, double fullkv_accuracy, double tolerance_points,
                         double paper_alpha0, double paper_gamma) {
  AlphaChoice c;
  for (const GridPoint& g : grid) {
    if (g.n == 0 || g.accuracy() < fullkv_accuracy - tolerance_points) continue;
    if (!c.alpha0 || g.alpha0 > *c.alpha0) c.alpha0 = g.alpha0;
  }
  if (c.alpha0) c.gamma = *c.alpha0 * paper_gamma / paper_alpha0;
  return c;
}

StatusOr<CalibrationResult> RunCalibration(const CalibrationConfig& config, Engine& engine,
                                           const SweepProgressCallback& progress,
                                           const CalibrationStageCallback& stage) {
  if (config.sweep.dataset.code)
    return InvalidArgument("dataset '" + config.sweep.dataset.name + "': code datasets are not supported");
  if (config.sweep.problems.empty()) return InvalidArgument("no problems to calibrate on");
  if (!(config.tolerance_points >= 0))
    return InvalidArgument("tolerance_points (" + Num(config.tolerance_points) + ") must be >= 0");
  if (!(config.percentile >= 0 && config.percentile < 100))
    return InvalidArgument("percentile (" + Num(config.percentile) + ") must be in [0, 100)");
  if (config.vector.enabled) {
    if (config.alpha_grid.empty()) return InvalidArgument("alpha grid: empty");
    for (double a : config.alpha_grid)
      if (!(a > 0 && std::isfinite(a)))
        return InvalidArgument("alpha grid: " + Num(a) + " is not a positive number");
  }
  std::error_code ec;
  if (std::filesystem::exists(config.sweep.output, ec)) {
    return InvalidArgument(
        config.sweep.output +
        " exists: calibration records the hidden states of each FullKV trace as it is "
        "generated, which a resumed row does not have; remove it or name another rows file");
  }

  if (!config.traces_path.empty() && std::filesystem::exists(config.traces_path, ec))
    return InvalidArgument(config.traces_path + " exists: the traces file is written afresh; remove it");

  CalibrationResult result;
  const SteeringConfig paper;  // the project's (= the paper's) adaptive steering defaults
  result.paper_alpha0 = Clean(paper.alpha0);
  result.paper_gamma = Clean(paper.gamma);
  // The sentence side exactly as rkv+sentence (and skipkv) run it.
  SKIPKV_ASSIGN_OR_RETURN(MethodPreset sentence_preset, MakePreset("rkv+sentence", 1024, {}));
  result.policy = sentence_preset.method.kv.skipkv;
  const SkipkvConfig& pc = result.policy;
  SKIPKV_ASSIGN_OR_RETURN(SkipkvTokenSets sets, BuildSkipkvTokenSets(EngineInternals::GetTokenizer(engine),
                                                                     pc.delimiters, pc.nonexec_keywords));
  auto shared_sets = std::make_shared<const SkipkvTokenSets>(std::move(sets));

  SweepConfig c = config.sweep;
  // Both sweeps write one file: its provenance names the vector from the start.
  if (config.vector.enabled) c.provenance_steer_files = {config.vector.file};
  SKIPKV_ASSIGN_OR_RETURN(MethodPreset full, MakePreset("fullkv", 0, {}));
  c.pairs = {full};

  // 1. FullKV traces, each request's sentences recorded by its problem.
  // Problems by their prompt ids, as the sweep tokenizes them (a request
  // carries its ids; one with text only is tokenized the way Generate does).
  std::map<std::vector<int32_t>, std::deque<size_t>> by_prompt;
  for (size_t i = 0; i < c.problems.size(); ++i) {
    SKIPKV_ASSIGN_OR_RETURN(std::vector<int32_t> ids, SweepPromptTokens(c, engine, full, c.problems[i]));
    by_prompt[std::move(ids)].push_back(i);
  }
  std::vector<std::vector<RecordedSentence>> recorded(c.problems.size());
  std::vector<bool> started(c.problems.size(), false);
  EngineInternals::SetSequenceHooks(engine, [&](size_t, const Request& r) -> std::unique_ptr<SequenceHooks> {
    if (!r.method || r.method->name != full.method.name) return nullptr;
    std::vector<int32_t> ids = r.prompt_tokens;
    if (ids.empty()) {
      auto t = engine.Tokenize(r.prompt, true, r.chat);
      if (!t.ok()) return nullptr;  // reported below as a trace not recorded
      ids = std::move(t).value();
    }
    auto it = by_prompt.find(ids);
    if (it == by_prompt.end() || it->second.empty()) return nullptr;
    const size_t p = it->second.front();
    it->second.pop_front();
    started[p] = true;
    return std::make_unique<SentenceRecorder>(pc, shared_sets, &recorded[p]);
  });
  if (stage) stage("traces");
  StatusOr<SweepResult> full_res = RunSweep(c, engine, progress);
  EngineInternals::SetSequenceHooks(engine, nullptr);
  if (!full_res.ok()) return full_res.status();
  for (size_t i = 0; i < c.problems.size(); ++i) {
    if (!started[i]) return Internal("problem " + c.problems[i].id + ": its FullKV trace was not recorded");
  }
  result.fullkv = Tally(full_res->rows, full.method.name, 0);
  for (const auto& row : full_res->rows) {
    const auto d = row.find("diagnostics");
    if (d == row.end() || !d->contains("skipkv.compared_pairs")) continue;
    if (result.policy_compared < 0) result.policy_compared = result.policy_similar = 0;
    result.policy_compared += static_cast<int64_t>((*d)["skipkv.compared_pairs"].get<double>());
    result.policy_similar += static_cast<int64_t>(d->value("skipkv.similar_pairs", 0.0));
  }

  // 2. τ from the PSS of sentence pairs, as the policy compares them.
  if (stage) stage("pss");
  std::vector<CalTrace> traces;
  std::ofstream traces_out;
  if (!config.traces_path.empty()) {
    traces_out.open(config.traces_path, std::ios::binary);
    if (!traces_out) return IoError("cannot write " + config.traces_path);
  }
  for (size_t i = 0; i < c.problems.size(); ++i) {
    CalTrace t;
    t.problem = c.problems[i].id;
    nlohmann::json line = {{"problem", t.problem}, {"sentences", nlohmann::json::array()}};
    for (RecordedSentence& s : recorded[i]) {
      if (s.prompt && !pc.pss_include_prompt) continue;  // A3, as SkipkvSentenceHooks
      if (traces_out.is_open()) {
        line["sentences"].push_back({{"b", s.b},
                                     {"e", s.e},
                                     {"nonexec", s.nonexec},
                                     {"tokens", s.tokens},
                                     {"embedding", s.embedding}});
      }
      t.sentences.push_back({std::move(s.tokens), std::move(s.embedding), s.nonexec});
    }
    if (traces_out.is_open() && !(traces_out << line.dump() << "\n"))
      return IoError("cannot write " + config.traces_path);
    result.sentences += static_cast<int64_t>(t.sentences.size());
    traces.push_back(std::move(t));
  }
  result.traces = static_cast<int64_t>(traces.size());
  result.pairs = CollectPssPairs(traces, pc.max_sentences);
  SKIPKV_ASSIGN_OR_RETURN(result.tau, ChooseTau(result.pairs, config.percentile, Clean(pc.sim_threshold)));

  // 3. α0: SEAL on FullKV over the grid.
  if (config.vector.enabled) {
    if (stage) stage("grid");
    std::vector<double> grid = config.alpha_grid;
    std::sort(grid.begin(), grid.end(), std::greater<>());
    grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
    c.pairs.clear();
    for (double a : grid) {
      SteeringConfig v = config.vector;
      v.coef = static_cast<float>(a);
      SKIPKV_ASSIGN_OR_RETURN(MethodPreset p, MakePreset(GridLabel(a) + "=seal", 0, {}, v));
      c.pairs.push_back(std::move(p));
    }
    SKIPKV_ASSIGN_OR_RETURN(SweepResult seal_res, RunSweep(c, engine, progress));
    for (double a : grid) result.grid.push_back(Tally(seal_res.rows, GridLabel(a), a));
    result.alpha = ChooseAlpha0(result.grid, result.fullkv.accuracy(), config.tolerance_points,
                                result.paper_alpha0, result.paper_gamma);
  }
  return result;
}

StatusOr<nlohmann::json> CalibrationProvenance(const CalibrationConfig& config, const CalibrationResult& r,
                                               const Engine& engine, const std::string& command) {
  const SweepConfig& s = config.sweep;
  SKIPKV_ASSIGN_OR_RETURN(std::string model_digest, ContentDigest(s.model_path));
  SKIPKV_ASSIGN_OR_RETURN(std::string dataset_digest, ContentDigest(s.dataset.path));
  nlohmann::json j = {
      {"tool", "skipkv calibrate"},
      {"command", command},
      {"commit", SourceCommit()},
      {"model", engine.info().name},
      {"model_path", s.model_path},
      {"model_digest", model_digest},
      {"dataset", s.dataset.name},
      {"dataset_path", s.dataset.path},
      {"dataset_digest", dataset_digest},
      {"split", "validation"},
      {"problems", s.problems.size()},
      {"prompt", PromptStyleName(s.prompt)},
      {"max_gen", s.max_gen},
      {"rows", s.output},
      {"paper",
       {{"sim_threshold", r.tau.paper_tau},
        {"steer_alpha0", r.paper_alpha0},
        {"steer_gamma", r.paper_gamma}}},
  };
  j["tau"] = {
      {"rule",
       "tau = the " + Num(r.tau.percentile) +
           "th percentile (linear interpolation) of the PSS of word-for-word duplicate sentence pairs "
           "(identical token ids; pairs the policy compares, generated sentences, j - i <= K), rounded "
           "down to 0.001; same-kind pairs (same first token, different ids) above tau are the "
           "false-positive check"},
      {"value", r.tau.tau},
      {"percentile", r.tau.percentile},
      {"exact_percentile", Round4(r.tau.exact)},
      {"traces", r.traces},
      {"pss_sentences", r.sentences},
      {"compared_pairs", r.pairs.compared},
      {"pairs_pss_ge_0.95", r.pairs.similar},
      {"policy_check",
       {{"compared_pairs", r.policy_compared},
        {"pairs_pss_ge_0.95", r.policy_similar},
        {"note",
         "the FullKV rows' skipkv.compared_pairs / skipkv.similar_pairs (the policy's own PSS in "
         "observation mode), summed; -1 = not observed"}}},
      {"duplicate", Spread(r.pairs.duplicate)},
      {"same_kind", Spread(r.pairs.same_kind)},
      {"duplicate_recall", Round4(r.tau.recall)},
      {"same_kind_above", Round4(r.tau.same_kind_above)},
      {"paper_tau", r.tau.paper_tau},
      {"paper_duplicate_recall", Round4(r.tau.paper_recall)},
      {"paper_same_kind_above", Round4(r.tau.paper_same_kind_above)},
      {"segmentation",
       {{"min_sentence_tokens", r.policy.min_sentence_tokens},
        {"pss_include_prompt", r.policy.pss_include_prompt},
        {"max_sentences", r.policy.max_sentences},
        {"delimiters", r.policy.delimiters}}},
  };
  // The kinds with the most pairs, by their first token's text.
  nlohmann::json kinds = nlohmann::json::array();
  for (const KindRow& k : KindBreakdown(r.pairs, r.tau.tau, 8)) {
    const int32_t id = k.first_token;
    SKIPKV_ASSIGN_OR_RETURN(std::string text, engine.Detokenize(std::span<const int32_t>(&id, 1)));
    kinds.push_back({{"first_token", text},
                     {"duplicate_pairs", k.duplicate},
                     {"duplicate_above_tau", Round4(k.duplicate_above)},
                     {"same_kind_pairs", k.same_kind},
                     {"same_kind_above_tau", Round4(k.same_kind_above)}});
  }
  j["tau"]["kinds"] = kinds;
  for (const bool nonexec : {true, false}) {
    const KindRow k = ClassBreakdown(r.pairs, r.tau.tau, nonexec);
    j["tau"][nonexec ? "nonexec_sentences" : "other_sentences"] = {
        {"duplicate_pairs", k.duplicate},
        {"duplicate_above_tau", Round4(k.duplicate_above)},
        {"same_kind_pairs", k.same_kind},
        {"same_kind_above_tau", Round4(k.same_kind_above)}};
  }
  j["fullkv"] = {{"correct", r.fullkv.correct},
                 {"n", r.fullkv.n},
                 {"accuracy", Round4(r.fullkv.accuracy())},
                 {"mean_tokens", Round4(r.fullkv.mean_tokens)}};
  if (config.vector.enabled) {
    SKIPKV_ASSIGN_OR_RETURN(std::string vector_digest, ContentDigest(config.vector.file));
    nlohmann::json grid = nlohmann::json::array();
    for (const GridPoint& g : r.grid) {
      grid.push_back({{"alpha0", g.alpha0},
                      {"correct", g.correct},
                      {"n", g.n},
                      {"accuracy", Round4(g.accuracy())},
                      {"mean_tokens", Round4(g.mean_tokens)}});
    }
    j["alpha0"] = {
        {"rule",
         "alpha0 = the largest grid value whose SEAL-on-FullKV accuracy (fixed strength alpha0) is >= "
         "FullKV's - " +
             Num(config.tolerance_points) + " points; gamma = alpha0 * paper gamma / paper alpha0"},
        {"tolerance_points", config.tolerance_points},
        {"grid", grid},
        {"value", r.alpha.alpha0 ? nlohmann::json(*r.alpha.alpha0) : nlohmann::json(nullptr)},
        {"gamma", r.alpha.alpha0 ? nlohmann::json(r.alpha.gamma) : nlohmann::json(nullptr)},
        {"steering_vector", config.vector.file},
        {"steering_vector_digest", vector_digest},
        {"steer_layer", config.vector.layer},
    };
  } else {
    j["alpha0"] = {{"value", nullptr}, {"note", "no steering vector given: alpha0 not calibrated"}};
  }
  return j;
}

std::vector<PresetFileEntry> CalibratedPresets(const CalibrationResult& r, const nlohmann::json& provenance) {
  const std::string prov = provenance.dump();
  const std::string on = provenance.value("dataset", std::string("validation")) + " (skipkv calibrate)";
  const std::string tau = "sim_threshold=" + Tau(r.tau.tau);
  const std::string paper = "; paper: tau " + Num(r.tau.paper_tau) + ", alpha0 " + Num(r.paper_alpha0) +
                            ", gamma " + Num(r.paper_gamma);
  std::vector<PresetFileEntry> out;
  out.push_back({"rkv+sentence-cal",
                 "rkv+sentence",
                 {tau},
                 "rkv+sentence with tau " + Tau(r.tau.tau) + " calibrated on " + on + paper,
                 prov,
                 ""});
  if (r.alpha.alpha0) {
    const double a = *r.alpha.alpha0;
    const std::vector<std::string> steer = {tau, "steer_alpha0=" + Num(a),
                                            "steer_gamma=" + Num(r.alpha.gamma)};
    const std::string vals = "tau " + Tau(r.tau.tau) + ", alpha0 " + Num(a) + ", gamma " + Num(r.alpha.gamma);
    out.push_back({"rkv+sentence+steering-cal", "rkv+sentence+steering", steer,
                   "rkv+sentence+steering with " + vals + " calibrated on " + on + paper, prov, ""});
    out.push_back(
        {"skipkv-cal", "skipkv", steer, "skipkv with " + vals + " calibrated on " + on + paper, prov, ""});
    out.push_back({"seal-cal",
                   "seal",
                   {"steer_coef=" + Num(a)},
                   "seal with strength " + Num(a) + " (the calibrated alpha0) on " + on + paper,
                   prov,
                   ""});
  } else {
    out.push_back({"skipkv-cal",
                   "skipkv",
                   {tau},
                   "skipkv with tau " + Tau(r.tau.tau) + " calibrated on " + on +
                       " (alpha0 not calibrated: the paper's steering strength)" + paper,
                   prov,
                   ""});
  }
  return out;
}

}  // namespace skipkv::eval
