// StopMatcher: finds stop strings in a streamed, decoded text. Text is pushed
// piece by piece (as the detokenizer finalises it); the matcher releases only
// what can no longer be the beginning of a stop string, so a streaming client
// never sees text that a later match would retract.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace skipkv::engine {

class StopMatcher {
 public:
  // `stops` must be non-empty strings (the engine validates requests).
  explicit StopMatcher(std::vector<std::string> stops = {});

  // Appends `text`; returns the text that is now final. After a match it
  // returns the text before the stop string and matched() turns true; the
  // stop string and anything after it are dropped, and later calls return "".
  std::string Push(std::string_view text);
  // End of stream: releases the held-back tail (no match is possible any more).
  std::string Flush();

  bool matched() const { return matched_ >= 0; }
  // The stop string that matched ("" if none).
  const std::string& matched_string() const;
  // Bytes held back because they may start a stop string.
  size_t held() const { return held_.size(); }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  int matched_ = -1;
};

}  // namespace skipkv::engine
