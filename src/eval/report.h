// The data side of `skipkv eval report` (issue 12 item 2): sweep rows in,
// a tidy JSON document and a Markdown table out. The plots are drawn from
// the JSON by tools/report/make_report.py (matplotlib); nothing here draws.
//
// report_data.json (schema "skipkv-report/1"):
//   sections[]   one per results file: file, dataset, model, rows, summary
//                (Summarize's objects) and samples[] — per row: method,
//                budget, problem, sample, correct, output_tokens and, when the
//                row has SkipKV's sentence statistics, pss_sentences,
//                similar_pairs, compared_pairs, pair_similarity_ratio (when
//                counted), similarity_ratio and nonexec_ratio (see
//                SampleSentenceStats).
//   throughput   `skipkv bench throughput --json` output, or null.
//   eviction     EvictionViewData, or null.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

namespace skipkv::eval {

// Per-sample sentence statistics (paper Fig. 5 / 14) from a row's
// diagnostics, present for methods with SkipKV's sentence tracker (policy
// skipkv) and for FullKV rows of `skipkv eval` (the tracker observes them,
// EngineOptions::observe_sentences):
//   pair_similarity_ratio = skipkv.similar_pairs / skipkv.compared_pairs —
//     the paper's Fig. 14 statistic: of the sentence pairs within the PSS
//     window (each generated sentence with the at most K = max_sentences
//     before it), the share with PSS (cosine of mean final hidden states)
//     >= 0.95; nullopt when the row has no pair counts (older results) or
//     compared no pair;
//   similarity_ratio = skipkv.redundant_sentences / skipkv.pss_sentences —
//     the share of sentences with a later sentence above τ, as of the last
//     update of the redundant set (the last compression; FullKV: the end);
//   nonexec_ratio = skipkv.nonexec_sentences / skipkv.pss_sentences — the
//     share of sentences holding a non-execution keyword ("Wait", "Alternatively", ...).
// nullopt when the diagnostics are absent or pss_sentences is 0.
struct SentenceStats {
  double pss_sentences = 0;
  double similar_pairs = 0, compared_pairs = 0;
  std::optional<double> pair_similarity_ratio;
  double similarity_ratio = 0;
  double nonexec_ratio = 0;
};
std::optional<SentenceStats> SampleSentenceStats(const nlohmann::json& row);

// Reads one results file (MergeResults: one run, consistent methods) into a
// section of the report. InvalidArgument / IoError naming the file.
StatusOr<nlohmann::json> ReportSection(const std::string& path);

// The eviction view's data: the token stream of one generation (`run_json`:
// a `skipkv run --json --kv-trace` result line with stream_pieces) and, for
// sequence `seq`, layer `layer` and KV head `head`, the kept gen_pos runs of
// every compression in the trace:
//   {layer, head, seq, pieces[], prompt_tokens, compressions: [{l, n, kept: [[a,b],...]}]}
// InvalidArgument naming the file and line for a malformed trace line, a
// layer/head the trace lacks, or a run line without stream_pieces.
StatusOr<nlohmann::json> EvictionViewData(const std::string& trace_path, const std::string& run_json,
                                          int layer, int head, int64_t seq);

// The Markdown summary: per section a table (method, budget, rows, pass@1,
// mean tokens, mean tokens correct / incorrect, KV peak MiB, compressions,
// mean effective budget B − Δpad),
// the sentence statistics split by correct / incorrect where present, and
// the throughput table when given.
std::string SummaryMarkdown(const nlohmann::json& report);

}  // namespace skipkv::eval
