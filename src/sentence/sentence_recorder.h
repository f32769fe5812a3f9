// SentenceRecorder: SequenceHooks that record every sentence of a sequence
// as SkipKV's policy sees it (docs/calibration.md): the same SentenceTracker
// (segmentation at the delimiter ids, A9's minimum length, Eq. 2's unit mean
// of the final normed hidden states) fed the same way as
// SkipkvSentenceHooks feeds it, plus each sentence's token ids. Observation
// only: it changes no token and no cache. `skipkv calibrate` computes the
// PSS of pairs of recorded sentences to choose τ.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kv/sequence_hooks.h"
#include "sentence/sentence_tracker.h"
#include "sentence/token_sets.h"
#include "skipkv/kv_config.h"

namespace skipkv {

struct RecordedSentence {
  int32_t b = 0, e = 0;          // inclusive gen_pos span
  bool prompt = false;           // a prompt sentence (A3)
  bool nonexec = false;          // holds a non-execution keyword (§6.2)
  std::vector<int32_t> tokens;   // the span's token ids
  std::vector<float> embedding;  // unit embedding [d] (Eq. 2), as the PSS reads it
};

class SentenceRecorder : public SequenceHooks {
 public:
  // `config`: the method's segmentation fields (delimiters as given to
  // `sets`, min_sentence_tokens); `sets` not null; `out` (not null, must
  // outlive the hooks) receives every closed sentence in order.
  SentenceRecorder(const SkipkvConfig& config, std::shared_ptr<const SkipkvTokenSets> sets,
                   std::vector<RecordedSentence>* out);

  void OnStart(const SequenceStart& start) override;
  bool WantsFinalHidden() const override { return true; }
  void OnFinalHidden(std::span<const BatchToken> rows, const float* hidden) override;
  void OnToken(int32_t token, std::string_view text) override;

 private:
  SkipkvConfig config_;
  std::shared_ptr<const SkipkvTokenSets> sets_;
  std::vector<RecordedSentence>* out_;
  std::unique_ptr<SentenceTracker> tracker_;
  int32_t first_pos_ = 0;
  std::vector<int32_t> fed_;  // token ids fed so far, by gen_pos - first_pos_
  PendingTokenText pending_;  // text of the sampled token not yet fed
};

}  // namespace skipkv
