// SentenceTracker: SkipKV's per-sequence sentence segmentation and sentence
// embeddings (docs/spec.md §6.1, §6.5 step 5, Eq. 2, A3, A6, A9).
//
// Tokens are fed in gen_pos order together with the final normed hidden
// state of their forward (the LM head's input). A sentence is the inclusive
// gen_pos span [b, e] from the token after the previous delimiter (or the
// first real token) up to and including a delimiter token. A span with fewer
// than min_sentence_tokens tokens is not a sentence: it is dropped and the
// next span starts after its delimiter (A9; this also swallows runs of
// consecutive delimiters). Its embedding is the mean of the span's hidden
// rows, scaled to unit L2 norm (v / (‖v‖ + 1e-12)); only a running double sum
// of the open span is kept, never per-token hidden states.
//
// A sentence is NONEXEC if one of its tokens is in N, or (text fallback,
// A6) its text contains a keyword of SkipkvTokenSets::nonexec_text; the text
// is known only for tokens fed with one (generated tokens, through
// SequenceHooks::OnToken), so prompt tokens match by id only.
//
// A sentence with e < prompt_end (the padded prompt length) is a prompt
// sentence (A3). The tracker labels it; the PSS and N_o rules decide what to
// do with it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sentence/token_sets.h"

namespace skipkv {

struct Sentence {
  int32_t b = 0, e = 0;  // inclusive gen_pos span; e is the delimiter's gen_pos
  bool nonexec = false;
  bool prompt = false;  // e < prompt_end
  int64_t tokens() const { return static_cast<int64_t>(e) - b + 1; }
};

class SentenceTracker {
 public:
  // `d` = hidden width (> 0); `sets` must outlive the tracker.
  SentenceTracker(const SkipkvTokenSets* sets, int d, int min_sentence_tokens);

  // Starts a sequence: the first real token has gen_pos first_pos (= Δpad),
  // the padded prompt ends before gen_pos prompt_end. Clears everything.
  void Reset(int32_t first_pos, int32_t prompt_end);

  // Feeds one real token at gen_pos `pos` (strictly increasing from
  // first_pos, no gaps) with its hidden row [d] and its decoded text (may be
  // empty). Returns true if it closed a sentence (then the new sentence is
  // sentences().back() and its unit embedding last_embedding()).
  bool Add(int32_t token, int32_t pos, const float* hidden, std::string_view text);

  const std::vector<Sentence>& sentences() const { return sentences_; }
  // The unit embedding [d] of the most recently closed sentence.
  const std::vector<float>& last_embedding() const { return last_emb_; }
  int d() const { return d_; }
  int32_t next_pos() const { return next_pos_; }  // gen_pos expected by the next Add
  int64_t open_tokens() const { return open_cnt_; }
  int64_t dropped_spans() const { return dropped_; }  // spans shorter than min_sentence_tokens

 private:
  bool MatchesText(std::string_view text);

  const SkipkvTokenSets* sets_;
  int d_;
  int min_tokens_;
  int32_t prompt_end_ = 0;
  int32_t next_pos_ = 0;
  int32_t open_b_ = 0;
  int64_t open_cnt_ = 0;
  bool open_nonexec_ = false;
  std::vector<double> open_sum_;  // [d]
  std::string tail_;              // the last bytes of text seen (keyword matches across tokens)
  size_t max_keyword_ = 0;
  std::vector<Sentence> sentences_;
  std::vector<float> last_emb_;
  int64_t dropped_ = 0;
};

// The decoded text of the token sampled last, kept until that token is fed:
// hooks get a sampled token's text (OnToken) one forward before its hidden
// row (OnFinalHidden). Shared by SkipkvSentenceHooks and SentenceRecorder,
// so both feed their tracker the same text.
class PendingTokenText {
 public:
  void Set(int32_t token, std::string_view text) {
    token_ = token;
    text_.assign(text);
    valid_ = true;
  }
  // The text to feed with a row of `token`: the pending text if it is that
  // token's, else empty (prompt rows). Either way nothing is pending after;
  // the view lives until the next Set.
  std::string_view Take(int32_t token) {
    const bool match = valid_ && token == token_;
    valid_ = false;
    return match ? std::string_view(text_) : std::string_view();
  }
  void Clear() { valid_ = false; }

 private:
  std::string text_;
  int32_t token_ = -1;
  bool valid_ = false;
};

}  // namespace skipkv
