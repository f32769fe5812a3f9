// Evaluation datasets (issue 11 item 1): the bundled GSM8K, MATH-500 and
// AIME-24 files (data/datasets, see data/README.md) and any JSONL file with a
// field mapping. Every line is checked before any generation starts: a bad
// line is an error naming the file, the line number and the field, unless
// skip_bad is set, in which case it is reported and left out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace skipkv::eval {

struct DatasetSpec {
  std::string name;            // "gsm8k", "math500", "aime24", or the file's stem for other files
  std::string path;            // the JSONL file
  std::string question_field;  // the problem text
  std::string answer_field;    // the reference: a bare answer, a solution with \boxed, or GSM8K "... #### n"
  std::string id_field;        // a unique id per line; empty = the 0-based line index among the rows
  // Most generated tokens per sample (SkipKV's max_gen, docs/spec.md §6.11): gsm8k
  // 8192, math500 16384, aime24 16384; 16384 for other files. A sample also
  // stops at the context length (finish "context").
  int64_t max_gen = 16384;
  // The question field is the whole prompt (PromptStyle::kPlain by default):
  // the testbed's problems, which end with "<think>\n".
  bool plain_prompt = false;
  // A bundled split results are reported on (every bundled one but the
  // validation splits testbed-val, testbed2-val): `skipkv calibrate` refuses it.
  bool reported_split = false;
  // LiveCodeBench code-generation rows (detected from the first row's
  // question_content and public_test_cases): the question is LcbPrompt, the
  // samples are graded by running the extracted program (code_grader.h).
  bool code = false;
};

// The names of the bundled datasets, in a fixed order.
std::vector<std::string> KnownDatasets();

// `name_or_path` is a bundled name (resolved under data_dir/datasets) or a
// path to a .jsonl file. Non-empty field overrides replace the defaults (for
// a file that is not bundled, question_field and answer_field default to
// "question" and "answer"). InvalidArgument for an unknown name that is not
// an existing file.
StatusOr<DatasetSpec> ResolveDataset(const std::string& name_or_path, const std::string& data_dir,
                                     const std::string& question_field = "",
                                     const std::string& answer_field = "", const std::string& id_field = "");

// The bundled data (datasets/, models/, templates/, steering/): <prefix>/share/skipkv
// beside an installed binary (<prefix>/bin/, found through /proc/self/exe), else
// data/ of the source tree this binary was built from. --data-dir overrides it.
std::string DefaultDataDir();

struct Problem {
  std::string id;   // unique within the dataset
  size_t line = 0;  // 1-based line in the file
  std::string question;
  std::string reference_raw;  // the answer field as written
  std::string reference;      // normalised (NormalizeReference), what predictions are compared with
  // Code rows: the row's byte offset in the file (the grader reloads its
  // tests from there rather than holding a release's tests in memory).
  uint64_t offset = 0;
};

struct LoadedDataset {
  std::vector<Problem> problems;
  std::vector<std::string> skipped;  // "FILE:LINE: reason" for each line left out (skip_bad)
};

// Reads and checks every line: valid JSON object, question a non-empty
// string, answer a string or number whose normalised form is non-empty, id
// (when mapped) present and unique. The first bad line is an
// InvalidArgument / CorruptData "FILE:LINE: field 'F' ..." unless skip_bad.
// An empty dataset (after skipping) is an InvalidArgument.
StatusOr<LoadedDataset> LoadDataset(const DatasetSpec& spec, bool skip_bad);

// LoadDataset for code rows (lcb_dataset.cpp): every row parsed and its tests
// decoded (ParseLcbRow) before any generation; the question is LcbPrompt, the
// reference "N stdin|functional tests", the id question_id (or the index).
StatusOr<LoadedDataset> LoadLcbDataset(const DatasetSpec& spec, bool skip_bad);

}  // namespace skipkv::eval
