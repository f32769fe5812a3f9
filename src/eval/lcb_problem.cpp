#include "util/json_depth.h"
#include "eval/lcb_problem.h"

#include <fstream>

#include "eval/extract.h"

namespace skipkv::eval {

bool IsLcbRow(const nlohmann::json& row) {
  return row.is_object() && row.contains("question_content") && row.contains("public_test_cases");
}

namespace {

StatusOr<std::string> OptionalString(const nlohmann::json& row, const char* field, const std::string& where) {
  auto it = row.find(field);
  if (it == row.end() || it->is_null()) return std::string();
  if (!it->is_string())
    return InvalidArgument(where + ": field '" + field + "' must be a string, got " + it->type_name());
  return it->get<std::string>();
}

}  // namespace

StatusOr<CodeProblem> ParseLcbRow(const nlohmann::json& row, const std::string& where) {
  if (!row.is_object()) return InvalidArgument(where + ": not a JSON object");
  CodeProblem p;
  SKIPKV_ASSIGN_OR_RETURN(p.question_content, OptionalString(row, "question_content", where));
  if (p.question_content.find_first_not_of(" \t\r\n") == std::string::npos)
    return InvalidArgument(where + ": field 'question_content' is missing or empty");
  SKIPKV_ASSIGN_OR_RETURN(p.starter_code, OptionalString(row, "starter_code", where));
  SKIPKV_ASSIGN_OR_RETURN(p.platform, OptionalString(row, "platform", where));
  SKIPKV_ASSIGN_OR_RETURN(p.difficulty, OptionalString(row, "difficulty", where));
  SKIPKV_ASSIGN_OR_RETURN(p.question_id, OptionalString(row, "question_id", where));
  for (const char* f : {"public_test_cases", "private_test_cases"}) {
    SKIPKV_ASSIGN_OR_RETURN(std::string raw, OptionalString(row, f, where));
    if (raw.empty() && std::string(f) == "private_test_cases") continue;
    auto tests = DecodeTestCases(raw);
    if (!tests.ok()) return CorruptData(where + ": field '" + f + "': " + tests.status().message());
    for (auto& t : *tests) p.tests.push_back(std::move(t));
  }
  if (p.tests.empty()) return InvalidArgument(where + ": fields 'public_test_cases' and 'private_test_cases' hold no tests");
  p.style = p.tests[0].style;
  for (size_t i = 1; i < p.tests.size(); ++i)
    if (p.tests[i].style != p.style)
      return InvalidArgument(where + ": test " + std::to_string(i) + " is " + TestStyleName(p.tests[i].style) +
                             ", test 0 is " + TestStyleName(p.style) + " (one style per problem)");
  // metadata: LiveCodeBench stores it as JSON text ("{\"func_name\": \"maxSum\"}").
  nlohmann::json meta = nlohmann::json::object();
  if (auto it = row.find("metadata"); it != row.end() && !it->is_null()) {
    if (it->is_string()) {
      const std::string& text = it->get_ref<const std::string&>();
      if (FindJsonDepthExcess(text)) return InvalidArgument(where + ": field 'metadata' is JSON nested too deep");
      meta = nlohmann::json::parse(text, nullptr, false);
      if (meta.is_discarded()) return InvalidArgument(where + ": field 'metadata' is a string that is not JSON");
    } else {
      meta = *it;
    }
    if (!meta.is_object()) return InvalidArgument(where + ": field 'metadata' is not a JSON object");
  }
  if (auto fn = meta.find("func_name"); fn != meta.end() && !fn->is_null()) {
    if (!fn->is_string()) return InvalidArgument(where + ": field 'metadata.func_name' must be a string");
    p.func_name = fn->get<std::string>();
  }
  if (p.style == TestStyle::kFunctional) {
    if (p.func_name.empty())
      return InvalidArgument(where + ": field 'metadata.func_name' is required for functional tests");
    for (char c : p.func_name)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
        return InvalidArgument(where + ": field 'metadata.func_name' ('" + p.func_name.substr(0, 40) +
                               "') is not a Python identifier");
  }
  return p;
}

StatusOr<CodeProblem> LoadLcbRowAt(const std::string& path, uint64_t offset, size_t line) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open '" + path + "'");
  in.seekg(static_cast<std::streamoff>(offset));
  std::string text;
  if (!std::getline(in, text)) return IoError("cannot read '" + path + "' at byte " + std::to_string(offset));
  const std::string where = path + ":" + std::to_string(line);
  if (Status deep = CheckJsonDepth(text, path, line); !deep.ok()) return deep;
  auto v = nlohmann::json::parse(text, nullptr, false);
  if (v.is_discarded()) return CorruptData(where + ": not valid JSON (did the file change since it was loaded?)");
  return ParseLcbRow(v, where);
}

std::string LcbPrompt(const CodeProblem& p) {
  // Text as in LiveCodeBench's lcb_runner/prompts/code_generation.py (PromptConstants and
  // get_deepseekcode_question_template_answer), which SkipKV's eval_code.py imports.
  static const char* kWithStarter =
      "You will use the following starter code to write the solution to the problem and enclose your code "
      "within delimiters.";
  static const char* kWithoutStarter =
      "Read the inputs from stdin solve the problem and write the answer to stdout (do not directly test on "
      "the sample inputs). Enclose your code within delimiters as follows.";
  std::string s =
      "### Instruction: You will be given a question (problem specification) and will generate a correct Python "
      "program that matches the specification and passes all tests. You will NOT return anything except for the "
      "program.\n\n";
  s += "Question:\n" + p.question_content + "\n\n";
  if (!p.starter_code.empty()) {
    s += std::string("### Instruction: ") + kWithStarter + "\n";
    s += "```python\n" + p.starter_code + "\n```\n\n";
  } else {
    s += std::string("### Instruction: ") + kWithoutStarter + "\n";
    s += "```python\n# YOUR CODE HERE\n```\n\n";
  }
  s += "### Response:\n\n";
  return s;
}

std::string ExtractCode(std::string_view output) {
  const std::string_view text = TruncateOutput(output);
  // Line starts of the last two lines that contain ``` (scanning backwards).
  std::vector<std::pair<size_t, size_t>> fences;  // [begin, end) of the line
  size_t end = text.size();
  while (fences.size() < 2) {
    const size_t nl = end == 0 ? std::string_view::npos : text.rfind('\n', end - 1);
    const size_t begin = nl == std::string_view::npos ? 0 : nl + 1;
    if (text.substr(begin, end - begin).find("```") != std::string_view::npos) fences.emplace_back(begin, end);
    if (begin == 0) break;
    end = begin - 1;
  }
  if (fences.size() < 2) return "";
  const size_t body_begin = std::min(fences[1].second + 1, fences[0].first);
  const size_t body_end = fences[0].first == 0 ? 0 : fences[0].first - 1;  // drop the '\n' before the fence
  if (body_end <= body_begin) return "";
  return std::string(text.substr(body_begin, body_end - body_begin));
}

}  // namespace skipkv::eval
