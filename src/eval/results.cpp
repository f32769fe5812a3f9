#include "eval/results.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "eval/jsonl.h"

namespace skipkv::eval {

std::string RowKey::ToString() const {
  return "problem " + problem + ", method " + method + ", budget " + std::to_string(budget) + ", sample " +
         std::to_string(sample);
}

StatusOr<RowKey> KeyOfRow(const nlohmann::json& row) {
  if (!row.is_object()) return InvalidArgument("a result row must be a JSON object");
  RowKey k;
  auto field = [&](const char* name) -> const nlohmann::json* {
    auto it = row.find(name);
    return it == row.end() ? nullptr : &*it;
  };
  const auto* p = field("problem");
  const auto* m = field("method");
  const auto* b = field("budget");
  const auto* s = field("sample");
  if (!p || !p->is_string()) return InvalidArgument("field 'problem' must be a string");
  if (!m || !m->is_string()) return InvalidArgument("field 'method' must be a string");
  if (!b || !b->is_number_integer()) return InvalidArgument("field 'budget' must be an integer");
  if (!s || !s->is_number_integer()) return InvalidArgument("field 'sample' must be an integer");
  k.problem = p->get<std::string>();
  k.method = m->get<std::string>();
  k.budget = b->get<int64_t>();
  k.sample = s->get<int>();
  return k;
}

StatusOr<Shard> ParseShard(const std::string& s) {
  const size_t slash = s.find('/');
  auto bad = [&] { return InvalidArgument("--shard '" + s + "' must be i/N with 1 <= i <= N (e.g. 2/8)"); };
  if (slash == std::string::npos) return bad();
  Shard sh;
  try {
    size_t used = 0;
    sh.index = std::stoi(s.substr(0, slash), &used);
    if (used != slash) return bad();
    const std::string n = s.substr(slash + 1);
    sh.count = std::stoi(n, &used);
    if (used != n.size()) return bad();
  } catch (...) {
    return bad();
  }
  if (sh.count < 1 || sh.index < 1 || sh.index > sh.count) return bad();
  return sh;
}

std::string FirstDifference(const nlohmann::json& a, const nlohmann::json& b, const std::string& path) {
  if (a.is_object() && b.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      const std::string p = path.empty() ? it.key() : path + "." + it.key();
      auto jt = b.find(it.key());
      if (jt == b.end()) return p;
      std::string d = FirstDifference(it.value(), *jt, p);
      if (!d.empty()) return d;
    }
    for (auto jt = b.begin(); jt != b.end(); ++jt)
      if (!a.contains(jt.key())) return path.empty() ? jt.key() : path + "." + jt.key();
    return "";
  }
  if (a != b) return path.empty() ? "(value)" : path;
  return "";
}

ResultsWriter::~ResultsWriter() {
  if (f_) std::fclose(f_);
}

StatusOr<std::unique_ptr<ResultsWriter>> ResultsWriter::Open(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "ab");
  if (!f) return IoError("cannot open '" + path + "' for appending: " + std::strerror(errno));
  // One writer per file: two runs appending to one file interleave (and tear)
  // each other's lines and run the same rows twice. The lock goes with the
  // open file, so it is released when the writer closes or the process dies.
  if (::flock(fileno(f), LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::fclose(f);
    if (err == EWOULDBLOCK)
      return IoError("'" + path + "' is being written by another run (one writer per results file): wait " +
                     "for it to finish, or write to another --output");
    return IoError("cannot lock '" + path + "': " + std::strerror(err));
  }
  // Cut a torn last line so that the next row starts on a line of its own.
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (!text.empty() && text.back() != '\n') {
    const size_t keep = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    if (::ftruncate(fileno(f), static_cast<off_t>(keep)) != 0) {
      const int err = errno;
      std::fclose(f);
      return IoError("cannot truncate the torn last line of '" + path + "': " + std::strerror(err));
    }
  }
  return std::unique_ptr<ResultsWriter>(new ResultsWriter(path, f));
}

