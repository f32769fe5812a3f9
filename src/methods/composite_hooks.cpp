// CompositeSequenceHooks (see composite_hooks.h).
#include "methods/composite_hooks.h"

namespace skipkv::methods {

CompositeSequenceHooks::CompositeSequenceHooks(std::vector<std::unique_ptr<SequenceHooks>> parts) {
  for (auto& p : parts)
    if (p) parts_.push_back(std::move(p));
}

std::unique_ptr<SequenceHooks> CompositeSequenceHooks::Combine(std::vector<std::unique_ptr<SequenceHooks>> parts) {
  std::vector<std::unique_ptr<SequenceHooks>> live;
  for (auto& p : parts)
    if (p) live.push_back(std::move(p));
  if (live.empty()) return nullptr;
  if (live.size() == 1) return std::move(live[0]);
  return std::make_unique<CompositeSequenceHooks>(std::move(live));
}

void CompositeSequenceHooks::OnStart(const SequenceStart& start) {
  for (auto& p : parts_) p->OnStart(start);
}

void CompositeSequenceHooks::BeforeForward(const SequenceStep& step) {
  for (auto& p : parts_) p->BeforeForward(step);
}

bool CompositeSequenceHooks::WantsResidual(int layer) const {
  for (const auto& p : parts_)
    if (p->WantsResidual(layer)) return true;
  return false;
}

void CompositeSequenceHooks::OnResidual(int layer, std::span<const BatchToken> rows, float* hidden) {
  for (auto& p : parts_)
    if (p->WantsResidual(layer)) p->OnResidual(layer, rows, hidden);
}

bool CompositeSequenceHooks::WantsFinalHidden() const {
  for (const auto& p : parts_)
    if (p->WantsFinalHidden()) return true;
  return false;
}

void CompositeSequenceHooks::OnFinalHidden(std::span<const BatchToken> rows, const float* hidden) {
  for (auto& p : parts_)
    if (p->WantsFinalHidden()) p->OnFinalHidden(rows, hidden);
}

void CompositeSequenceHooks::OnToken(int32_t token, std::string_view text) {
  for (auto& p : parts_) p->OnToken(token, text);
}

std::vector<std::pair<std::string, double>> CompositeSequenceHooks::Diagnostics() const {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& p : parts_) {
    auto d = p->Diagnostics();
    out.insert(out.end(), d.begin(), d.end());
  }
  return out;
}

}  // namespace skipkv::methods
