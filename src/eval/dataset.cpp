#include "eval/dataset.h"

#include <filesystem>
#include <fstream>
#include <set>

#include "eval/extract.h"
#include "eval/jsonl.h"
#include "eval/lcb_problem.h"
#include "util/json_depth.h"

#ifndef SKIPKV_EVAL_DATA_DIR
#define SKIPKV_EVAL_DATA_DIR "data"
#endif

namespace skipkv::eval {
namespace {

struct Bundled {
  const char* name;
  const char* file;
  const char* question;
  const char* answer;
  const char* id;
  int64_t max_length;
  bool plain_prompt = false;
  bool validation = false;  // a calibration split, not one results are reported on
};

// Field names as R-KV's run_math.py reads them (math: `answer`, which agrees
// with the last \boxed of `solution` on all 500 rows; see eval_grader_test).
constexpr Bundled kBundled[] = {
    {"gsm8k", "gsm8k_test.jsonl", "question", "answer", "", 8192},
    {"math500", "math500_test.jsonl", "problem", "answer", "unique_id", 16384},
    {"aime24", "aime24.jsonl", "question", "answer", "id", 16384},
    // The trained testbed's test split (tools/testbed/gen.py, format 3; traces of 178-1174 tokens).
    {"testbed", "testbed_test.jsonl", "prompt", "answer", "id", 1536, true},
    // Its validation split (gen.py --split val --n 200 --seed 1; no prompt shared with the test split),
    // for `skipkv calibrate`.
    {"testbed-val", "testbed_val.jsonl", "prompt", "answer", "id", 1536, true, true},
    // Testbed v2 (gen.py --fmt 4: a blank line after every trace line, optional Wait / Alternatively lines,
    // checkpoints, trained with simulated eviction; reference traces of 166-907 tokens): test split and
    // its validation split (--seed 1), for data/models/testbed-v2/testbed.gguf.
    {"testbed2", "testbed2_test.jsonl", "prompt", "answer", "id", 1536, true},
    {"testbed2-val", "testbed2_val.jsonl", "prompt", "answer", "id", 1536, true, true},
};

}  // namespace

std::vector<std::string> KnownDatasets() {
  std::vector<std::string> v;
  for (const auto& b : kBundled) v.emplace_back(b.name);
  return v;
}

std::string DefaultDataDir() {
  // Installed (cmake --install): <prefix>/bin/skipkv reads <prefix>/share/skipkv.
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path installed = exe.parent_path().parent_path() / "share" / "skipkv";
    if (std::filesystem::is_directory(installed / "datasets", ec)) return installed.string();
  }
  return SKIPKV_EVAL_DATA_DIR;  // an uninstalled build: data/ of its source tree
}

StatusOr<DatasetSpec> ResolveDataset(const std::string& name_or_path, const std::string& data_dir,
                                     const std::string& question_field, const std::string& answer_field,
                                     const std::string& id_field) {
  DatasetSpec spec;
  bool found = false;
  for (const auto& b : kBundled) {
    if (name_or_path == b.name) {
      spec = {b.name,     (std::filesystem::path(data_dir) / "datasets" / b.file).string(),
              b.question, b.answer,
              b.id,       b.max_length, b.plain_prompt};
      spec.reported_split = !b.validation;
      found = true;
    }
  }
  if (!found) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(name_or_path, ec)) {
      std::string known;
      for (const auto& n : KnownDatasets()) known += (known.empty() ? "" : ", ") + n;
      return InvalidArgument("dataset '" + name_or_path + "' is neither a bundled dataset (" + known +
                             ") nor an existing .jsonl file");
    }
    spec.name = std::filesystem::path(name_or_path).stem().string();
    spec.path = name_or_path;
    spec.question_field = "question";
    spec.answer_field = "answer";
    // A LiveCodeBench file: its first row has the code-generation fields.
    std::ifstream in(name_or_path, std::ios::binary);
    for (std::string line; std::getline(in, line);) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      if (!FindJsonDepthExcess(line) && IsLcbRow(nlohmann::json::parse(line, nullptr, false))) {
        spec.code = true;
        spec.question_field = "question_content";
        spec.answer_field = "private_test_cases";
        spec.id_field = "question_id";
        spec.max_gen = 10000;  // SkipKV's scripts/run_code.sh: --max_tokens 10000
      }
      break;
    }
  }
  if (!question_field.empty()) spec.question_field = question_field;
  if (!answer_field.empty()) spec.answer_field = answer_field;
  if (!id_field.empty()) spec.id_field = id_field;
  return spec;
}

StatusOr<LoadedDataset> LoadDataset(const DatasetSpec& spec, bool skip_bad) {
  if (spec.code) return LoadLcbDataset(spec, skip_bad);
  std::ifstream in(spec.path, std::ios::binary);
  if (!in) return NotFound("dataset '" + spec.name + "': cannot open '" + spec.path + "'");
  LoadedDataset out;
  std::set<std::string> ids;
  std::string line;
  size_t lineno = 0, index = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = spec.path + ":" + std::to_string(lineno);
    Problem p;
    p.line = lineno;
    // Depth before parsing (issue 43): a too-deep line is a bad row, never parsed.
    Status bad = CheckJsonDepth(line, spec.path, static_cast<int64_t>(lineno));
    auto v = bad.ok() ? nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false) : nlohmann::json();
    if (!bad.ok()) {
      // reported below
    } else if (v.is_discarded()) {
      bad = CorruptData(where + ": not valid JSON");
    } else if (!v.is_object()) {
      bad = InvalidArgument(where + ": not a JSON object");
    } else {
      auto q = StringField(v, spec.question_field, spec.path, lineno);
      if (q.ok() && !v[spec.question_field].is_string())
        q = InvalidArgument(where + ": field '" + spec.question_field + "' must be a string, got " +
                            std::string(v[spec.question_field].type_name()));
      auto a =
          q.ok() ? StringField(v, spec.answer_field, spec.path, lineno) : StatusOr<std::string>(q.status());
      if (!q.ok()) {
        bad = q.status();
      } else if (!a.ok()) {
        bad = a.status();
      } else if (q->find_first_not_of(" \t\r\n") == std::string::npos) {
        bad = InvalidArgument(where + ": field '" + spec.question_field + "' is empty");
      } else {
        p.question = std::move(*q);
        p.reference_raw = std::move(*a);
        p.reference = NormalizeReference(p.reference_raw);
        if (p.reference.empty()) {
          bad = InvalidArgument(where + ": field '" + spec.answer_field + "' has no answer ('" +
                                p.reference_raw.substr(0, 40) + "')");
        }
      }
      if (bad.ok()) {
        if (spec.id_field.empty()) {
          p.id = std::to_string(index);
        } else {
          auto id = StringField(v, spec.id_field, spec.path, lineno);
          if (!id.ok()) {
            bad = id.status();
          } else if (!ids.insert(*id).second) {
            bad = InvalidArgument(where + ": field '" + spec.id_field + "' repeats the id '" + *id + "'");
          } else {
            p.id = std::move(*id);
          }
        }
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
