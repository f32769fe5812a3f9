// End-to-end: `skipkv eval` on the embedded stories260K model. A small sweep
// (2 methods x 2 budgets x 6 problems) is killed midway with SIGKILL and
// rerun: the rerun resumes without recomputing the finished rows and ends
// with the same rows as an uninterrupted run; shards 1/2 and 2/2 merged equal
// the unsharded run; merge refuses rows of another configuration; a malformed
// dataset line stops the run before any generation, naming its line. Rows are
// appended as each sample finishes, so a kill mid-batch keeps the finished
// ones. Padded batches with skipkv's grouping: the pads follow the sorted
// batches, budgets hold and FullKV equals its ragged run. The steering presets
// (seal, rkv+sentence+steering, skipkv with a vector) on the testbed's tiny
// qwen2 with a written control vector: coef 0 equals fullkv, a large coef
// changes rows where it fired and no other.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "steer/steering_vector.h"

#include "cli_runner.h"

namespace {

using skipkv::e2e::CmdResult;
using skipkv::e2e::kBinary;
using skipkv::e2e::ReadAll;

std::string Dir() {
  static const std::string dir = [] {
    const std::string d = ::testing::TempDir() + "/skipkv_eval_e2e_" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// Runs skipkv with `args` (no shell), stdout/stderr to files.
CmdResult Skipkv(const std::vector<std::string>& args) { return skipkv::e2e::RunSkipkv(Dir(), args); }

// Six short problems the tiny story model cannot solve; the grading of its
// stories still runs on every row.
std::string Dataset() { return skipkv::e2e::WriteSixProblems(Dir()); }

// `eval` on the six problems with `methods` at `budgets` (window 4, interval 16), then `rest`.
std::vector<std::string> SixProblemsEval(const std::string& methods, const std::string& budgets,
                                         const std::vector<std::string>& rest) {
  std::vector<std::string> a = {"eval",       "--dataset",      Dataset(),  "--question-field",
                                "q",          "--answer-field", "a",        "--id-field",
                                "id",         "--methods",      methods,    "--budgets",
                                budgets,      "--set",          "window=4", "--set",
                                "interval=16"};
  a.insert(a.end(), rest.begin(), rest.end());
  return a;
}

std::vector<std::string> SweepArgs(const std::string& output, const std::vector<std::string>& extra = {},
                                   const std::string& max_gen = "48") {
  auto a = SixProblemsEval("rkv,streaming", "40,56",
                           {"--max-gen", max_gen, "--batch-size", "2", "-t", "1", "-o", output});
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

using Key = std::tuple<std::string, std::string, int64_t, int>;

std::vector<nlohmann::json> Rows(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::istringstream ss(ReadAll(path));
  for (std::string line; std::getline(ss, line);) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));  // throws (fails the test) if torn
  }
  return rows;
}

// The rows by key, with the fields that must not depend on scheduling.
std::map<Key, nlohmann::json> Content(const std::vector<nlohmann::json>& rows) {
  std::map<Key, nlohmann::json> m;
  for (const auto& r : rows) {
    const Key k{r.at("problem"), r.at("method"), r.at("budget"), r.at("sample")};
    EXPECT_EQ(m.count(k), 0u) << "duplicate row " << r.at("problem") << " " << r.at("method");
    m[k] = {r.at("output"),        r.at("extracted"), r.at("correct"),
            r.at("output_tokens"), r.at("finish"),    r.at("kv").at("compressions"),
            r.at("method_config"), r.at("run"),       r.at("reference"),
            r.at("seed")};
  }
  return m;
}

TEST(EvalSweepE2eTest, KillResumeShardsAndMerge) {
  const std::string full = Dir() + "/full.jsonl";
  CmdResult r = Skipkv(SweepArgs(full));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto full_rows = Rows(full);
  ASSERT_EQ(full_rows.size(), 24u);
  const auto expected = Content(full_rows);
  ASSERT_EQ(expected.size(), 24u);
  for (const auto& row : full_rows) {
    EXPECT_GT(row.at("output_tokens").get<int>(), 0);
    EXPECT_EQ(row.at("run").at("model_digest"), "embedded:stories260K");
    EXPECT_EQ(row.at("method_config").at("window"), 4);
    EXPECT_EQ(row.at("method_config").at("budget"), row.at("budget"));
  }
  // Compressions happened (budget 40 < prompt + 48 generated tokens).
  int64_t compressions = 0;
  for (const auto& row : full_rows) compressions += row.at("kv").at("compressions").get<int64_t>();
  EXPECT_GT(compressions, 0);
  // The summary: one JSON line per (method, budget) on stdout.
  std::istringstream summary(r.out);
  int summary_lines = 0;
  for (std::string line; std::getline(summary, line);) {
    const auto s = nlohmann::json::parse(line);
    EXPECT_EQ(s.at("rows"), 6);
    ++summary_lines;
  }
  EXPECT_EQ(summary_lines, 4);

  // Kill a second run midway with a real signal, then rerun it.
  const std::string resumed = Dir() + "/resumed.jsonl";
  const auto args = SweepArgs(resumed);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::vector<char*> argv;
    std::string bin = kBinary;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  bool killed = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = ReadAll(resumed);
    if (std::count(text.begin(), text.end(), '\n') >= 2) {
      killed = ::kill(pid, SIGKILL) == 0;
      break;
    }
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) break;  // finished before we could kill it
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(killed && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the run was not killed midway";
  const std::string before = ReadAll(resumed);
  const size_t kept_lines = std::count(before.begin(), before.end(), '\n');
  ASSERT_GE(kept_lines, 2u);
  ASSERT_LT(kept_lines, 24u) << "the run finished before the kill";
  const std::string complete_prefix = before.substr(0, before.rfind('\n') + 1);

  CmdResult rerun = Skipkv(args);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
  const std::string after = ReadAll(resumed);
  // The finished rows were kept as they were, not recomputed.
  EXPECT_EQ(after.compare(0, complete_prefix.size(), complete_prefix), 0);
  const std::string generated =
      std::to_string(24 - kept_lines) + " rows generated, " + std::to_string(kept_lines) + " resumed";
  EXPECT_NE(rerun.err.find(generated), std::string::npos) << rerun.err;
  EXPECT_EQ(Content(Rows(resumed)), expected);
  // A third run has nothing left to do.
  CmdResult again = Skipkv(args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("0 rows generated, 24 resumed"), std::string::npos) << again.err;
  EXPECT_EQ(ReadAll(resumed), after);

  // Shards 1/2 and 2/2, merged, equal the unsharded run.
  const std::string s1 = Dir() + "/s1.jsonl", s2 = Dir() + "/s2.jsonl", merged = Dir() + "/merged.jsonl";
  ASSERT_EQ(Skipkv(SweepArgs(s1, {"--shard", "1/2"})).exit_code, 0);
  ASSERT_EQ(Skipkv(SweepArgs(s2, {"--shard", "2/2"})).exit_code, 0);
  EXPECT_EQ(Rows(s1).size(), 12u);
  EXPECT_EQ(Rows(s2).size(), 12u);
  CmdResult m = Skipkv({"eval", "merge", "-o", merged, s1, s2});
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_EQ(Content(Rows(merged)), expected);

  // A shard from another configuration (max_gen) is refused.
  const std::string other = Dir() + "/other.jsonl";
  ASSERT_EQ(Skipkv(SweepArgs(other, {"--shard", "2/2"}, "40")).exit_code, 0);
  CmdResult mixed = Skipkv({"eval", "merge", "-o", Dir() + "/mixed.jsonl", s1, other});
  EXPECT_NE(mixed.exit_code, 0);
  EXPECT_NE(mixed.err.find("run.max_gen"), std::string::npos) << mixed.err;
  // And resuming a file with other settings is refused too.
  CmdResult wrong = Skipkv(SweepArgs(s1, {}, "40"));
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.err.find("run.max_gen"), std::string::npos) << wrong.err;
}

