// SkipkvSentenceHooks (see skipkv_hooks.h).
#include "sentence/sentence_hooks.h"

#include "util/check.h"

namespace skipkv {

namespace {

// Adds the wall time of a scope to `*busy`.
class BusyTimer {
 public:
  explicit BusyTimer(std::chrono::steady_clock::duration* busy)
      : busy_(busy), t0_(std::chrono::steady_clock::now()) {}
  ~BusyTimer() { *busy_ += std::chrono::steady_clock::now() - t0_; }

 private:
  std::chrono::steady_clock::duration* busy_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

SkipkvSentenceHooks::SkipkvSentenceHooks(const SkipkvConfig& config,
                                         std::shared_ptr<const SkipkvTokenSets> sets,
                                         GenPosRangePenalty* penalty, bool observe)
    : config_(config), sets_(std::move(sets)), penalty_(penalty), observe_(observe) {
  SKIPKV_CHECK(sets_ != nullptr);
  SKIPKV_CHECK(ValidateSkipkvConfig(config_).ok());
}

void SkipkvSentenceHooks::OnStart(const SequenceStart& start) {
  SKIPKV_CHECK(start.d_model > 0);
  tracker_.emplace(sets_.get(), start.d_model, config_.min_sentence_tokens);
  redundant_.emplace(start.d_model, config_.sim_threshold, config_.max_sentences, config_.lambda_rule());
  const int32_t first = static_cast<int32_t>(start.pad_len);
  tracker_->Reset(first, first + static_cast<int32_t>(start.prompt.size()));
  pending_.Clear();
  nonexec_ = pss_sentences_ = updates_ = 0;
  busy_ = {};
}

void SkipkvSentenceHooks::BeforeForward(const SequenceStep& step) {
  if (!step.compresses || !redundant_) return;
  BusyTimer timer(&busy_);
  redundant_->Update(penalty_);
  ++updates_;
}

void SkipkvSentenceHooks::OnFinalHidden(std::span<const BatchToken> rows, const float* hidden) {
  if (!tracker_) return;
  BusyTimer timer(&busy_);
  const int d = tracker_->d();
  for (size_t i = 0; i < rows.size(); ++i) {
    const BatchToken& row = rows[i];
    if (!row.valid) continue;
    // A decode row feeds the token sampled last (its text came through
    // OnToken); prefill rows are prompt tokens, whose text is not known here.
    const std::string_view text = pending_.Take(row.token);
    if (!tracker_->Add(row.token, row.gen_pos, hidden + i * static_cast<size_t>(d), text)) continue;
    const Sentence& s = tracker_->sentences().back();
    if (s.prompt && !config_.pss_include_prompt) continue;  // A3
    redundant_->Push(s, tracker_->last_embedding().data());
    ++pss_sentences_;
    if (s.nonexec) ++nonexec_;
    if (observe_) {
      redundant_->Update(nullptr);
      ++updates_;
    }
  }
}

void SkipkvSentenceHooks::OnToken(int32_t token, std::string_view text) { pending_.Set(token, text); }

std::vector<std::pair<std::string, double>> SkipkvSentenceHooks::Diagnostics() const {
  if (!tracker_) return {};
  int64_t prompt = 0;
  for (const Sentence& s : tracker_->sentences()) prompt += s.prompt;
  const double ms = std::chrono::duration<double, std::milli>(busy_).count();
  const RedundantSentenceSet::PairCounts pairs = redundant_->Pairs();
  return {
      {"skipkv.sentences", static_cast<double>(tracker_->sentences().size())},
      {"skipkv.prompt_sentences", static_cast<double>(prompt)},
      {"skipkv.pss_sentences", static_cast<double>(pss_sentences_)},
      {"skipkv.redundant_sentences", static_cast<double>(redundant_->table().size())},
      {"skipkv.nonexec_sentences", static_cast<double>(nonexec_)},
      {"skipkv.pss_updates", static_cast<double>(updates_)},
      {"skipkv.pss_comparisons", static_cast<double>(redundant_->comparisons())},
      {"skipkv.similar_pairs", static_cast<double>(pairs.similar)},
      {"skipkv.compared_pairs", static_cast<double>(pairs.compared)},
      {"skipkv.sentence_ms", ms},
  };
}

std::unique_ptr<SkipkvSentenceHooks> MakeSkipkvSentenceHooks(const SkipkvConfig& config,
                                                             std::shared_ptr<const SkipkvTokenSets> sets,
                                                             GenPosRangePenalty* penalty, bool observe) {
  return std::make_unique<SkipkvSentenceHooks>(config, std::move(sets), penalty, observe);
}

}  // namespace skipkv
