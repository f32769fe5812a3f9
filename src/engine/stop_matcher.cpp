// Stop-string matching on a streamed text; see stop_matcher.h.
#include "engine/stop_matcher.h"

#include <algorithm>

namespace skipkv::engine {

namespace {
const std::string kEmpty;
}

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

const std::string& StopMatcher::matched_string() const { return matched_ >= 0 ? stops_[matched_] : kEmpty; }

std::string StopMatcher::Push(std::string_view text) {
  if (matched()) return {};
  if (stops_.empty()) return std::string(text);
  held_.append(text);
  // Everything before held_ was released because no stop string could start
  // there, so a match can only begin inside held_. The earliest match wins;
  // among matches at the same offset, the first listed.
  size_t best = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t at = held_.find(stops_[i]);
    if (at < best) {
      best = at;
      matched_ = static_cast<int>(i);
    }
  }
  if (best != std::string::npos) {
    std::string out = held_.substr(0, best);
    held_.clear();
    return out;
  }
  // Hold back the longest suffix of held_ that is a proper prefix of some
  // stop string. Such a suffix starts with a stop string's first byte, so
  // for UTF-8 stop strings the cut falls on a character boundary.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > keep; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::Flush() {
  std::string out;
  out.swap(held_);
  return matched() ? std::string() : out;
}

}  // namespace skipkv::engine
