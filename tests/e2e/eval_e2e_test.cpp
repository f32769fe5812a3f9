// End-to-end: `skipkv eval` on the embedded stories260K model. A small sweep
// (2 methods x 2 budgets x 6 problems) is killed midway with SIGKILL and
// rerun: the rerun resumes without recomputing the finished rows and ends
// with the same rows as an uninterrupted run; shards 1/2 and 2/2 merged equal
// the unsharded run; merge refuses rows of another configuration; a malformed
// dataset line stops the run before any generation, naming its line.
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

namespace {

const std::string kBinary = std::string(SKIPKV_BINARY_DIR) + "/apps/skipkv/skipkv";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Dir() {
  static const std::string dir = [] {
    const std::string d = ::testing::TempDir() + "/skipkv_eval_e2e_" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

struct CmdResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs skipkv with `args` (no shell), stdout/stderr to files.
CmdResult Skipkv(const std::vector<std::string>& args) {
  static int n = 0;
  const std::string out = Dir() + "/out" + std::to_string(n) + ".txt";
  const std::string err = Dir() + "/err" + std::to_string(n++) + ".txt";
  const std::string cmd = [&] {
    std::string c = kBinary;
    for (const auto& a : args) c += " '" + a + "'";
    return c + " >" + out + " 2>" + err;
  }();
  const int status = std::system(cmd.c_str());
  CmdResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadAll(out);
  r.err = ReadAll(err);
  return r;
}

// Six short problems the tiny story model cannot solve; the grading of its
// stories still runs on every row.
std::string Dataset() {
  const std::string path = Dir() + "/six.jsonl";
  std::ofstream f(path);
  const char* qs[] = {"Tom has 2 apples and gets 3 more. How many apples?", "What is 7 times 6?",
                      "Lily saw 5 birds. 2 flew away. How many are left?",  "What is 10 minus 4?",
                      "A cat has 4 legs. How many legs do 2 cats have?",    "What is 9 plus 9?"};
  const char* as[] = {"5", "42", "3", "6", "8", "18"};
  for (int i = 0; i < 6; ++i)
    f << nlohmann::json{{"q", qs[i]}, {"a", as[i]}, {"id", "p" + std::to_string(i)}}.dump() << "\n";
  return path;
}

std::vector<std::string> SweepArgs(const std::string& output, const std::vector<std::string>& extra = {},
                                   const std::string& max_gen = "48") {
  std::vector<std::string> a = {"eval",
                                "--dataset",
                                Dataset(),
                                "--question-field",
                                "q",
                                "--answer-field",
                                "a",
                                "--id-field",
                                "id",
                                "--methods",
                                "rkv,streaming",
                                "--budgets",
                                "40,56",
                                "--set",
                                "window=4",
                                "--set",
                                "interval=16",
                                "--max-gen",
                                max_gen,
                                "--batch-size",
                                "2",
                                "-t",
                                "1",
                                "-o",
                                output};
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
      {{"eval", "--dataset", "math500", "--methods", "seal", "--budgets", "64", "-o", out}, "steering issue"},
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

}  // namespace
