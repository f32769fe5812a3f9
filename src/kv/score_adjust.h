// Score adjustments over gen_pos ranges: the slot-level half of SkipKV's
// sentence penalty (docs/spec.md §6.6 (c), Eq. 6/8). The sentence bookkeeping that
// decides the ranges and their λ (PSS, redundant set T) lives elsewhere; this
// maps each inclusive gen_pos range [b, e] onto every head's slots through
// that head's own gen_pos (Φ via gen_pos, docs/spec.md §6.1) and subtracts λ from
// the scores of the candidate slots found there.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <utility>

#include "kv/kv_policy.h"

namespace skipkv {

class GenPosRangePenalty : public SlotScoreAdjuster {
 public:
  // min_slots (>= 1): a range is penalised only when at least this many of
  // the head's slots (window included) lie in it. 1 = every surviving slot
  // (the project's default); 2 = the SkipKV authors' code, which skips a
  // range whose per-head slot range has start == end (issue 38, row 9).
  explicit GenPosRangePenalty(int min_slots = 1);
  // Records range [b, e] (inclusive gen_pos) with penalty lambda; a range
  // already present keeps the larger penalty (spec A7: max, order-independent).
  // Requires b <= e and lambda >= 0.
  void Add(int32_t b, int32_t e, float lambda);
  // Records range [b, e] with penalty lambda, replacing a present one's
  // (the authors' "last qualifying pair" rule, issue 38 row 10).
  void Set(int32_t b, int32_t e, float lambda);
  int min_slots() const { return min_slots_; }
  void Clear() { ranges_.clear(); }
  size_t size() const { return ranges_.size(); }
  const std::map<std::pair<int32_t, int32_t>, float>& ranges() const { return ranges_; }

  // gen_pos: all slots of the head (window included). For each range: lo =
  // lower_bound(gen_pos, b), hi = upper_bound(gen_pos, e) − 1; skipped when
  // hi − lo + 1 < min_slots; then clamped to the candidates (hi ≤
  // score.size() − 1, window slots are never candidates) and score[lo..hi]
  // −= λ when lo ≤ hi. Overlapping ranges add.
  void Adjust(int layer, int kv_head, std::span<const int32_t> gen_pos,
              std::span<float> score) const override;
  // Slots of `gen_pos` (strictly ascending) inside the union of the ranges.
  int64_t CountPenalized(std::span<const int32_t> gen_pos) const override;
  int64_t RangeCount() const override { return static_cast<int64_t>(ranges_.size()); }

 private:
  int min_slots_;
  std::map<std::pair<int32_t, int32_t>, float> ranges_;
};

// PinnedPrefix (pin_prompt, issue 39): the candidates with gen_pos < end
// score +inf, so they are kept before any other candidate (ties between
// them go to the lower gen_pos). end = 0 pins nothing.
class PinnedPrefix : public SlotScoreAdjuster {
 public:
  explicit PinnedPrefix(int64_t end = 0) : end_(end) {}
  void set_end(int64_t end) { end_ = end; }
  int64_t end() const { return end_; }
  void Adjust(int layer, int kv_head, std::span<const int32_t> gen_pos,
              std::span<float> score) const override;

 private:
  int64_t end_;
};

}  // namespace skipkv
