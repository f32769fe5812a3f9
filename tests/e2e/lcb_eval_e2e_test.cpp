// End to end: `skipkv eval --dataset lcb.jsonl --methods rkv,skipkv
// --budgets 512` on a random-weight tiny qwen2 (make-model) over three
// LiveCodeBench rows (stdin and functional, private tests in LiveCodeBench's
// base64 + zlib + pickle form). Every row is graded in the sandbox (the
// random model writes no program, so every answer is wrong and every row
// says why); the run is killed after its first rows and resumes without
// redoing them; `eval report` shows the dataset; `eval grade` grades code
// lines (a correct and a wrong prediction).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_runner.h"

namespace {

using skipkv::e2e::CmdResult;
using skipkv::e2e::kBinary;
using skipkv::e2e::ReadAll;

const std::string& Dir() {
  static const std::string d = skipkv::e2e::TestDir("lcb_eval");
  return d;
}

nlohmann::json Row(const std::string& id, const std::string& content, const std::string& starter,
                   const std::string& pub, const std::string& priv, const std::string& meta) {
  return {{"question_title", id},   {"question_content", content}, {"platform", "atcoder"},
          {"question_id", id},      {"contest_id", "c"},           {"contest_date", "2023-05-01T00:00:00"},
          {"starter_code", starter}, {"difficulty", "easy"},       {"public_test_cases", pub},
          {"private_test_cases", priv}, {"metadata", meta}};
}

std::vector<nlohmann::json> Rows() {
  // Private tests as LiveCodeBench stores them (CPython: base64(zlib(pickle.dumps(json.dumps(tests))))).
  const std::string add_priv =
      "eJxrYJlaxQABPWXR1UqZeQWlJUpWCkqmCuYxeUo6Ckr5pSVQIUMjiEhJanFJSWVBKkisuCQlM0+pVkcBSauuoYIhul4DnFpjp+gBALEgJsg=";
  const std::string sum_priv = "eJxrYJnqxAABPXbR1UqZeQWlJUpWCkrRJjoKprFKOgpK+aUlUDFLELcktbikpLIgFSSQVpqXXJKZn5eYo1QbO0UPAAA1FhI=";
  return {
      Row("add", "Read A and B and print A+B.", "", R"([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}])",
          add_priv, "{}"),
      Row("sum", "Return the sum of nums.", "class Solution:\n    def total(self, nums: List[int]) -> int:\n        ",
          R"([{"input": "[1, 2]", "output": "3", "testtype": "functional"}])", sum_priv, R"({"func_name": "total"})"),
      Row("echo", "Print the input line.", "", R"([{"input": "hi\n", "output": "hi\n", "testtype": "stdin"}])", "",
          "{}"),
  };
}

std::string WriteJsonl(const std::string& name, const std::vector<nlohmann::json>& rows) {
  const std::string path = Dir() + "/" + name;
  std::ofstream f(path);
  for (const auto& r : rows) f << r.dump() << "\n";
  return path;
}

std::vector<nlohmann::json> ReadRows(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) rows.push_back(nlohmann::json::parse(l));
  return rows;
}

