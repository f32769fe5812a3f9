#include "steer/steering_hooks.h"

#include <algorithm>

#include "util/check.h"

namespace skipkv {

SteeringHooks::SteeringHooks(const SteeringConfig& config, std::shared_ptr<const std::vector<float>> vector,
                             int engine_layer, std::shared_ptr<const SkipkvTokenSets> tokens,
                             std::function<int64_t()> nonexec_count)
    : config_(config),
      vector_(std::move(vector)),
      layer_(engine_layer),
      tokens_(std::move(tokens)),
      nonexec_count_(std::move(nonexec_count)),
      alpha_(config.adaptive ? config.alpha0 : config.coef) {
  SKIPKV_CHECK(vector_ != nullptr && tokens_ != nullptr);
  SKIPKV_CHECK_MSG(!config_.adaptive || nonexec_count_, "adaptive steering needs the sentence tracker's N_o");
}

void SteeringHooks::UpdateThink(int32_t token) {
  if (token == tokens_->think_start) in_think_ = true;
  if (token == tokens_->think_end) in_think_ = false;
}

void SteeringHooks::OnStart(const SequenceStart& start) {
  SKIPKV_CHECK(static_cast<int>(vector_->size()) == start.d_model);
  in_think_ = config_.assume_think;
  for (size_t i = 0; i + 1 < start.prompt.size(); ++i) UpdateThink(start.prompt[i]);
}

void SteeringHooks::BeforeForward(const SequenceStep& step) {
  partial_prefill_ = step.kind == ForwardKind::kPrefillPartial;
  if (!config_.adaptive) return;
  if (config_.cadence == SteerCadence::kSentenceClose || step.compresses) {
    nonexec_ = nonexec_count_();
    alpha_ = std::min(config_.alpha0 + config_.gamma * static_cast<float>(nonexec_), config_.alpha_max);
  }
}

void SteeringHooks::OnResidual(int layer, std::span<const BatchToken> rows, float* hidden) {
  if (layer != layer_ || partial_prefill_ || rows.empty()) return;
  const size_t r = rows.size() - 1;  // the last new token (pads, if any, come first)
  const BatchToken& x = rows[r];
  if (!x.last || !x.valid) return;
  UpdateThink(x.token);
  if (!in_think_ || !tokens_->IsSplit(x.token)) return;
  const size_t d = vector_->size();
  float* h = hidden + r * d;
  const float* v = vector_->data();
  for (size_t i = 0; i < d; ++i) h[i] += alpha_ * v[i];
  ++events_;
  steered_.push_back(x.gen_pos);
}

std::vector<std::pair<std::string, double>> SteeringHooks::Diagnostics() const {
  std::vector<std::pair<std::string, double>> d = {
      {"steer.events", static_cast<double>(events_)},
      {"steer.alpha", alpha_},
      {"steer.layer", static_cast<double>(layer_ - 1)},
  };
  if (config_.adaptive) d.emplace_back("steer.nonexec", static_cast<double>(nonexec_));
  return d;
}

}  // namespace skipkv
