// `skipkv eval`: the paper's accuracy experiments (docs/eval-protocol.md).
//   skipkv eval grade FILE.jsonl   grade {"prediction", "reference"} lines
// The grader is src/eval (R-KV's extraction and math_equal, spec §2.6).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "command_registry.h"
#include "eval/jsonl.h"
#include "eval/math_equal.h"

namespace skipkv::cli {
namespace {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "skipkv eval: %s\n", msg.c_str());
  return 1;
}

// One JSON line per input: the extracted answer, the normalised reference
// and the verdict. Every line is checked before anything is printed.
int RunGrade(const std::string& path) {
  auto lines = eval::ReadJsonl(path);
  if (!lines.ok()) return Fail(lines.status().message());
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& l : *lines) {
    auto p = eval::StringField(l.value, "prediction", path, l.line);
    if (!p.ok()) return Fail(p.status().message());
    auto r = eval::StringField(l.value, "reference", path, l.line);
    if (!r.ok()) return Fail(r.status().message());
    pairs.emplace_back(std::move(*p), std::move(*r));
  }
  size_t equal = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const eval::Grade g = eval::GradeOutput(pairs[i].first, pairs[i].second);
    equal += g.equal;
    nlohmann::json out = {{"line", (*lines)[i].line},
                          {"extracted", g.extracted},
                          {"reference", g.reference},
                          {"equal", g.equal}};
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  std::fprintf(stderr, "skipkv eval grade: %zu of %zu equal\n", equal, pairs.size());
  return 0;
}

CommandRegistrar reg(
    "eval", "Accuracy experiments: grade answers (eval grade FILE.jsonl)", [](CLI::App& sub) {
      sub.require_subcommand(1);
      auto grade_path = std::make_shared<std::string>();
      CLI::App* grade = sub.add_subcommand(
          "grade", "Grade {\"prediction\": ..., \"reference\": ...} lines; prints one JSON verdict per line");
      grade->add_option("file", *grade_path, "JSONL file")->required();
      return [grade, grade_path]() -> int {
        if (grade->parsed()) return RunGrade(*grade_path);
        return 2;
      };
    });

}  // namespace
}  // namespace skipkv::cli