TEST(LcbEvalE2e, SweepKillResumeReportAndGrade) {
  const std::string model = Dir() + "/tiny.gguf";
  CmdResult made = skipkv::e2e::RunSkipkv(Dir(), {"make-model", "--preset", "tiny-qwen2", "--tokenizer",
                               std::string(SKIPKV_DEPS_DIR) + "/npm/tokenizer-qwen3/models/tokenizer.json", "-q",
                               "-o", model});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::string data = WriteJsonl("lcb.jsonl", Rows());
  const std::string out_dir = Dir() + "/results";
  std::filesystem::create_directories(out_dir);
  const std::string rows_path = out_dir + "/rows.jsonl";
  const std::vector<std::string> args = {"eval", "-m", model, "--dataset", data, "--methods", "rkv,skipkv",
                                         "--budgets", "512", "--max-gen", "48", "--batch-size", "1",
                                         "--grade-timeout", "3", "-t", "1", "-o", rows_path};
  // Killed after its first row.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::vector<std::string> copy = args;
    std::string bin = kBinary;
    std::vector<char*> argv = {bin.data()};
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  bool killed = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = ReadAll(rows_path);
    if (std::count(text.begin(), text.end(), '\n') >= 1) {
      killed = ::kill(pid, SIGKILL) == 0;
      break;
    }
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(killed && WIFSIGNALED(status)) << "the run was not killed midway";
  const size_t kept = ReadRows(rows_path).size();
  ASSERT_GE(kept, 1u);
  ASSERT_LT(kept, 6u) << "the run finished before the kill";

  CmdResult resumed = skipkv::e2e::RunSkipkv(Dir(), args);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find(std::to_string(kept) + " resumed"), std::string::npos) << resumed.err;
  const auto rows = ReadRows(rows_path);
  ASSERT_EQ(rows.size(), 6u);  // 3 problems x (rkv@512, skipkv@512)
  std::set<std::string> keys;
  for (const auto& r : rows) {
    keys.insert(r["problem"].get<std::string>() + "/" + r["method"].get<std::string>());
    EXPECT_EQ(r["dataset"], "lcb");
    EXPECT_EQ(r["budget"], 512);
    EXPECT_FALSE(r["correct"].get<bool>());  // random weights write no program
    const auto& g = r["code_grade"];
    EXPECT_FALSE(g["equal"].get<bool>());
    const int tests = r["problem"] == "echo" ? 1 : r["problem"] == "add" ? 3 : 2;
    EXPECT_EQ(g["tests"].get<int>(), tests) << r["problem"];
    EXPECT_EQ(g["per_test"].size(), static_cast<size_t>(tests));
    EXPECT_NE(g["per_test"][0], "passed");
    EXPECT_TRUE(r["run"].contains("code_grading"));
  }
  EXPECT_EQ(keys.size(), 6u);

  CmdResult report = skipkv::e2e::RunSkipkv(Dir(), {"eval", "report", out_dir});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string md = ReadAll(out_dir + "/summary.md");
  EXPECT_NE(md.find("lcb"), std::string::npos) << md;
  EXPECT_NE(md.find("skipkv"), std::string::npos) << md;

  // eval grade on code lines: a right and a wrong program for "add".
  auto right = Rows()[0], wrong = Rows()[0];
  right["prediction"] = "<think>easy</think>\n```python\na, b = map(int, input().split())\nprint(a + b)\n```";
  wrong["prediction"] = "```python\nprint(0)\n```";
  const std::string graded = WriteJsonl("grade.jsonl", {right, wrong});
  CmdResult g = skipkv::e2e::RunSkipkv(Dir(), {"eval", "grade", graded});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  std::istringstream lines(g.out);
  std::string l1, l2;
  std::getline(lines, l1);
  std::getline(lines, l2);
  const auto v1 = nlohmann::json::parse(l1), v2 = nlohmann::json::parse(l2);
  EXPECT_TRUE(v1["equal"].get<bool>()) << l1;
  EXPECT_EQ(v1["code_grade"]["passed"], 3);
  EXPECT_FALSE(v2["equal"].get<bool>()) << l2;
  EXPECT_EQ(v2["code_grade"]["first_failure"]["outcome"], "wrong_answer");
  EXPECT_NE(g.err.find("1 of 2 equal"), std::string::npos) << g.err;

  // A bad row stops the sweep before generation, naming FILE:LINE and the field.
  auto bad = Rows();
  bad[1]["private_test_cases"] = "!!!";
  const std::string bad_path = WriteJsonl("bad.jsonl", bad);
  CmdResult b = skipkv::e2e::RunSkipkv(
      Dir(), {"eval", "-m", model, "--dataset", bad_path, "--methods", "rkv", "--budgets", "512", "-o", Dir() + "/b.jsonl"});
  EXPECT_EQ(b.exit_code, 1);
  EXPECT_NE(b.err.find(bad_path + ":2: field 'private_test_cases': base64"), std::string::npos) << b.err;
}

}  // namespace
