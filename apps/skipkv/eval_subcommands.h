// Subcommands of `skipkv eval` that live in their own files
// (eval_fidelity.cpp, eval_report.cpp). Each adds itself to the `eval` app
// and returns the action to run when it was parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace skipkv::cli {

struct EvalSubcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// `skipkv eval fidelity`: teacher-forced agreement with FullKV over a text.
EvalSubcommand AddEvalFidelity(CLI::App& eval);
// `skipkv eval report DIR`: summary.md, report.html (plots) and the eviction view.
EvalSubcommand AddEvalReport(CLI::App& eval);

}  // namespace skipkv::cli
