// SentenceRecorder (see sentence_recorder.h).
#include "sentence/sentence_recorder.h"

#include "util/check.h"

namespace skipkv {

SentenceRecorder::SentenceRecorder(const SkipkvConfig& config, std::shared_ptr<const SkipkvTokenSets> sets,
                                   std::vector<RecordedSentence>* out)
    : config_(config), sets_(std::move(sets)), out_(out) {
  SKIPKV_CHECK(sets_ != nullptr && out_ != nullptr);
  SKIPKV_CHECK(ValidateSkipkvConfig(config_).ok());
}

void SentenceRecorder::OnStart(const SequenceStart& start) {
  SKIPKV_CHECK(start.d_model > 0);
  tracker_ = std::make_unique<SentenceTracker>(sets_.get(), start.d_model, config_.min_sentence_tokens);
  first_pos_ = static_cast<int32_t>(start.pad_len);
  tracker_->Reset(first_pos_, first_pos_ + static_cast<int32_t>(start.prompt.size()));
  fed_.clear();
  pending_.Clear();
}

void SentenceRecorder::OnFinalHidden(std::span<const BatchToken> rows, const float* hidden) {
  if (!tracker_) return;
  const int d = tracker_->d();
  for (size_t i = 0; i < rows.size(); ++i) {
    const BatchToken& row = rows[i];
    if (!row.valid) continue;
    // As SkipkvSentenceHooks: a decode row feeds the token sampled last,
    // whose text came through OnToken; prompt rows have no text here.
    const std::string_view text = pending_.Take(row.token);
    fed_.push_back(row.token);
    if (!tracker_->Add(row.token, row.gen_pos, hidden + i * static_cast<size_t>(d), text)) continue;
    const Sentence& s = tracker_->sentences().back();
    RecordedSentence r;
    r.b = s.b;
    r.e = s.e;
    r.prompt = s.prompt;
    r.nonexec = s.nonexec;
    r.tokens.assign(fed_.begin() + (s.b - first_pos_), fed_.begin() + (s.e - first_pos_ + 1));
    r.embedding = tracker_->last_embedding();
    out_->push_back(std::move(r));
  }
}

void SentenceRecorder::OnToken(int32_t token, std::string_view text) { pending_.Set(token, text); }

}  // namespace skipkv