TEST(EvalSweepE2eTest, MalformedDatasetLineStopsBeforeGeneration) {
  const std::string data = Dir() + "/bad.jsonl";
  std::ofstream(data) << "{\"question\": \"1+1?\", \"answer\": \"2\"}\n"
                      << "{\"question\": \"2+2?\", \"answer\": \"4\"}\n"
                      << "{\"question\": \"3+3?\"}\n";
  const std::string out = Dir() + "/bad_rows.jsonl";
  CmdResult r = Skipkv({"eval", "--dataset", data, "--methods", "fullkv", "--max-gen", "4", "-o", out});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(data + ":3: field 'answer' is missing"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  CmdResult skip =
      Skipkv({"eval", "--dataset", data, "--methods", "fullkv", "--max-gen", "4", "--skip-bad", "-o", out});
  ASSERT_EQ(skip.exit_code, 0) << skip.err;
  EXPECT_NE(skip.err.find("skipped " + data + ":3"), std::string::npos) << skip.err;
  EXPECT_EQ(Rows(out).size(), 2u);
}

TEST(EvalSweepE2eTest, BadOptionsAreNamed) {
  const std::string out = Dir() + "/never.jsonl";
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"eval", "--dataset", "math5000", "--methods", "rkv", "--budgets", "64", "-o", out}, "'math5000'"},
      {{"eval", "--dataset", "math500", "--methods", "bogus", "--budgets", "64", "-o", out},
       "unknown method 'bogus'"},
      {{"eval", "--dataset", "math500", "--methods", "seal", "--budgets", "64", "-o", out},
       "method 'seal' (preset seal) steers: give a steering vector with --steer FILE"},
      {{"eval", "--dataset", "math500", "--methods", "rkv+sentence+steering", "--budgets", "64", "-o", out},
       "(preset rkv+sentence+steering) steers"},
      {{"eval", "--dataset", "math500", "--methods", "fullkv", "--steer-coef", "2", "-o", out},
       "--steer-coef needs --steer FILE"},
      {{"eval", "--dataset", "math500", "--methods", "seal", "--steer", "/nonexistent.gguf", "--max-gen", "4",
        "-o", out},
       "/nonexistent.gguf"},
      {{"eval", "--dataset", "math500", "--methods", "rkv", "-o", out}, "--budgets is required"},
      {{"eval", "--dataset", "math500", "--methods", "rkv", "--budgets", "6x", "-o", out},
       "'6x' is not an integer"},
      {{"eval", "--dataset", "math500", "--methods", "rkv", "--budgets", "64", "--set", "bogus=1", "-o", out},
       "unknown field 'bogus'"},
      {{"eval", "--dataset", "math500", "--methods", "rkv", "--budgets", "64", "--set",
        "rkv.sim_threshold=0.9", "-o", out},
       "has no field 'sim_threshold'"},
      {{"eval", "--dataset", "math500", "--methods", "rkv", "--budgets", "64", "--shard", "3/2", "-o", out},
       "--shard '3/2'"},
      {{"eval", "--dataset", "math500", "--methods", "rkv", "--budgets", "64"}, "--output is required"},
  };
  for (const auto& c : cases) {
    CmdResult r = Skipkv(c.args);
    EXPECT_NE(r.exit_code, 0) << c.message;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << "expected '" << c.message << "' in: " << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(EvalGradeE2eTest, GradesAFileOfPairs) {
  const std::string path = Dir() + "/pairs.jsonl";
  std::ofstream(path) << "{\"prediction\": \"so \\\\boxed{\\\\frac{1}{2}}\", \"reference\": \"0.5\"}\n"
                      << "{\"prediction\": \"The answer is 7\", \"reference\": \"#### 8\"}\n";
  CmdResult r = Skipkv({"eval", "grade", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream ss(r.out);
  std::string l1, l2;
  std::getline(ss, l1);
  std::getline(ss, l2);
  const auto a = nlohmann::json::parse(l1), b = nlohmann::json::parse(l2);
  EXPECT_EQ(a.at("equal"), true);
  EXPECT_EQ(a.at("extracted"), "\\frac{1}{2}");
  EXPECT_EQ(b.at("equal"), false);
  EXPECT_EQ(b.at("reference"), "8");
  std::ofstream(path) << "{\"prediction\": \"x\"}\n";
  CmdResult bad = Skipkv({"eval", "grade", path});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find(path + ":1: field 'reference' is missing"), std::string::npos) << bad.err;
}

std::map<std::string, std::map<std::string, nlohmann::json>> ByMethodAndProblem(
    const std::vector<nlohmann::json>& rows) {
  std::map<std::string, std::map<std::string, nlohmann::json>> m;
  for (const auto& r : rows) m[r.at("method").get<std::string>()][r.at("problem").get<std::string>()] = r;
  return m;
}

// Six problems, the first one about 150 tokens longer than the others: with
// 400 tokens allowed, every sample stops at the model's 512-token context,
// the first one some 150 decode steps before the rest.
std::string StaggeredDataset() {
  const std::string path = Dir() + "/staggered.jsonl";
  std::ofstream f(path);
  std::string long_q;
  for (int i = 0; i < 12; ++i) long_q += "Tom has 2 apples and gets 3 more. ";
  const std::string qs[] = {long_q + "How many apples?", "What is 7 times 6?", "What is 10 minus 4?",
                            "What is 9 plus 9?",         "What is 3 plus 4?",  "What is 8 minus 2?"};
  for (int i = 0; i < 6; ++i)
    f << nlohmann::json{{"q", qs[i]}, {"a", "1"}, {"id", "p" + std::to_string(i)}}.dump() << "\n";
  return path;
}

// A kill right after the first row of a batch of six appears: with rows
// appended per finished sample, the rows of the batch's early finishers are
// on disk while the rest still generate, and the rerun keeps them.
TEST(EvalSweepE2eTest, KillMidBatchKeepsFinishedRows) {
  std::vector<std::string> base = {
      "eval", "--dataset", StaggeredDataset(), "--question-field", "q",   "--answer-field", "a", "--id-field",
      "id",   "--methods", "fullkv",           "--max-gen",        "400", "--batch-size",   "6", "-t",
      "1"};
  const std::string full = Dir() + "/midbatch_full.jsonl";
  auto args = base;
  args.insert(args.end(), {"-o", full});
  CmdResult r = Skipkv(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto full_rows = Rows(full);
  ASSERT_EQ(full_rows.size(), 6u);
  // The batch's samples end at different steps (end of story vs the limit),
  // and the file lists them in the order they finished.
  std::vector<int64_t> lengths;
  for (const auto& row : full_rows) lengths.push_back(row.at("output_tokens").get<int64_t>());
  ASSERT_LT(lengths.front() + 100, *std::max_element(lengths.begin(), lengths.end()))
      << "the samples ran about equally long: the test needs staggered finishes";
  EXPECT_EQ(full_rows.front().at("problem"), "p0");
  EXPECT_TRUE(std::is_sorted(lengths.begin(), lengths.end()));
  for (const auto& row : full_rows) EXPECT_EQ(row.at("timings").at("batch_requests"), 6);

  const std::string killed = Dir() + "/midbatch.jsonl";
  args = base;
  args.insert(args.end(), {"-o", killed});
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::vector<char*> argv;
    std::string bin = kBinary;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  bool was_killed = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = ReadAll(killed);
    if (std::count(text.begin(), text.end(), '\n') >= 1) {
      was_killed = ::kill(pid, SIGKILL) == 0;
      break;
    }
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(was_killed && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the run was not killed midway";
  const auto kept = Rows(killed);
  ASSERT_GE(kept.size(), 1u);
  ASSERT_LT(kept.size(), 6u) << "the whole batch was on disk before the kill";
  // The kept rows are the early finishers of the one batch, as in the full run.
  for (size_t i = 0; i < kept.size(); ++i) {
    EXPECT_EQ(kept[i].at("problem"), full_rows[i].at("problem"));
    EXPECT_EQ(kept[i].at("output"), full_rows[i].at("output"));
  }
  CmdResult rerun = Skipkv(args);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
  const std::string generated =
      std::to_string(6 - kept.size()) + " rows generated, " + std::to_string(kept.size()) + " resumed";
  EXPECT_NE(rerun.err.find(generated), std::string::npos) << rerun.err;
  EXPECT_EQ(Content(Rows(killed)), Content(full_rows));
}

// Padded batches (paper-faithful pads) with and without skipkv's grouping on
// the embedded model: every row complete; the pad lengths are those of the
// batches of three in dataset order (rkv+sentence) or sorted by prompt length
// (skipkv); the effective budget is B - pad; the cache stays within
// max(prompt + pad, B + interval); FullKV's greedy rows equal the ragged run's.
TEST(EvalSweepE2eTest, PaddedSkipkvGrouping) {
  auto args = [&](const std::string& out, const std::string& methods, const std::string& pad) {
    return std::vector<std::string>{"eval",
                                    "--dataset",
                                    Dataset(),
                                    "--question-field",
                                    "q",
                                    "--answer-field",
                                    "a",
                                    "--id-field",
                                    "id",
                                    "--methods",
                                    methods,
                                    "--budgets",
                                    "40",
                                    "--set",
                                    "window=4",
                                    "--set",
                                    "interval=16",
                                    "--max-gen",
                                    "48",
                                    "--batch-size",
                                    "3",
                                    "--pad-policy",
                                    pad,
                                    "-t",
                                    "1",
                                    "-o",
                                    out};
  };
  const std::string ragged = Dir() + "/ragged_full.jsonl", padded = Dir() + "/padded.jsonl";
  CmdResult r = Skipkv(args(ragged, "fullkv", "ragged"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  CmdResult p = Skipkv(args(padded, "fullkv,rkv+sentence,skipkv", "padded"));
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const auto rows = Rows(padded);
  ASSERT_EQ(rows.size(), 18u);
  const auto by = ByMethodAndProblem(rows);
  const auto ragged_by = ByMethodAndProblem(Rows(ragged));
  ASSERT_EQ(by.size(), 3u);
  for (const auto& row : rows) {
    EXPECT_EQ(row.at("run").at("pad_policy"), "padded");
    EXPECT_GT(row.at("output_tokens").get<int>(), 0);
    EXPECT_FALSE(row.at("finish").get<std::string>().empty());
  }
  // FullKV: pads are masked, so greedy decoding gives the ragged tokens.
  for (const auto& [problem, row] : by.at("fullkv")) {
    EXPECT_EQ(row.at("output"), ragged_by.at("fullkv").at(problem).at("output")) << problem;
    EXPECT_EQ(row.at("output_tokens"), ragged_by.at("fullkv").at(problem).at("output_tokens")) << problem;
  }
  // The expected pads: batches of three, in dataset order or sorted by length.
  std::vector<std::pair<int64_t, std::string>> lens;  // (prompt tokens, problem) in dataset order
  for (int i = 0; i < 6; ++i) {
    const std::string id = "p" + std::to_string(i);
    lens.emplace_back(by.at("skipkv").at(id).at("prompt_tokens").get<int64_t>(), id);
  }
  auto expected_pads = [](std::vector<std::pair<int64_t, std::string>> order) {
    std::map<std::string, int64_t> pads;
    for (size_t b = 0; b < order.size(); b += 3) {
      int64_t longest = 0;
      for (size_t k = b; k < b + 3; ++k) longest = std::max(longest, order[k].first);
      for (size_t k = b; k < b + 3; ++k) pads[order[k].second] = longest - order[k].first;
    }
    return pads;
  };
  auto sorted = lens;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  const auto pads_plain = expected_pads(lens), pads_grouped = expected_pads(sorted);
  int64_t total_plain = 0, total_grouped = 0;
  for (const auto& [method, pads] : {std::make_pair(std::string("rkv+sentence"), pads_plain),
                                     std::make_pair(std::string("skipkv"), pads_grouped)}) {
    for (const auto& [problem, row] : by.at(method)) {
      SCOPED_TRACE(method + " " + problem);
      const auto& kv = row.at("kv");
      EXPECT_EQ(kv.at("pad_len").get<int64_t>(), pads.at(problem));
      (method == "skipkv" ? total_grouped : total_plain) += kv.at("pad_len").get<int64_t>();
      EXPECT_GT(kv.at("compressions").get<int64_t>(), 0);
      EXPECT_EQ(kv.at("effective_budget").get<int64_t>(), 40 - pads.at(problem));
      const int64_t stream = row.at("prompt_tokens").get<int64_t>() + pads.at(problem);
      EXPECT_LE(kv.at("peak_slots").get<int64_t>(), std::max<int64_t>(stream, 40 + 16));
      EXPECT_LE(kv.at("final_slots").get<int64_t>(), 40 + 16);
      EXPECT_EQ(row.at("method_config").at("grouping"), method == "skipkv");
    }
  }
  EXPECT_LE(total_grouped, total_plain);
  EXPECT_GT(total_plain, 0);
}

// The authors' presets in one sweep (issue 38 rows 2, 3): rkv-authors sends
// R-KV's instruction raw, skipkv-authors SEAL's in the chat template, rkv the
// sweep's chat prompt; each row's limit is --max-gen minus its prompt for the
// presets that count it; an explicit --prompt gives every method the same.
TEST(EvalSweepE2eTest, AuthorsPresetsPromptPerMethod) {
  auto args = [&](const std::string& out, const std::vector<std::string>& extra) {
    auto a = SixProblemsEval("rkv-authors,skipkv-authors,rkv", "40",
                             {"--chat-template", "chatml", "--max-gen", "200", "--batch-size", "3", "-t", "1",
                              "-q", "-o", out});
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const std::string own = Dir() + "/authors_own.jsonl", given = Dir() + "/authors_given.jsonl";
  CmdResult r = Skipkv(args(own, {}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto by = ByMethodAndProblem(Rows(own));
  ASSERT_EQ(by.size(), 3u);
  for (const auto& [problem, row] : by.at("rkv")) {
    SCOPED_TRACE(problem);
    const auto& ra = by.at("rkv-authors").at(problem);
    const auto& sa = by.at("skipkv-authors").at(problem);
    EXPECT_EQ(row.at("run").at("prompt"), "chat");
    EXPECT_FALSE(row.at("method_config").contains("prompt"));
    EXPECT_EQ(ra.at("method_config").at("prompt"), "raw");
    EXPECT_EQ(sa.at("method_config").at("prompt"), "seal-chat");
    // Three prompts: ChatML's turn markers make the chat prompt the longest.
    const int64_t chat = row.at("prompt_tokens"), raw = ra.at("prompt_tokens"), seal = sa.at("prompt_tokens");
    EXPECT_GT(chat, raw);
    EXPECT_NE(raw, seal);
    EXPECT_EQ(row.at("max_new_tokens"), 200);
    EXPECT_EQ(ra.at("max_new_tokens").get<int64_t>(), 200 - raw);
    EXPECT_EQ(sa.at("max_new_tokens").get<int64_t>(), 200 - seal);
    EXPECT_LE(ra.at("output_tokens").get<int64_t>(), 200 - raw);
  }
  CmdResult g = Skipkv(args(given, {"--prompt", "chat"}));
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const auto gby = ByMethodAndProblem(Rows(given));
  for (const auto& [problem, row] : gby.at("rkv")) {
    for (const char* m : {"rkv-authors", "skipkv-authors"}) {
      const auto& a = gby.at(m).at(problem);
      EXPECT_EQ(a.at("method_config").at("prompt"), "chat") << m;
      EXPECT_EQ(a.at("prompt_tokens"), row.at("prompt_tokens")) << m;
    }
  }
  CmdResult help = Skipkv({"eval", "--help"});
  EXPECT_NE(help.out.find("wins over every preset's"), std::string::npos) << help.out;
}

// ---- Steering presets ---------------------------------------------------------------

// The testbed's tiny qwen2 (tests/data/testbed_tiny: 2 layers of width 32,
// its own 384-id byte-level BPE, whose one SPLIT token is ".\n\n"). Sampled
// at temperature 1 it emits that token now and then.
const std::string kSteerModel = std::string(SKIPKV_TEST_DATA_DIR) + "/testbed_tiny";

// direction.1 (the output of the last layer: the only direction a 2-layer
// model has in llama.cpp's layout) of width 32, entries in [-10, 10].
const std::string& SteerVector() {
  static const std::string path = [] {
    const std::string out = Dir() + "/steer_vector.gguf";
    skipkv::ControlVector cv;
    cv.width = 32;
    uint64_t x = 99;
    std::vector<float> v(32);
    for (float& f : v) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      f = static_cast<float>(static_cast<int64_t>(x >> 40) % 2001 - 1000) / 100.0f;
    }
    cv.directions[1] = v;
    const auto st = skipkv::WriteControlVector(out, cv, 2);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }();
  return path;
}

std::vector<std::string> SteerArgs(const std::string& output, const std::string& methods,
                                   const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a = {"eval",        "-m",
                                kSteerModel,   "--dataset",
                                Dataset(),     "--question-field",
                                "q",           "--answer-field",
                                "a",           "--id-field",
                                "id",          "--prompt",
                                "raw",         "--methods",
                                methods,       "--max-gen",
                                "300",         "--temp",
                                "1",           "--seed",
                                "3",           "--batch-size",
                                "6",           "-t",
                                "1",           "--steer",
                                SteerVector(), "--steer-layer",
                                "1",           "-o",
                                output};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(EvalSteeringE2eTest, SealFiresOnSplitTokensAndCoefZeroIsFullkv) {
  const std::string out = Dir() + "/seal.jsonl";
  CmdResult r =
      Skipkv(SteerArgs(out, "fullkv,seal0=seal,seal", {"--steer-coef", "40", "--set", "seal0.steer_coef=0"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = Rows(out);
  ASSERT_EQ(rows.size(), 18u);
  const auto by = ByMethodAndProblem(rows);
  double fired = 0;
  int changed = 0;
  for (int i = 0; i < 6; ++i) {
    const std::string id = "p" + std::to_string(i);
    SCOPED_TRACE(id);
    const auto& full = by.at("fullkv").at(id);
    const auto& zero = by.at("seal0").at(id);
    const auto& seal = by.at("seal").at(id);
    EXPECT_FALSE(full.at("diagnostics").contains("steer.events"));
    EXPECT_EQ(zero.at("method_config").at("steer.mode"), "fixed");
    EXPECT_EQ(zero.at("method_config").at("steer.coef"), 0);
    EXPECT_EQ(seal.at("method_config").at("steer.coef"), 40);
    EXPECT_EQ(seal.at("method_config").at("policy"), "full");
    EXPECT_EQ(seal.at("diagnostics").at("steer.alpha"), 40);
    // Coefficient 0 adds nothing: the sampled tokens are fullkv's.
    EXPECT_EQ(zero.at("output"), full.at("output"));
    const double events = zero.at("diagnostics").at("steer.events").get<double>();
    fired += events;
    // Where the hook fired (a ".\n\n" was fed), coefficient 40 changes the
    // steered position's K/V and logits (with near-uniform logits a sample
    // may still come out the same, so this is counted, not required per
    // row); where it never fired the row is fullkv's.
    if (events > 0) {
      changed += seal.at("output") != full.at("output");
    } else {
      EXPECT_EQ(seal.at("output"), full.at("output"));
      EXPECT_EQ(seal.at("diagnostics").at("steer.events"), 0);
    }
  }
  EXPECT_GT(fired, 0) << "no SPLIT token was fed: the test needs another seed";
  EXPECT_GT(changed, 0) << "steering at coefficient 40 changed no output";
  // The vector's content is part of the run's fingerprint.
  EXPECT_TRUE(rows[0].at("run").at("steer_digests").contains(SteerVector())) << rows[0].at("run").dump();
}

TEST(EvalSteeringE2eTest, AdaptivePresetsAndShapeErrors) {
  const std::string out = Dir() + "/adaptive.jsonl";
  CmdResult r = Skipkv(SteerArgs(out, "rkv+sentence+steering,skipkv,rkv+sentence",
                                 {"--budgets", "64", "--set", "window=4", "--set", "interval=16",
                                  "--steer-alpha0", "1.25", "--steer-gamma", "0.5"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto by = ByMethodAndProblem(Rows(out));
  ASSERT_EQ(by.size(), 3u);
  for (const std::string m : {"rkv+sentence+steering", "skipkv"}) {
    for (const auto& [problem, row] : by.at(m)) {
      SCOPED_TRACE(m + " " + problem);
      EXPECT_EQ(row.at("method_config").at("steer.mode"), "adaptive");
      const auto& d = row.at("diagnostics");
      ASSERT_TRUE(d.contains("steer.nonexec")) << d.dump();
      EXPECT_NEAR(d.at("steer.alpha").get<double>(), 1.25 + 0.5 * d.at("steer.nonexec").get<double>(), 1e-5);
    }
  }
  for (const auto& [problem, row] : by.at("rkv+sentence")) {
    EXPECT_FALSE(row.at("diagnostics").contains("steer.events")) << problem;
    EXPECT_FALSE(row.at("method_config").contains("steer.mode")) << problem;
  }
  EXPECT_EQ(by.at("skipkv").begin()->second.at("method_config").at("grouping"), true);

  // A vector for another model is refused before anything is written,
  // naming both shapes; so is a direction the model does not have.
  const std::string never = Dir() + "/never_steer.jsonl";
  CmdResult wrong =
      Skipkv({"eval", "--dataset", Dataset(), "--question-field", "q", "--answer-field", "a", "--methods",
              "seal", "--steer", SteerVector(), "--steer-layer", "1", "--max-gen", "4", "-o", never});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.err.find("width 32"), std::string::npos) << wrong.err;
  EXPECT_NE(wrong.err.find("the model has"), std::string::npos) << wrong.err;
  EXPECT_FALSE(std::filesystem::exists(never));
  CmdResult layer = Skipkv(SteerArgs(never, "seal", {"--set", "seal.steer_layer=2"}));
  EXPECT_NE(layer.exit_code, 0);
  EXPECT_NE(layer.err.find("[0, 1]"), std::string::npos) << layer.err;
  EXPECT_FALSE(std::filesystem::exists(never));
}

}  // namespace
