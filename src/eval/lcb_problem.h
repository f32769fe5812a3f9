// LiveCodeBench code-generation problems (code_generation_lite rows, e.g.
// release_v1's test.jsonl): the fields skipkv reads, the prompt the SkipKV
// authors' eval_code.py sends (LiveCodeBench's DeepSeek-Coder instruction
// template, in one chat user turn), and the extraction of the program from a
// model's output.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "eval/lcb_decode.h"
#include "util/status.h"

namespace skipkv::eval {

struct CodeProblem {
  std::string question_id, platform, difficulty;
  std::string question_content;
  std::string starter_code;  // "" for stdin problems
  std::string func_name;     // metadata.func_name; "" for stdin problems
  TestStyle style = TestStyle::kStdin;
  std::vector<CodeTest> tests;  // public then private, as LiveCodeBench grades them
};

// Whether a JSON row looks like a LiveCodeBench code row (has
// question_content and public_test_cases).
bool IsLcbRow(const nlohmann::json& row);

// Parses and checks one row. `where` prefixes errors ("FILE:LINE"); every
// error names the field: question_content (non-empty string), starter_code,
// platform, difficulty, question_id (strings), public_test_cases and
// private_test_cases (DecodeTestCases; together at least one test, all of one
// style), metadata (a JSON object or its JSON text; func_name a non-empty
// string when the tests are functional).
StatusOr<CodeProblem> ParseLcbRow(const nlohmann::json& row, const std::string& where);

// The same for the row at byte `offset` of `path` (the grader reloads tests
// one problem at a time instead of keeping a whole release in memory).
StatusOr<CodeProblem> LoadLcbRowAt(const std::string& path, uint64_t offset, size_t line);

// LiveCodeBench's get_deepseekcode_question_template_answer, which the SkipKV
// authors' eval_code.py sends as the user turn of the model's chat template.
std::string LcbPrompt(const CodeProblem& p);

// The program in a model output, as LiveCodeBench's extract_code reads a
// reasoning model's answer: the lines between the last two lines that contain
// "```" (the opening fence line, e.g. "```python", is dropped). Empty when
// fewer than two such lines exist. The output is first cut at the stop
// strings of TruncateOutput.
std::string ExtractCode(std::string_view output);

}  // namespace skipkv::eval
