// A sweep (issue 11 items 3-5, 7): every (method, budget) over the problems
// of one dataset on one loaded Engine, k samples per problem, results
// appended per finished sample to a JSONL file that a rerun resumes from.
//
// Order of work: the (method, budget) pairs in the order given (fullkv once,
// budget 0), within a pair the shard's problems in dataset order — sorted by
// prompt length (stable) for methods with grouping — then the samples.
// Items already in the output file are skipped. The pending items are cut
// into Generate calls of batch_size requests; in ragged mode a call may mix
// methods (every request carries its own method), in padded mode a call
// holds one (method, budget) only, so that each call is exactly one padded
// batch of that method (the engine must not re-sort: sort_by_length false).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/code_grader.h"
#include "eval/dataset.h"
#include "skipkv/presets.h"
#include "eval/prompt.h"
#include "eval/results.h"
#include "skipkv/engine.h"

namespace skipkv::eval {

struct SweepConfig {
  DatasetSpec dataset;
  std::vector<Problem> problems;    // loaded, after --limit
  Shard shard;                      // which problems this process runs
  std::vector<MethodPreset> pairs;  // one per (method, budget), budgets filled in
  PromptStyle prompt = PromptStyle::kChat;
  // The prompt was given explicitly (eval --prompt): it wins over the
  // presets' own (MethodPreset::prompt; see PairPromptStyle).
  bool prompt_given = false;
  // Max new tokens per sample (>= 1); for a preset with
  // max_length_counts_prompt, prompt + new tokens (see GenerationLimit).
  int64_t max_gen = 0;
  // max_gen was given explicitly (eval --max-gen): it wins over the
  // presets' own max_length.
  bool max_gen_given = false;
  int samples = 1;          // k samples per problem
  SamplingParams sampling;  // temperature 0 = greedy; seed = base seed
  int batch_size = 1;       // requests per Generate call
  std::string output;       // results JSONL
  std::string model_path;   // for the digest and the rows
  // Steering vectors the results file's provenance names besides those of
  // `pairs`: a command that writes one file in several sweeps (skipkv demo)
  // lists its vector in each, so that a sweep without a steering method
  // keeps the file's fingerprint.
  std::vector<std::string> provenance_steer_files;
  // Code datasets (dataset.code): every finished sample's program is run on
  // the problem's tests in this sandbox before its row is written (required
  // for code datasets; the grading blocks the sweep while it runs).
  const Sandbox* sandbox = nullptr;
  CodeGradeOptions code_grading;
};

// The prompt style of a pair's rows: the preset's own (MethodPreset::prompt,
// e.g. the *-authors presets' raw / seal-chat) unless the sweep's was given
// explicitly (prompt_given) or the dataset brings its prompt (plain: the
// testbed; code); otherwise the sweep's. A row's method_config carries the
// style whenever its preset has one ("prompt"); run.prompt is the sweep's.
PromptStyle PairPromptStyle(const SweepConfig& config, const MethodPreset& pair);

// The prompt ids a pair's rows of `problem` are generated from (the
// request's prompt_tokens), in the pair's prompt style.
StatusOr<std::vector<int32_t>> SweepPromptTokens(const SweepConfig& config, const Engine& engine,
                                                 const MethodPreset& pair, const Problem& problem);

// The most new tokens of a row: the total L = the preset's max_length when it
// has one and max_gen was not given (max_gen_given), max_gen otherwise; when
// the preset has max_length_counts_prompt (the authors' generate(max_length)
// counts the prompt, issue 38 row 3), L − prompt_len, at least 1 (as
// generate() makes one token of a prompt at max_length). prompt_len is the
// row's prompt, or in padded mode the longest of its Generate call (every row
// is padded to it). A row records it as "max_new_tokens", and its
// method_config the max_length used whenever its preset has one.
int64_t GenerationLimit(const SweepConfig& config, const MethodPreset& pair, int64_t prompt_len);

// The "run" object every row carries and resume / merge compare.
StatusOr<nlohmann::json> RunFingerprint(const SweepConfig& config, const Engine& engine);

struct SweepProgress {
  int64_t done = 0, total = 0;  // items of this invocation (resumed ones not counted)
  int64_t resumed = 0;          // items found finished in the output file
  double elapsed_s = 0;
  // Per method label (with budget, "rkv@512"): correct and finished rows so
  // far, resumed ones included.
  std::map<std::string, std::pair<int64_t, int64_t>> accuracy;
};
using SweepProgressCallback = std::function<void(const SweepProgress&)>;

struct SweepResult {
  int64_t generated = 0;             // rows written by this invocation
  int64_t resumed = 0;               // rows that were already in the file
  std::vector<nlohmann::json> rows;  // every row of this shard's items, resumed ones included
};

// Runs the sweep. The seed of sample k of a problem depends only on the
// base seed, the problem id and k, so a resumed or sharded run draws the
// same samples. Errors: the output file's rows from another configuration,
// an invalid request (named), I/O errors; rows written before an error stay.
StatusOr<SweepResult> RunSweep(const SweepConfig& config, Engine& engine,
                               const SweepProgressCallback& progress = nullptr);

}  // namespace skipkv::eval
