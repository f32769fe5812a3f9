// Runs the built `skipkv` binary for e2e tests: arguments quoted, no shell
// expansion, stdout and stderr captured through files in a per-process
// temporary directory.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace skipkv::e2e {

inline const std::string kBinary = std::string(SKIPKV_BINARY_DIR) + "/apps/skipkv/skipkv";

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fresh directory for this test process (under gtest's TempDir).
inline std::string TestDir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "/skipkv_" + name + "_" + std::to_string(::getpid());
  std::filesystem::create_directories(d);
  return d;
}

struct CmdResult {
  int exit_code = -1;  // -1: killed by a signal
  std::string out, err;
};

// Runs a shell command line; its stdout and stderr go to files in `dir`.
inline CmdResult RunShell(const std::string& dir, const std::string& cmdline) {
  static int n = 0;
  const std::string out = dir + "/out" + std::to_string(n) + ".txt";
  const std::string err = dir + "/err" + std::to_string(n++) + ".txt";
  const int status = std::system((cmdline + " >" + out + " 2>" + err).c_str());
  CmdResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadAll(out);
  r.err = ReadAll(err);
  return r;
}

// Runs skipkv with `args`, each single-quoted (no shell expansion).
inline CmdResult RunSkipkv(const std::string& dir, const std::vector<std::string>& args) {
  std::string cmd = kBinary;
  for (const auto& a : args) cmd += " '" + a + "'";
  return RunShell(dir, cmd);
}

// Six short word problems ({"q", "a", "id"} lines) written to `dir`/six.jsonl:
// the sweeps of the e2e tests run them on the embedded story model, which
// cannot solve them, so every row goes through grading.
inline std::string WriteSixProblems(const std::string& dir) {
  const std::string path = dir + "/six.jsonl";
  std::ofstream f(path);
  const char* qs[] = {"Tom has 2 apples and gets 3 more. How many apples?", "What is 7 times 6?",
                      "Lily saw 5 birds. 2 flew away. How many are left?",  "What is 10 minus 4?",
                      "A cat has 4 legs. How many legs do 2 cats have?",    "What is 9 plus 9?"};
  const char* as[] = {"5", "42", "3", "6", "8", "18"};
  for (int i = 0; i < 6; ++i)
    f << nlohmann::json{{"q", qs[i]}, {"a", as[i]}, {"id", "p" + std::to_string(i)}}.dump() << "\n";
  return path;
}

}  // namespace skipkv::e2e
