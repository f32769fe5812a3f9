// Grades a program against LiveCodeBench test cases by running it in the
// sandbox (sandbox.h), one process per test, as LiveCodeBench grades:
//   stdin tests: the program reads the input on stdin; its stdout is compared
//     line by line after stripping (LcbOutputMatches);
//   functional tests: `class Solution` (when the program defines one; else
//     the module) is instantiated and metadata.func_name is called with the
//     input's lines as JSON arguments; the result (a tuple read as a list)
//     must equal the JSON of the expected output under Python's ==.
// Both run under LiveCodeBench's import prelude (`from math import *`, ...).
// A test ends passed, wrong_answer, time_limit, runtime_error,
// sandbox_violation (the program tried to fork, exec, open a socket, write
// outside /tmp, load native code, or exceeded the output cap) or
// sandbox_error (the sandbox could not run it: the test fails, nothing runs
// unsandboxed). Like LiveCodeBench, grading stops at the first test that does
// not pass; tests are run `jobs` at a time, so a failure stops the rest of its
// wave. The problem passes when every test passes (pass@1 per sample).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "eval/lcb_problem.h"
#include "eval/sandbox.h"

namespace skipkv::eval {

enum class TestOutcome { kPassed, kWrongAnswer, kTimeLimit, kRuntimeError, kSandboxViolation, kSandboxError, kNotRun };
const char* TestOutcomeName(TestOutcome o);

struct TestResult {
  TestOutcome outcome = TestOutcome::kNotRun;
  std::string detail;  // short: the exception line, the violation, the first differing line
  double seconds = 0;
};

struct CodeVerdict {
  bool equal = false;  // every test passed
  std::vector<TestResult> tests;  // one per test of the problem (kNotRun after the first failure)
  // {"equal", "passed", "tests", "outcomes": {"passed": n, ...}, "first_failure": {...}}
  nlohmann::json ToJson() const;
};

struct CodeGradeOptions {
  SandboxLimits limits;  // per test; LiveCodeBench's timeout is 6 s
  int jobs = 1;          // tests run at once (<= the sandbox's slots)
};

// LiveCodeBench's stdout comparison: both texts are stripped and split into
// lines, each line stripped; the line counts must agree, and each pair of
// lines is equal as text or, token by token (whitespace-split), as Python
// Decimals (so "1.50" equals "1.5" and "1e2" equals "100"; NaN never equal).
bool LcbOutputMatches(std::string_view got, std::string_view expected);

// The harness program that runs inside the sandbox (Python 3).
const std::string& CodeHarnessSource();

// Runs `program` (the extracted code) on every test of `problem`. An empty
// program fails every test without running anything (runtime_error "no code
// block in the output").
CodeVerdict GradeProgram(const Sandbox& sandbox, const std::string& program, const CodeProblem& problem,
                         const CodeGradeOptions& options);

}  // namespace skipkv::eval
