// LoadLcbDataset (dataset.h): LiveCodeBench rows checked line by line.
#include <fstream>
#include <set>

#include "util/json_depth.h"
#include "eval/dataset.h"
#include "eval/lcb_problem.h"

namespace skipkv::eval {

StatusOr<LoadedDataset> LoadLcbDataset(const DatasetSpec& spec, bool skip_bad) {
  std::ifstream in(spec.path, std::ios::binary);
  if (!in) return NotFound("dataset '" + spec.name + "': cannot open '" + spec.path + "'");
  LoadedDataset out;
  std::set<std::string> ids;
  std::string line;
  size_t lineno = 0, index = 0;
  uint64_t offset = 0, next = 0;
  while (std::getline(in, line)) {
    offset = next;
    next += line.size() + 1;
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = spec.path + ":" + std::to_string(lineno);
    Status bad;
    Problem p;
    p.line = lineno;
    p.offset = offset;
    const Status deep = CheckJsonDepth(line, spec.path, static_cast<int64_t>(lineno));
    auto v = deep.ok() ? nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false) : nlohmann::json();
    if (!deep.ok()) {
      bad = deep;
    } else if (v.is_discarded()) {
      bad = CorruptData(where + ": not valid JSON");
    } else {
      auto code = ParseLcbRow(v, where);
      if (!code.ok()) {
        bad = code.status();
      } else {
        p.question = LcbPrompt(*code);
        p.reference = std::to_string(code->tests.size()) + " " + TestStyleName(code->style) + " tests";
        p.reference_raw = p.reference;
        p.id = code->question_id.empty() ? std::to_string(index) : code->question_id;
        if (!ids.insert(p.id).second)
          bad = InvalidArgument(where + ": field 'question_id' repeats the id '" + p.id + "'");
      }
    }
    if (!bad.ok()) {
      if (!skip_bad) return bad.WithContext("dataset '" + spec.name + "'");
      out.skipped.push_back(bad.message());
      continue;
    }
    ++index;
    out.problems.push_back(std::move(p));
  }
  if (in.bad()) return IoError("dataset '" + spec.name + "': cannot read '" + spec.path + "'");
  if (out.problems.empty())
    return InvalidArgument("dataset '" + spec.name + "': '" + spec.path + "' has no usable rows");
  return out;
}

}  // namespace skipkv::eval
