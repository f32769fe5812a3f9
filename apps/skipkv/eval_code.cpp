#include "eval_code.h"

#include "eval/lcb_problem.h"

namespace skipkv::cli {

void CodeGradeFlags::Add(CLI::App& app) {
  app.add_option("--grade-jobs", jobs, "Code datasets: tests run at once, each in its own sandbox (1-64)")
      ->capture_default_str();
  app.add_option("--grade-timeout", timeout_s, "Code datasets: wall-clock seconds per test (LiveCodeBench: 6)")
      ->capture_default_str();
  app.add_option("--grade-memory-mb", memory_mb, "Code datasets: address space per process (MiB)")
      ->capture_default_str();
  app.add_option("--grade-processes", processes, "Code datasets: processes + threads per test")
      ->capture_default_str();
}

StatusOr<eval::CodeGradeOptions> CodeGradeFlags::Options() const {
  if (jobs < 1 || jobs > 64) return InvalidArgument("--grade-jobs (" + std::to_string(jobs) + ") must be 1-64");
  if (!(timeout_s > 0 && timeout_s <= 3600))
    return InvalidArgument("--grade-timeout (" + std::to_string(timeout_s) + ") must be in (0, 3600]");
  if (memory_mb < 64) return InvalidArgument("--grade-memory-mb (" + std::to_string(memory_mb) + ") must be >= 64");
  if (processes < 1) return InvalidArgument("--grade-processes (" + std::to_string(processes) + ") must be >= 1");
  eval::CodeGradeOptions o;
  o.jobs = jobs;
  o.limits.wall_seconds = timeout_s;
  o.limits.memory_bytes = memory_mb << 20;
  o.limits.processes = processes;
  return o;
}

StatusOr<std::unique_ptr<eval::Sandbox>> ReadySandbox(int jobs) {
  SKIPKV_ASSIGN_OR_RETURN(eval::Sandbox sb, eval::Sandbox::Create(jobs));
  auto p = std::make_unique<eval::Sandbox>(sb);
  SKIPKV_RETURN_IF_ERROR(p->SelfCheck().WithContext("code grading needs a working sandbox"));
  return p;
}

StatusOr<nlohmann::json> GradeCodeLine(const nlohmann::json& row, const std::string& where,
                                       const eval::Sandbox& sandbox, const eval::CodeGradeOptions& options) {
  auto pred = row.find("prediction");
  if (pred == row.end() || !pred->is_string())
    return InvalidArgument(where + ": field 'prediction' must be a string");
  SKIPKV_ASSIGN_OR_RETURN(eval::CodeProblem problem, eval::ParseLcbRow(row, where));
  const std::string code = eval::ExtractCode(pred->get<std::string>());
  const eval::CodeVerdict v = eval::GradeProgram(sandbox, code, problem, options);
  return nlohmann::json{{"equal", v.equal}, {"extracted", code}, {"code_grade", v.ToJson()}};
}

}  // namespace skipkv::cli
