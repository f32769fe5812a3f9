// Report data and the Markdown summary (see report.h).
#include "eval/report.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include "eval/jsonl.h"
#include "eval/results.h"

namespace skipkv::eval {
namespace {

double Num(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

}  // namespace

std::optional<SentenceStats> SampleSentenceStats(const nlohmann::json& row) {
  auto d = row.find("diagnostics");
  if (d == row.end() || !d->is_object() || !d->contains("skipkv.pss_sentences")) return std::nullopt;
  SentenceStats s;
  s.pss_sentences = Num(*d, "skipkv.pss_sentences");
  if (s.pss_sentences <= 0) return std::nullopt;
  s.similarity_ratio = Num(*d, "skipkv.redundant_sentences") / s.pss_sentences;
  if (d->contains("skipkv.compared_pairs")) {
    s.similar_pairs = Num(*d, "skipkv.similar_pairs");
    s.compared_pairs = Num(*d, "skipkv.compared_pairs");
    if (s.compared_pairs > 0) s.pair_similarity_ratio = s.similar_pairs / s.compared_pairs;
  }
  s.nonexec_ratio = Num(*d, "skipkv.nonexec_sentences") / s.pss_sentences;
  return s;
}

StatusOr<nlohmann::json> ReportSection(const std::string& path) {
  SKIPKV_ASSIGN_OR_RETURN(std::vector<nlohmann::json> rows, MergeResults({path}));
  if (rows.empty()) return InvalidArgument("report: '" + path + "' holds no result rows");
  const nlohmann::json run = rows.front().value("run", nlohmann::json::object());
  nlohmann::json samples = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json s = {{"method", r.at("method")},
                        {"budget", r.at("budget")},
                        {"problem", r.at("problem")},
                        {"sample", r.at("sample")},
                        {"correct", r.value("correct", false)},
                        {"output_tokens", r.value("output_tokens", 0)}};
    if (auto st = SampleSentenceStats(r)) {
      s["pss_sentences"] = st->pss_sentences;
      s["similarity_ratio"] = st->similarity_ratio;
      s["similar_pairs"] = st->similar_pairs;
      s["compared_pairs"] = st->compared_pairs;
      if (st->pair_similarity_ratio) s["pair_similarity_ratio"] = *st->pair_similarity_ratio;
      s["nonexec_ratio"] = st->nonexec_ratio;
    }
    samples.push_back(std::move(s));
  }
  return nlohmann::json{{"file", std::filesystem::path(path).filename().string()},
                        {"dataset", run.value("dataset", "")},
                        {"model", run.value("model", "")},
                        {"commit", run.value("commit", "")},
                        {"rows", rows.size()},
                        {"summary", Summarize(rows)},
                        {"samples", std::move(samples)}};
}

StatusOr<nlohmann::json> EvictionViewData(const std::string& trace_path, const std::string& run_json,
                                          int layer, int head, int64_t seq) {
  SKIPKV_ASSIGN_OR_RETURN(std::vector<JsonlLine> runs, ReadJsonl(run_json));
  const nlohmann::json* run = nullptr;
  for (const auto& l : runs)
    if (l.value.is_object() && l.value.value("index", int64_t{-1}) == seq) run = &l.value;
  if (!run) {
    return InvalidArgument("eviction view: '" + run_json + "' has no result line with \"index\": " +
                           std::to_string(seq) + " (a `skipkv run --json` output)");
  }
  if (!run->contains("stream_pieces") || !run->at("stream_pieces").is_array()) {
    return InvalidArgument("eviction view: '" + run_json +
                           "' lacks field 'stream_pieces' (run `skipkv run --json --kv-trace FILE`)");
  }
  SKIPKV_ASSIGN_OR_RETURN(std::vector<JsonlLine> trace, ReadJsonl(trace_path));
  nlohmann::json comps = nlohmann::json::array();
  bool layer_seen = false;
  for (const auto& l : trace) {
    const nlohmann::json& t = l.value;
    auto bad = [&](const std::string& field) {
      return InvalidArgument(trace_path + ":" + std::to_string(l.line) + ": field '" + field +
                             "' missing or of the wrong type");
    };
    if (!t.is_object()) return bad("(line is not an object)");
    for (const char* f : {"seq", "l", "layer", "n"})
      if (!t.contains(f) || !t.at(f).is_number_integer()) return bad(f);
    if (!t.contains("kept") || !t.at("kept").is_array()) return bad("kept");
    if (t.at("seq").get<int64_t>() != seq || t.at("layer").get<int>() != layer) continue;
    layer_seen = true;
    const nlohmann::json& kept = t.at("kept");
    if (head < 0 || head >= static_cast<int>(kept.size())) {
      return InvalidArgument(trace_path + ":" + std::to_string(l.line) + ": head " + std::to_string(head) +
                             " out of range (the trace has " + std::to_string(kept.size()) + " KV heads)");
    }
    for (const auto& run_pair : kept.at(head)) {
      if (!run_pair.is_array() || run_pair.size() != 2 || !run_pair[0].is_number_integer() ||
          !run_pair[1].is_number_integer())
        return bad("kept");
    }
    comps.push_back({{"l", t.at("l")}, {"n", t.at("n")}, {"kept", kept.at(head)}});
  }
  if (!layer_seen) {
    return InvalidArgument("eviction view: '" + trace_path + "' has no compression of sequence " +
                           std::to_string(seq) + " at layer " + std::to_string(layer) +
                           " (was it traced? --kv-trace-layers; did the cache reach its budget?)");
  }
  return nlohmann::json{{"layer", layer},
                        {"head", head},
                        {"seq", seq},
                        {"method", run->value("method", nlohmann::json::object())},
                        {"prompt_tokens", run->value("prompt_tokens", 0)},
                        {"pieces", run->at("stream_pieces")},
                        {"compressions", std::move(comps)}};
}

std::string SummaryMarkdown(const nlohmann::json& report) {
  std::string md = "# skipkv eval report\n\n";
  for (const auto& sec : report.at("sections")) {
    md += "## " + sec.value("file", "") + " — " + sec.value("dataset", "") + ", " + sec.value("model", "") +
          "\n\n";
    md +=
        "| method | budget | rows | pass@1 (%) | mean tokens | tokens (correct) | tokens (incorrect) | "
        "KV peak (MiB) | compressions | effective B |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& s : sec.at("summary")) {
      md += "| " + s.value("method", "") + " | " + std::to_string(s.value("budget", int64_t{0})) + " | " +
            std::to_string(s.value("rows", int64_t{0})) + " | " + Fmt("%.1f", Num(s, "pass@1")) + " | " +
            Fmt("%.1f", Num(s, "tokens_mean")) + " | " + Fmt("%.1f", Num(s, "tokens_mean_correct")) + " | " +
            Fmt("%.1f", Num(s, "tokens_mean_incorrect")) + " | " +
            Fmt("%.3f", Num(s, "kv_peak_bytes_max") / (1024.0 * 1024.0)) + " | " +
            Fmt("%.1f", Num(s, "compressions_mean")) + " | " + Fmt("%.1f", Num(s, "effective_budget_mean")) +
            " |\n";
    }
    // Sentence statistics per (method, budget) and correctness.
    struct Agg {
      int64_t n = 0, n_pairs = 0;  // samples; samples with a pair share
      double sim = 0, nonexec = 0, pairs = 0;
    };
    std::map<std::tuple<std::string, int64_t, bool>, Agg> agg;
    for (const auto& s : sec.at("samples")) {
      if (!s.contains("similarity_ratio")) continue;
      Agg& a = agg[{s.at("method").get<std::string>(), s.at("budget").get<int64_t>(),
                    s.at("correct").get<bool>()}];
      ++a.n;
      a.sim += s.at("similarity_ratio").get<double>();
      a.nonexec += s.at("nonexec_ratio").get<double>();
      if (s.contains("pair_similarity_ratio")) {
        ++a.n_pairs;
        a.pairs += s.at("pair_similarity_ratio").get<double>();
      }
    }
    md += "\n";
    if (agg.empty()) {
      md +=
          "No sentence statistics: only rows of the sentence tracker (policy `skipkv`, and FullKV rows "
          "of `skipkv eval`) record them.\n\n";
    } else {
      md +=
          "Sentence statistics (mean per sample; similar pairs = share of sentence pairs within the PSS "
          "window with PSS >= 0.95, the paper's Fig. 14; similarity = share of sentences with a later "
          "sentence of PSS above τ; non-execution = share of sentences with a non-execution keyword):\n\n"
          "| method | budget | correct | samples | similar pairs | similarity ratio | non-execution ratio |\n"
          "|---|---:|---|---:|---:|---:|---:|\n";
      for (const auto& [k, a] : agg) {
        md += "| " + std::get<0>(k) + " | " + std::to_string(std::get<1>(k)) + " | " +
              (std::get<2>(k) ? "yes" : "no") + " | " + std::to_string(a.n) + " | " +
              (a.n_pairs > 0 ? Fmt("%.3f", a.pairs / a.n_pairs) : std::string("—")) + " | " +
              Fmt("%.3f", a.sim / a.n) + " | " + Fmt("%.3f", a.nonexec / a.n) + " |\n";
      }
      md += "\n";
    }
  }
  const auto tp = report.find("throughput");
  if (tp != report.end() && tp->is_object()) {
    md += "## Throughput (" + tp->value("model", "") + ", KV memory " +
          Fmt("%.1f", Num(*tp, "kv_memory_bytes") / (1024.0 * 1024.0)) + " MiB)\n\n";
    md += "| method | budget | max batch | latency (s) | tokens/s |\n|---|---:|---:|---:|---:|\n";
    for (const auto& m : tp->value("methods", nlohmann::json::array())) {
      md += "| " + m.value("method", "") + " | " + std::to_string(m.value("budget", int64_t{0})) + " | " +
            std::to_string(m.value("max_batch", int64_t{0})) + " | " + Fmt("%.2f", Num(m, "latency_s")) +
            " | " + Fmt("%.1f", Num(m, "tokens_per_s")) + " |\n";
    }
    md += "\n";
  }
  return md;
}

}  // namespace skipkv::eval
