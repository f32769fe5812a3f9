// Score adjustments over gen_pos ranges: the slot-level half of SkipKV's
// sentence penalty (spec §6.6 (c), Eq. 6/8). The sentence bookkeeping that
// decides the ranges and their λ (PSS, redundant set T) lives elsewhere; this
// maps each inclusive gen_pos range [b, e] onto every head's slots through
// that head's own gen_pos (Φ via gen_pos, spec §6.1) and subtracts λ from
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
  // Records range [b, e] (inclusive gen_pos) with penalty lambda; a range
  // already present keeps the larger penalty (spec A7: max, order-independent).
  // Requires b <= e and lambda >= 0.
  void Add(int32_t b, int32_t e, float lambda);
  void Clear() { ranges_.clear(); }
  size_t size() const { return ranges_.size(); }
  const std::map<std::pair<int32_t, int32_t>, float>& ranges() const { return ranges_; }

  // For each range: lo = lower_bound(gen_pos, b), hi = upper_bound(gen_pos, e)
  // − 1, clamped to the candidates (hi ≤ score.size() − 1, window slots are
  // never candidates); score[lo..hi] −= λ when lo ≤ hi. Overlapping ranges add.
  void Adjust(int layer, int kv_head, std::span<const int32_t> gen_pos,
              std::span<float> score) const override;
  // Slots of `gen_pos` (strictly ascending) inside the union of the ranges.
  int64_t CountPenalized(std::span<const int32_t> gen_pos) const override;
  int64_t RangeCount() const override { return static_cast<int64_t>(ranges_.size()); }

 private:
  std::map<std::pair<int32_t, int32_t>, float> ranges_;
};

}  // namespace skipkv