Status ResultsWriter::Append(const nlohmann::json& row) {
  const std::string line = row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
    return IoError("cannot write to '" + path_ + "': " + std::strerror(errno));
  ::fsync(fileno(f_));
  return Status::Ok();
}

StatusOr<std::map<RowKey, nlohmann::json>> ReadFinishedRows(
    const std::string& path, const nlohmann::json& run,
    const std::map<std::string, nlohmann::json>& methods) {
  std::map<RowKey, nlohmann::json> rows;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return rows;
  SKIPKV_ASSIGN_OR_RETURN(auto lines, ReadJsonl(path, {.tolerate_torn_tail = true}));
  for (auto& l : lines) {
    const std::string where = path + ":" + std::to_string(l.line);
    auto key = KeyOfRow(l.value);
    if (!key.ok()) return key.status().WithContext(where);
    const auto rit = l.value.find("run");
    if (rit == l.value.end()) return InvalidArgument(where + ": row has no 'run' configuration");
    const std::string d = FirstDifference(*rit, run);
    if (!d.empty())
      return InvalidArgument(where + ": written by a run with another configuration (field 'run." + d +
                             "': " + ((*rit).contains(d) ? (*rit)[d].dump() : std::string("...")) +
                             "); use another --output file or the same settings");
    auto mit = methods.find(key->method);
    if (mit != methods.end()) {
      const auto cit = l.value.find("method_config");
      const std::string md = cit == l.value.end() ? "(missing)" : FirstDifference(*cit, mit->second);
      if (!md.empty())
        return InvalidArgument(where + ": method '" + key->method +
                               "' ran with another configuration (field '" + md +
                               "'); give the changed method another name");
    }
    rows[*key] = std::move(l.value);
  }
  return rows;
}

StatusOr<std::vector<nlohmann::json>> MergeResults(const std::vector<std::string>& paths) {
  if (paths.empty()) return InvalidArgument("merge: no input files");
  std::map<RowKey, std::pair<nlohmann::json, std::string>> rows;
  nlohmann::json run;
  std::string run_from;
  std::map<std::pair<std::string, int64_t>, std::pair<nlohmann::json, std::string>> method_configs;
  for (const auto& path : paths) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return NotFound("merge: cannot open '" + path + "'");
    SKIPKV_ASSIGN_OR_RETURN(auto lines, ReadJsonl(path, {.tolerate_torn_tail = true}));
    for (auto& l : lines) {
      const std::string where = path + ":" + std::to_string(l.line);
      auto key = KeyOfRow(l.value);
      if (!key.ok()) return key.status().WithContext(where);
      const nlohmann::json r = l.value.value("run", nlohmann::json());
      if (run_from.empty()) {
        run = r;
        run_from = where;
      } else if (const std::string d = FirstDifference(r, run); !d.empty()) {
        return InvalidArgument("merge: " + where + " and " + run_from +
                               " come from different runs (field 'run." + d +
                               "' differs); refusing to mix configurations");
      }
      const nlohmann::json mc = l.value.value("method_config", nlohmann::json());
      auto [mit, fresh] = method_configs.try_emplace({key->method, key->budget}, mc, where);
      if (!fresh) {
        if (const std::string d = FirstDifference(mc, mit->second.first); !d.empty())
          return InvalidArgument("merge: method '" + key->method + "' budget " + std::to_string(key->budget) +
                                 " has different configurations in " + where + " and " + mit->second.second +
                                 " (field '" + d + "')");
      }
      auto [rit, added] = rows.try_emplace(*key, l.value, where);
      if (!added && rit->second.first.value("output", "") != l.value.value("output", ""))
        return InvalidArgument("merge: " + key->ToString() + " has different outputs in " + where + " and " +
                               rit->second.second);
    }
  }
  std::vector<nlohmann::json> out;
  for (auto& [k, v] : rows) out.push_back(std::move(v.first));
  std::stable_sort(out.begin(), out.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    auto key = [](const nlohmann::json& r) {
      return std::make_tuple(r.value("method", ""), r.value("budget", int64_t{0}),
                             r.value("line", int64_t{0}), r.value("sample", 0));
    };
    return key(a) < key(b);
  });
  return out;
}

