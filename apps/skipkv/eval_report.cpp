// `skipkv eval report DIR`: reads the sweep result files in DIR (every
// *.jsonl whose first line is a result row), writes DIR/summary.md and the
// tidy DIR/report_data.json (src/eval/report.h), then runs the plotting step
// tools/report/make_report.py (matplotlib) which writes DIR/report.html and,
// when an eviction trace is given, DIR/eviction.html — both self-contained.
// Optional inputs, by default looked up in DIR:
//   throughput.json        `skipkv bench throughput --json` output
//   eviction_trace.jsonl   `skipkv run --kv-trace` of one generation, with
//   eviction_run.json      its `skipkv run --json` result line(s)
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/jsonl.h"
#include "eval/report.h"
#include "eval_subcommands.h"

#ifndef SKIPKV_REPORT_SCRIPT
#define SKIPKV_REPORT_SCRIPT "tools/report/make_report.py"
#endif

namespace skipkv::cli {
namespace {

namespace fs = std::filesystem;

// The plotting script: the installed copy (<prefix>/share/skipkv/tools/,
// beside the installed data; cmake --install puts it there), else the
// source tree's (an uninstalled build).
std::string DefaultReportScript() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share/skipkv/tools/make_report.py";
    if (fs::is_regular_file(installed, ec)) return installed.string();
  }
  return SKIPKV_REPORT_SCRIPT;
}

struct ReportOptions {
  std::string dir;
  std::string out;  // default: dir
  std::string throughput;
  std::string trace, trace_run;
  int layer = 0, head = 0;
  int64_t seq = 0;
  std::string python;
  std::string script = DefaultReportScript();
  bool no_html = false;
};

int Fail(const std::string& msg) {
  std::fprintf(stderr, "skipkv eval report: %s\n", msg.c_str());
  return 1;
}

// Whether the first non-blank line of a .jsonl file is a result row.
bool IsResultsFile(const fs::path& p) {
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto j = eval::ParseJsonText(line, p.string());
    // Too deep to parse (issue 43, InvalidArgument): taken, so that ReportSection's reader names
    // its file and line. Not JSON (CorruptData): not a results file.
    if (!j.ok()) return j.status().code() == StatusCode::kInvalidArgument;
    return j->is_object() && j->contains("problem") && j->contains("method") && j->contains("run");
  }
  return false;
}

