// GenPosRangePenalty (see score_adjust.h).
#include "kv/score_adjust.h"

#include <algorithm>
#include <limits>

#include "util/check.h"

namespace skipkv {

GenPosRangePenalty::GenPosRangePenalty(int min_slots) : min_slots_(min_slots) { SKIPKV_CHECK(min_slots >= 1); }

void GenPosRangePenalty::Set(int32_t b, int32_t e, float lambda) {
  SKIPKV_CHECK(b <= e && lambda >= 0.f);
  ranges_[{b, e}] = lambda;
}

void GenPosRangePenalty::Add(int32_t b, int32_t e, float lambda) {
  SKIPKV_CHECK(b <= e && lambda >= 0.f);
  auto [it, inserted] = ranges_.emplace(std::make_pair(b, e), lambda);
  if (!inserted) it->second = std::max(it->second, lambda);
}

void GenPosRangePenalty::Adjust(int layer, int kv_head, std::span<const int32_t> gen_pos,
                                std::span<float> score) const {
  SKIPKV_CHECK(gen_pos.size() >= score.size());
  const auto first = gen_pos.begin(), cand_end = gen_pos.begin() + score.size();
  for (const auto& [range, lambda] : ranges_) {
    const auto lo = std::lower_bound(first, gen_pos.end(), range.first);
    auto hi = std::upper_bound(lo, gen_pos.end(), range.second);  // one past the range
    if (hi - lo < min_slots_) continue;
    hi = std::min(hi, cand_end);  // candidates only
    for (auto it = lo; it < hi; ++it) score[it - first] -= lambda;
  }
}

int64_t GenPosRangePenalty::CountPenalized(std::span<const int32_t> gen_pos) const {
  // Ranges come sorted by their first position; merge overlapping ones into
  // a union interval [lo, hi] and count the positions inside each once.
  int64_t count = 0;
  auto count_in = [&](int32_t lo, int32_t hi) {
    count += std::upper_bound(gen_pos.begin(), gen_pos.end(), hi) -
             std::lower_bound(gen_pos.begin(), gen_pos.end(), lo);
  };
  bool open = false;
  int32_t lo = 0, hi = 0;
  for (const auto& [range, lambda] : ranges_) {
    if (open && range.first <= hi) {
      hi = std::max(hi, range.second);
      continue;
    }
    if (open) count_in(lo, hi);
    lo = range.first, hi = range.second, open = true;
  }
  if (open) count_in(lo, hi);
  return count;
}

void PinnedPrefix::Adjust(int /*layer*/, int /*kv_head*/, std::span<const int32_t> gen_pos,
                          std::span<float> score) const {
  SKIPKV_CHECK(gen_pos.size() >= score.size());
  for (size_t i = 0; i < score.size() && gen_pos[i] < end_; ++i) score[i] = std::numeric_limits<float>::infinity();
}

}  // namespace skipkv