std::vector<nlohmann::json> Summarize(const std::vector<nlohmann::json>& rows) {
  struct Acc {
    int64_t n = 0, correct_rows = 0;
    std::map<std::string, std::pair<double, int>> per_problem;  // sum of correct, samples
    double tokens = 0, tokens_correct = 0, tokens_wrong = 0;
    double request_ms = 0, tps_sum = 0;
    int64_t tps_n = 0;
    double kv_peak_max = 0, kv_peak_sum = 0, pad_sum = 0, eff_sum = 0, compressions_sum = 0;
    std::map<std::string, std::pair<double, int64_t>> diag;
  };
  std::map<std::pair<std::string, int64_t>, Acc> acc;
  for (const auto& r : rows) {
    Acc& a = acc[{r.value("method", ""), r.value("budget", int64_t{0})}];
    const bool ok = r.value("correct", false);
    const double toks = r.value("output_tokens", 0.0);
    ++a.n;
    a.correct_rows += ok;
    auto& pp = a.per_problem[r.value("problem", "")];
    pp.first += ok;
    pp.second += 1;
    a.tokens += toks;
    (ok ? a.tokens_correct : a.tokens_wrong) += toks;
    const auto t = r.value("timings", nlohmann::json::object());
    a.request_ms += t.value("total_ms", 0.0);
    if (t.value("decode_tokens_per_s", 0.0) > 0) {
      a.tps_sum += t.value("decode_tokens_per_s", 0.0);
      ++a.tps_n;
    }
    const auto kv = r.value("kv", nlohmann::json::object());
    const double peak = kv.value("peak_live_bytes", 0.0);
    a.kv_peak_max = std::max(a.kv_peak_max, peak);
    a.kv_peak_sum += peak;
    a.pad_sum += kv.value("pad_len", 0.0);
    a.eff_sum += kv.value("effective_budget", 0.0);
    a.compressions_sum += kv.value("compressions", 0.0);
    const nlohmann::json diagnostics = r.value("diagnostics", nlohmann::json::object());  // outlives the loop
    for (const auto& [name, v] : diagnostics.items()) {
      if (!v.is_number()) continue;
      auto& d = a.diag[name];
      d.first += v.get<double>();
      ++d.second;
    }
  }
  std::vector<nlohmann::json> out;
  for (const auto& [key, a] : acc) {
    double pass = 0;
    for (const auto& [p, v] : a.per_problem) pass += v.first / v.second;
    pass = a.per_problem.empty() ? 0 : 100.0 * pass / static_cast<double>(a.per_problem.size());
    const int64_t wrong = a.n - a.correct_rows;
    nlohmann::json diag = nlohmann::json::object();
    for (const auto& [name, v] : a.diag) diag[name] = v.first / static_cast<double>(v.second);
    out.push_back({{"method", key.first},
                   {"budget", key.second},
                   {"rows", a.n},
                   {"problems", a.per_problem.size()},
                   {"pass@1", pass},
                   {"correct_rows", a.correct_rows},
                   {"tokens_total", a.tokens},
                   {"tokens_mean", a.tokens / static_cast<double>(a.n)},
                   {"tokens_mean_correct", a.correct_rows ? a.tokens_correct / a.correct_rows : 0.0},
                   {"tokens_mean_incorrect", wrong ? a.tokens_wrong / wrong : 0.0},
                   {"request_time_s", a.request_ms / 1000.0},
                   {"decode_tokens_per_s_mean", a.tps_n ? a.tps_sum / a.tps_n : 0.0},
                   {"kv_peak_bytes_max", a.kv_peak_max},
                   {"kv_peak_bytes_mean", a.kv_peak_sum / a.n},
                   {"pad_len_mean", a.pad_sum / a.n},
                   {"effective_budget_mean", a.eff_sum / a.n},
                   {"compressions_mean", a.compressions_sum / a.n},
                   {"diagnostics_mean", diag}});
  }
  return out;
}

}  // namespace skipkv::eval
