// CompositeSequenceHooks: the hooks of one request when several parts bring
// some (the method's sentence tracker, later its steering, and an
// app-installed SequenceHooksFactory on top). Every call is forwarded to each
// part in order; residual / final-hidden calls only to the parts that want
// them; Diagnostics are concatenated in part order.
#pragma once

#include <memory>
#include <vector>

#include "kv/sequence_hooks.h"

namespace skipkv::methods {

class CompositeSequenceHooks final : public SequenceHooks {
 public:
  // Null parts are dropped.
  explicit CompositeSequenceHooks(std::vector<std::unique_ptr<SequenceHooks>> parts);
  // nullptr if no part is left, the part itself if only one is, else a composite.
  static std::unique_ptr<SequenceHooks> Combine(std::vector<std::unique_ptr<SequenceHooks>> parts);

  void OnStart(const SequenceStart& start) override;
  void BeforeForward(const SequenceStep& step) override;
  bool WantsResidual(int layer) const override;
  void OnResidual(int layer, std::span<const BatchToken> rows, float* hidden) override;
  bool WantsFinalHidden() const override;
  void OnFinalHidden(std::span<const BatchToken> rows, const float* hidden) override;
  void OnToken(int32_t token, std::string_view text) override;
  std::vector<std::pair<std::string, double>> Diagnostics() const override;

 private:
  std::vector<std::unique_ptr<SequenceHooks>> parts_;
};

}  // namespace skipkv::methods