std::string DefaultPython() { return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3"; }

// Runs argv (no shell); the exit code, or -1 when it could not start.
int RunProcess(const std::vector<std::string>& argv) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "skipkv eval report: cannot run '%s'\n", args[0]);
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int RunReport(const ReportOptions& o) {
  std::error_code ec;
  if (!fs::is_directory(o.dir, ec)) return Fail("'" + o.dir + "' is not a directory");
  const fs::path dir(o.dir), out(o.out.empty() ? o.dir : o.out);
  fs::create_directories(out, ec);
  if (ec) return Fail("cannot create '" + out.string() + "': " + ec.message());

  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".jsonl" && IsResultsFile(e.path()))
      files.push_back(e.path());
  if (ec) return Fail("cannot list '" + o.dir + "': " + ec.message());
  std::sort(files.begin(), files.end());
  if (files.empty()) return Fail("no result files (*.jsonl of `skipkv eval` rows) in '" + o.dir + "'");

  nlohmann::json report = {{"schema", "skipkv-report/1"}, {"sections", nlohmann::json::array()}};
  for (const auto& f : files) {
    auto sec = eval::ReportSection(f.string());
    if (!sec.ok()) return Fail(sec.status().message());
    report["sections"].push_back(std::move(*sec));
  }

  const std::string throughput =
      !o.throughput.empty() ? o.throughput
                            : (fs::exists(dir / "throughput.json") ? (dir / "throughput.json").string() : "");
  report["throughput"] = nullptr;
  if (!throughput.empty()) {
    std::ifstream in(throughput, std::ios::binary);
    if (!in) return Fail("cannot open throughput file '" + throughput + "'");
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    auto parsed = eval::ParseJsonText(text, throughput);
    if (!parsed.ok() && parsed.status().code() == StatusCode::kInvalidArgument)
      return Fail(parsed.status().message());
    nlohmann::json j = parsed.ok() ? std::move(*parsed) : nlohmann::json();
    if (!j.is_object() || !j.contains("methods") || !j.at("methods").is_array())
      return Fail("'" + throughput + "' is not `skipkv bench throughput --json` output (no 'methods' array)");
    report["throughput"] = std::move(j);
  }

  std::string trace = o.trace, trace_run = o.trace_run;
  if (trace.empty() && fs::exists(dir / "eviction_trace.jsonl"))
    trace = (dir / "eviction_trace.jsonl").string();
  if (trace_run.empty() && fs::exists(dir / "eviction_run.json"))
    trace_run = (dir / "eviction_run.json").string();
  report["eviction"] = nullptr;
  if (!trace.empty() || !trace_run.empty()) {
    if (trace.empty() || trace_run.empty())
      return Fail(
          "the eviction view needs both --trace (the --kv-trace file) and --trace-run (its run --json line)");
    auto ev = eval::EvictionViewData(trace, trace_run, o.layer, o.head, o.seq);
    if (!ev.ok()) return Fail(ev.status().message());
    report["eviction"] = std::move(*ev);
  }

  const fs::path md = out / "summary.md", data = out / "report_data.json";
  {
    std::ofstream f(md, std::ios::binary | std::ios::trunc);
    f << eval::SummaryMarkdown(report);
    if (!f) return Fail("cannot write '" + md.string() + "'");
    std::ofstream d(data, std::ios::binary | std::ios::trunc);
    d << report.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!d) return Fail("cannot write '" + data.string() + "'");
  }
  std::fprintf(stderr, "skipkv eval report: %zu result file(s) -> %s, %s\n", files.size(), md.c_str(),
               data.c_str());
  if (o.no_html) return 0;
  const std::string python = o.python.empty() ? DefaultPython() : o.python;
  const int rc = RunProcess({python, o.script, data.string(), out.string()});
  if (rc != 0) {
    return Fail("the plotting step '" + python + " " + o.script + "' failed (exit " + std::to_string(rc) +
                "); it needs Debian's python3-matplotlib (scripts/setup.sh). summary.md and report_data.json "
                "are written; --no-html skips the plots");
  }
  std::fprintf(stderr, "skipkv eval report: %s%s\n", (out / "report.html").c_str(),
               report["eviction"].is_null() ? "" : (", " + (out / "eviction.html").string()).c_str());
  return 0;
}

}  // namespace

EvalSubcommand AddEvalReport(CLI::App& eval) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* r = eval.add_subcommand(
      "report", "summary.md, report.html (plots) and the eviction view of a sweep directory");
  r->add_option("dir", o->dir, "Directory of result files (*.jsonl rows of skipkv eval)")->required();
  r->add_option("--out", o->out, "Where to write the report (default: DIR)");
  r->add_option("--throughput", o->throughput,
                "`skipkv bench throughput --json` output (default: DIR/throughput.json)");
  r->add_option("--trace", o->trace, "`skipkv run --kv-trace` file (default: DIR/eviction_trace.jsonl)");
  r->add_option("--trace-run", o->trace_run,
                "Its `skipkv run --json` output (default: DIR/eviction_run.json)");
  r->add_option("--layer", o->layer, "Eviction view: layer")->capture_default_str();
  r->add_option("--head", o->head, "Eviction view: KV head")->capture_default_str();
  r->add_option("--seq", o->seq, "Eviction view: request index of the run")->capture_default_str();
  r->add_option("--python", o->python, "Python with matplotlib (default: /usr/bin/python3, Debian's)");
  r->add_option("--script", o->script, "The plotting script")->capture_default_str();
  r->add_flag("--no-html", o->no_html, "Write summary.md and report_data.json only");
  return {r, [o] { return RunReport(*o); }};
}

}  // namespace skipkv::cli
