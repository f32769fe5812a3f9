// SentenceTracker (see sentence_tracker.h).
#include "sentence/sentence_tracker.h"

#include <algorithm>
#include <cmath>

#include "util/check.h"

namespace skipkv {

namespace {

bool IsWordChar(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

}  // namespace

SentenceTracker::SentenceTracker(const SkipkvTokenSets* sets, int d, int min_sentence_tokens)
    : sets_(sets), d_(d), min_tokens_(min_sentence_tokens), open_sum_(d, 0.0), last_emb_(d, 0.f) {
  SKIPKV_CHECK(sets_ != nullptr && d_ > 0 && min_tokens_ >= 1);
  for (const std::string& k : sets_->nonexec_text) max_keyword_ = std::max(max_keyword_, k.size());
}

void SentenceTracker::Reset(int32_t first_pos, int32_t prompt_end) {
  prompt_end_ = prompt_end;
  next_pos_ = open_b_ = first_pos;
  open_cnt_ = 0;
  open_nonexec_ = false;
  std::fill(open_sum_.begin(), open_sum_.end(), 0.0);
  tail_.clear();
  sentences_.clear();
  std::fill(last_emb_.begin(), last_emb_.end(), 0.f);
  dropped_ = 0;
}

// Appends `text` to the remembered tail and reports whether a fallback
// keyword now ends inside the new text, at the start of a word. The tail
// keeps max_keyword_ bytes: enough for a keyword split over several tokens
// plus the byte before it (the word-start check).
bool SentenceTracker::MatchesText(std::string_view text) {
  if (max_keyword_ == 0 || text.empty()) return false;
  const size_t old = tail_.size();
  tail_.append(text);
  bool hit = false;
  for (const std::string& k : sets_->nonexec_text) {
    // Occurrences that end after the old tail, i.e. use at least one new byte.
    const size_t from = old >= k.size() ? old - k.size() + 1 : 0;
    for (size_t at = tail_.find(k, from); at != std::string::npos; at = tail_.find(k, at + 1)) {
      const bool word_start = k.front() == ' ' || at == 0 || !IsWordChar(tail_[at - 1]);
      if (word_start) {
        hit = true;
        break;
      }
    }
    if (hit) break;
  }
  if (tail_.size() > max_keyword_) tail_.erase(0, tail_.size() - max_keyword_);
  return hit;
}

bool SentenceTracker::Add(int32_t token, int32_t pos, const float* hidden, std::string_view text) {
  SKIPKV_CHECK(pos == next_pos_);
  next_pos_ = pos + 1;
  for (int i = 0; i < d_; ++i) open_sum_[i] += hidden[i];
  ++open_cnt_;
  if (sets_->IsNonExec(token)) open_nonexec_ = true;
  if (MatchesText(text)) open_nonexec_ = true;
  if (!sets_->IsDelimiter(token)) return false;

  const bool long_enough = open_cnt_ >= min_tokens_;
  if (long_enough) {
    Sentence s;
    s.b = open_b_;
    s.e = pos;
    s.nonexec = open_nonexec_;
    s.prompt = pos < prompt_end_;
    sentences_.push_back(s);
    // Eq. 2: mean over the span, then unit norm. The 1/count cancels in the
    // normalisation except through ε; kept for the literal definition.
    double norm2 = 0.0;
    for (int i = 0; i < d_; ++i) {
      const double m = open_sum_[i] / static_cast<double>(open_cnt_);
      norm2 += m * m;
    }
    const double inv = 1.0 / (std::sqrt(norm2) + 1e-12);
    for (int i = 0; i < d_; ++i) {
      last_emb_[i] = static_cast<float>(open_sum_[i] / static_cast<double>(open_cnt_) * inv);
    }
  } else {
    ++dropped_;
  }
  open_b_ = pos + 1;
  open_cnt_ = 0;
  open_nonexec_ = false;
  std::fill(open_sum_.begin(), open_sum_.end(), 0.0);
  return long_enough;
}

}  // namespace skipkv
