// Calibration of SkipKV's τ and α0 for a model (issue 39 item 1;
// docs/calibration.md has the rules and their reasons).
//
// On a validation split: FullKV greedy traces are generated (a sweep, rows
// in eval's format) while SentenceRecorder hooks record every sentence the
// PSS would see — the skipkv policy's own segmentation and Eq. 2 embeddings —
// then
//   τ  = the `percentile`-th percentile (default 5) of the PSS over pairs of
//        word-for-word duplicate sentences (identical token ids), rounded down
//        to a multiple of 0.001, so that (100 − percentile) % of duplicates
//        are flagged (PSS > τ); checked against pairs of the same kind (same
//        first token) with different content: the share of those above τ is
//        the false-positive figure;
//   α0 = the largest value of the grid whose SEAL-on-FullKV accuracy is at
//        least FullKV's minus `tolerance_points`; γ = α0 · (γ / α0 of the
//        paper's defaults, 0.02 / 1).
// The pure parts (pair collection, percentile, both rules) take recorded
// inputs, so tests check them on hand-computed values.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "eval/sweep.h"
#include "skipkv/engine.h"
#include "skipkv/presets.h"
#include "skipkv/steering.h"

namespace skipkv::eval {

// ---- The τ rule ----------------------------------------------------------------

// One sentence of a trace that takes part in the PSS, in trace order.
struct CalSentence {
  std::vector<int32_t> tokens;   // its token ids
  std::vector<float> embedding;  // unit embedding (Eq. 2)
  bool nonexec = false;          // holds a non-execution keyword (Wait, Alternatively, ...)
};
struct CalTrace {
  std::string problem;
  std::vector<CalSentence> sentences;
};

// PSS values of the pairs (i, j), i < j, of one trace that the policy
// compares (j − i <= window, the policy's K = max_sentences), by kind.
struct PssPairs {
  std::vector<float> duplicate;  // identical token ids
  std::vector<float> same_kind;  // same first token id, different token ids
  // The pairs' shared first token id and whether the later sentence is
  // NONEXEC, parallel to duplicate / same_kind.
  std::vector<int32_t> duplicate_first, same_kind_first;
  std::vector<uint8_t> duplicate_nonexec, same_kind_nonexec;
  int64_t compared = 0;  // every pair in the window
  int64_t similar =
      0;  // of those, pairs with PSS >= 0.95 (paper Fig. 14's count, as the policy's diagnostics)
};
// PSS(i, j) = e_i · e_j (Eq. 1). window >= 1; embeddings of equal width.
PssPairs CollectPssPairs(std::span<const CalTrace> traces, int64_t window);

// The pairs per first token (the kind), most same-kind pairs first, at most
// `top` kinds: how many pairs of each kind, and the shares above `tau`.
struct KindRow {
  int32_t first_token = -1;
  int64_t duplicate = 0, same_kind = 0;
  double duplicate_above = 0, same_kind_above = 0;  // shares (0..1) with PSS > tau
};
std::vector<KindRow> KindBreakdown(const PssPairs& pairs, double tau, size_t top);
// The same figures over the pairs of NONEXEC sentences (`nonexec`) or of the
// others (first_token -1).
KindRow ClassBreakdown(const PssPairs& pairs, double tau, bool nonexec);

// The p-th percentile (p in [0, 100]) with linear interpolation between the
// closest ranks (numpy's default): sorted v, h = (n − 1)·p/100,
// v[⌊h⌋] + (h − ⌊h⌋)·(v[⌊h⌋+1] − v[⌊h⌋]). `values` non-empty.
double Percentile(std::vector<float> values, double p);
// The share (0..1) of values strictly above `threshold` (Eq. 3 flags PSS > τ); 0 when empty.
double ShareAbove(std::span<const float> values, double threshold);

struct TauChoice {
  double percentile = 5;
  double exact = 0;  // the percentile of the duplicates' PSS
  double tau =
      0;  // exact rounded down to a multiple of 0.001 (a value within 1e-6 below one counts as on it)
  double recall = 0;           // share of duplicate pairs with PSS > tau
  double same_kind_above = 0;  // share of same-kind pairs with PSS > tau (false positives)
  double paper_tau = 0.95;
  double paper_recall = 0, paper_same_kind_above = 0;
};
// InvalidArgument when there is no duplicate pair, or the percentile is not
// in (0, 1] after rounding (τ must be, ValidateSkipkvConfig); percentile in [0, 100).
StatusOr<TauChoice> ChooseTau(const PssPairs& pairs, double percentile, double paper_tau);

// ---- The α0 rule ----------------------------------------------------------------

struct GridPoint {
  double alpha0 = 0;
  int64_t correct = 0, n = 0;
  double mean_tokens = 0;
  double accuracy() const {
    return n > 0 ? 100.0 * static_cast<double>(correct) / static_cast<double>(n) : 0;
  }
};
struct AlphaChoice {
  std::optional<double> alpha0;  // none: no grid value stays within the tolerance
  double gamma = 0;              // alpha0 · paper_gamma / paper_alpha0
};
// The largest grid α0 with accuracy >= fullkv_accuracy − tolerance_points
// (percent points); grid order does not matter. paper_alpha0 > 0.
AlphaChoice ChooseAlpha0(std::span<const GridPoint> grid, double fullkv_accuracy, double tolerance_points,
                         double paper_alpha0, double paper_gamma);

// ---- The run -----------------------------------------------------------------------

struct CalibrationConfig {
  // Dataset, problems (after --limit), prompt, max_gen, batch_size, the rows
  // file (`output`, must not exist: the hidden states of a resumed FullKV row
  // are gone) and model_path. `pairs` is filled in by RunCalibration.
  SweepConfig sweep;
  // The steering vector (file, layer) of the α0 grid; not enabled = no grid.
  SteeringConfig vector;
  std::vector<double> alpha_grid = {1.0, 0.5, 0.25, 0.125};
  double percentile = 5;
  double tolerance_points = 1;
  // When set, the recorded traces are written there (JSONL, one line per
  // problem: {"problem", "sentences": [{"b", "e", "nonexec", "tokens",
  // "embedding"}]}, the sentences that take part in the PSS), so the τ rule
  // can be recomputed from them. The file must not exist.
  std::string traces_path;
};

struct CalibrationResult {
  SkipkvConfig policy;  // the segmentation / PSS settings the traces were read with (rkv+sentence's)
  int64_t traces = 0, sentences = 0;  // traces recorded, sentences taking part in the PSS
  PssPairs pairs;
  TauChoice tau;
  GridPoint fullkv;  // alpha0 unused
  // The policy's own counts over the same traces (the FullKV rows'
  // skipkv.compared_pairs / skipkv.similar_pairs, EngineOptions::
  // observe_sentences), -1 when the rows have none: equal to pairs.compared /
  // pairs.similar when the recorder saw what the policy sees.
  int64_t policy_compared = -1, policy_similar = -1;
  std::vector<GridPoint> grid;
  AlphaChoice alpha;
  double paper_alpha0 = 0, paper_gamma = 0;
};

// Stage callback: "traces" before the FullKV sweep, "pss" before the pairs
// are computed, "grid" before the SEAL sweep.
using CalibrationStageCallback = std::function<void(const std::string& stage)>;

// Runs the calibration (see the file comment). The engine should observe
// sentences (EngineOptions::observe_sentences) so that the policy's own pair
// counts check the recorded ones. Errors: an existing rows file, a sweep
// error, or ChooseTau's.
StatusOr<CalibrationResult> RunCalibration(const CalibrationConfig& config, Engine& engine,
                                           const SweepProgressCallback& progress = nullptr,
                                           const CalibrationStageCallback& stage = nullptr);

// The provenance object of the preset file: model, split, problems, the
// rules, pair counts and percentiles, the α0 grid, the paper's values,
// digests, commit, and `command` (the command line that made it).
StatusOr<nlohmann::json> CalibrationProvenance(const CalibrationConfig& config,
                                               const CalibrationResult& result, const Engine& engine,
                                               const std::string& command);

// The presets: rkv+sentence-cal (τ), and when α0 was found skipkv-cal and
// rkv+sentence+steering-cal (τ, α0, γ) and seal-cal (steer_coef = α0);
// without α0, skipkv-cal carries τ only. Each carries `provenance`.
std::vector<PresetFileEntry> CalibratedPresets(const CalibrationResult& result,
                                               const nlohmann::json& provenance);

}  // namespace skipkv::eval
