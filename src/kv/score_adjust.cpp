// GenPosRangePenalty (see score_adjust.h).
#include "kv/score_adjust.h"

#include <algorithm>

#include "util/check.h"

namespace skipkv {

void GenPosRangePenalty::Add(int32_t b, int32_t e, float lambda) {
  SKIPKV_CHECK(b <= e && lambda >= 0.f);
  auto [it, inserted] = ranges_.emplace(std::make_pair(b, e), lambda);
  if (!inserted) it->second = std::max(it->second, lambda);
}

void GenPosRangePenalty::Adjust(int layer, int kv_head, std::span<const int32_t> gen_pos,
                                std::span<float> score) const {
  const auto first = gen_pos.begin(), end = gen_pos.begin() + score.size();
  for (const auto& [range, lambda] : ranges_) {
    const auto lo = std::lower_bound(first, end, range.first);
    const auto hi = std::upper_bound(first, end, range.second);  // one past the range, clamped to candidates
    for (auto it = lo; it < hi; ++it) score[it - first] -= lambda;
  }
}

}  // namespace skipkv
