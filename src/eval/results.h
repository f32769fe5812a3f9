// Sweep results (issue 11 items 5, 7): one JSON row per finished sample,
// keyed by (problem, method, budget, sample); appended and flushed as soon
// as the sample is graded (its sequence finished), so a killed run loses
// only the samples still generating.
// Every row carries the run configuration ("run": dataset, model digest,
// tokenizer, commit, prompt style, max_gen, sampling, engine settings) and
// its full method configuration ("method_config"); resume and merge refuse
// rows whose configuration differs.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "util/status.h"

namespace skipkv::eval {

// (problem id, method label, budget, sample index). Budget is 0 for fullkv.
struct RowKey {
  std::string problem;
  std::string method;
  int64_t budget = 0;
  int sample = 0;
  auto operator<=>(const RowKey&) const = default;
  std::string ToString() const;  // "problem 7, method rkv, budget 512, sample 0"
};

// The key of a row; InvalidArgument naming the missing / mistyped field.
StatusOr<RowKey> KeyOfRow(const nlohmann::json& row);

// "i/N" with 1 <= i <= N.
struct Shard {
  int index = 1;  // 1-based
  int count = 1;
  bool Contains(size_t problem_position) const {
    return static_cast<int>(problem_position % static_cast<size_t>(count)) == index - 1;
  }
};
StatusOr<Shard> ParseShard(const std::string& s);

// The first field (dotted path) where two JSON values differ, or "" when equal.
std::string FirstDifference(const nlohmann::json& a, const nlohmann::json& b, const std::string& path = "");

// An append-only results file.
class ResultsWriter {
 public:
  ~ResultsWriter();
  // Opens (creating) `path` for appending and takes an exclusive lock on it
  // (flock, held while the writer lives): a second writer of the same file,
  // in this process or another, gets IoError naming the file. A torn last
  // line (no final newline: a writer killed mid-line) is cut off first.
  static StatusOr<std::unique_ptr<ResultsWriter>> Open(const std::string& path);
  // Writes one line and flushes it to the OS (fflush + fsync).
  Status Append(const nlohmann::json& row);

 private:
  ResultsWriter(std::string path, FILE* f) : path_(std::move(path)), f_(f) {}
  std::string path_;
  FILE* f_ = nullptr;
};

// Rows already in a results file (absent file = none). Checks each row's key
// and that its "run" equals `run` and its "method_config" equals
// methods[key.method] when given; a mismatch is an InvalidArgument naming
// the file, line and first differing field. A torn last line is ignored.
StatusOr<std::map<RowKey, nlohmann::json>> ReadFinishedRows(
    const std::string& path, const nlohmann::json& run, const std::map<std::string, nlohmann::json>& methods);

// Joins shard files: every row's "run" must equal the first row's, and rows
// of one (method, budget) must share their method_config; a key present in
// two files must have the same output. Rows are returned sorted by (method,
// budget, dataset line, sample).
StatusOr<std::vector<nlohmann::json>> MergeResults(const std::vector<std::string>& paths);

// Metrics per (method, budget) over rows (issue 11 item 7), one JSON object
// each, in (method, budget) order: n (rows), problems, pass@1 (percent; the
// mean over problems of the mean over samples), generated tokens (total,
// mean, mean over correct and over incorrect rows), request time, decode
// tokens/s, KV bytes (peak: max over rows; mean: mean of the rows' peaks),
// Δpad and effective budget (means), compressions (mean), and the mean of
// every method diagnostic.
std::vector<nlohmann::json> Summarize(const std::vector<nlohmann::json>& rows);

}  // namespace skipkv::eval
