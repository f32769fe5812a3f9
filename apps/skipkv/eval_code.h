// The code-grading options of `skipkv eval` and `skipkv eval grade`
// (LiveCodeBench rows, src/eval/code_grader.h) and the grading of one
// `eval grade` line that carries a code problem.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "eval/code_grader.h"
#include "eval/sandbox.h"

namespace skipkv::cli {

struct CodeGradeFlags {
  int jobs = 2;
  double timeout_s = 6;  // LiveCodeBench's per-test timeout
  int64_t memory_mb = 4096;
  int processes = 32;
  void Add(CLI::App& app);
  // Validated options for the grader (InvalidArgument naming the flag).
  StatusOr<eval::CodeGradeOptions> Options() const;
};

// A sandbox with `jobs` slots that has passed its self-check: a sweep or
// grading run stops here, before any work, when programs cannot be confined.
StatusOr<std::unique_ptr<eval::Sandbox>> ReadySandbox(int jobs);

// `eval grade` for a line with a LiveCodeBench problem (eval::IsLcbRow) and a
// "prediction": {"line", "equal", "extracted", "code_grade": {...}}.
StatusOr<nlohmann::json> GradeCodeLine(const nlohmann::json& row, const std::string& where,
                                       const eval::Sandbox& sandbox, const eval::CodeGradeOptions& options);

}  // namespace skipkv::cli
