// SEAL's offline thought segmentation and classification (spec §4.1 steps
// 4-6) and the per-category mean hidden states it produces.
//
// Segmentation: keep the tokens strictly between the first <think> and the
// next </think> (or the end; with no <think> at all, from the response start,
// A13). Boundaries are the SPLIT tokens in that region (every token whose
// text contains "\n\n") plus the region end; step i is the text strictly
// between boundary i and boundary i + 1, represented by the hidden state at
// boundary token i (the "\n\n" that precedes it). Text before the first SPLIT
// is not a step.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kv/sequence_hooks.h"
#include "steer/steering_vector.h"
#include "sentence/token_sets.h"
#include "util/status.h"

namespace skipkv {

enum class ThoughtKind { kExecution = 0, kReflection = 1, kTransition = 2 };
const char* ThoughtKindName(ThoughtKind k);  // "execution", "reflection", "transition"

// Spec §4.1 step 5, on the step text stripped of surrounding whitespace and
// lower-cased: reflection if it starts with "wait" or contains verify, make
// sure, hold on, think again, 's correct, 's incorrect, let me check, seems
// right; else transition if it starts with "alternatively" or contains
// "think differenly" (SEAL's typo, kept for parity), another way / approach /
// method / solution / strategy / technique; else execution.
ThoughtKind ClassifyThoughtStep(std::string_view text);

struct ThoughtStep {
  int64_t split_pos = 0;  // position of the SPLIT token whose hidden state represents the step
  ThoughtKind kind = ThoughtKind::kExecution;
};

// `ids` is the whole teacher-forced sequence (prompt + response), `decode`
// turns ids into text (special tokens skipped).
std::vector<ThoughtStep> SegmentThought(std::span<const int32_t> ids, int64_t response_begin,
                                        const SkipkvTokenSets& tokens,
                                        const std::function<std::string(std::span<const int32_t>)>& decode);

// Sums of hidden states per category and direction index (direction l = the
// input of layer l + 1, steering_vector.h), in double, with per-category
// step counts. Saved to / loaded from a small binary checkpoint so an
// extraction can resume.
class CategoryMeans {
 public:
  CategoryMeans() = default;
  CategoryMeans(int n_directions, int64_t width);

  int n_directions() const { return n_dirs_; }
  int64_t width() const { return width_; }
  int64_t count(ThoughtKind k) const { return counts_[static_cast<int>(k)]; }
  int64_t responses_done = 0;  // teacher-forced responses folded in (resume point)

  void AddRow(ThoughtKind k, int direction, const float* hidden);
  void CountStep(ThoughtKind k) { ++counts_[static_cast<int>(k)]; }

  // The category's mean per direction (empty directions map if no step).
  ControlVector Mean(ThoughtKind k) const;
  // V = mean(execution) - mean(reflection ∪ transition), the SkipKV sign
  // (spec §6.2); InvalidArgument when a side has no step.
  StatusOr<ControlVector> Difference() const;

  Status Save(const std::string& path) const;  // atomic (write + rename)
  static StatusOr<CategoryMeans> Load(const std::string& path);

 private:
  int n_dirs_ = 0;
  int64_t width_ = 0;
  std::array<int64_t, 3> counts_{};
  std::vector<double> sums_;  // [3][n_dirs][width]
};

// Teacher-forcing hooks: for rows whose position is a step's SPLIT token,
// adds the residual at the input of layers 1 .. n_layers into `means`
// (direction = layer - 1; layer n_layers is the last layer's output, the
// final norm's input, so the directions are 0 .. n_layers - 1) and counts the
// step once. `means` must have n_layers directions.
class HiddenStateCollector : public SequenceHooks {
 public:
  HiddenStateCollector(std::vector<ThoughtStep> steps, int n_layers, CategoryMeans* means);
  bool WantsResidual(int layer) const override { return layer >= 1 && layer <= n_layers_; }
  void OnResidual(int layer, std::span<const BatchToken> rows, float* hidden) override;
  int64_t rows_seen() const { return rows_seen_; }

 private:
  std::vector<ThoughtStep> steps_;  // sorted by split_pos
  int n_layers_;
  CategoryMeans* means_;
  int64_t rows_seen_ = 0;
};

}  // namespace skipkv
