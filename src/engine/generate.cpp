// Engine::Generate on the Batcher (batcher.h): every request is prepared and
// validated first (the first failure is returned, naming the request, before
// any model work), padded mode groups and pads them (docs/spec.md §6.3), then the
// loop steps until every sequence has finished.
#include <algorithm>
#include <string>

#include "engine/batcher.h"
#include "engine/engine_impl.h"
#include "engine/scheduler.h"

namespace skipkv {

StatusOr<std::vector<GenerationResult>> Engine::Impl::Generate(std::span<const Request> requests,
                                                               const TokenCallback& cb,
                                                               const FinishedCallback& on_finished,
                                                               const LogitsCallback& on_logits) {
  engine::BatcherOptions bo;
  bo.padded = options.kv.pad_policy == PadPolicy::kPadded;
  bo.max_active = options.batch_size;
  engine::Batcher batcher(*this, bo, cb, on_logits ? &on_logits : nullptr);
  std::vector<std::unique_ptr<engine::Sequence>> seqs(requests.size());
  std::vector<int64_t> lens(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    auto s = batcher.Prepare(requests[i], i);
    if (!s.ok()) return s.status().WithContext("request " + std::to_string(i));
    seqs[i] = std::move(s).value();
    lens[i] = static_cast<int64_t>(seqs[i]->prompt.size());
  }
  if (bo.padded) {
    // Batch grouping (docs/spec.md §6.3) and the left padding of each batch; the pad
    // lengths must leave each row's policy room for real tokens (spec A10).
    const auto batches = engine::GroupBatches(lens, options.batch_size, options.sort_by_length);
    for (size_t b = 0; b < batches.size(); ++b) {
      const std::vector<int64_t> pads = engine::PadLens(lens, batches[b]);
      for (size_t k = 0; k < batches[b].size(); ++k) {
        engine::Sequence& s = *seqs[batches[b][k]];
        Status st = ValidatePadLens(s.method->config().kv, std::span<const int64_t>(&pads[k], 1));
        if (!st.ok()) {
          return st.WithContext("padded batch " + std::to_string(b) + ", request " + std::to_string(s.index));
        }
        s.group = static_cast<int64_t>(b);
        s.pad_len = pads[k];
        s.result.batch = static_cast<int64_t>(b);
      }
    }
  }
  SKIPKV_RETURN_IF_ERROR(batcher.OpenTrace());
  for (auto& s : seqs) batcher.Add(std::move(s));
  std::vector<GenerationResult> results(requests.size());
  while (true) {
    SKIPKV_ASSIGN_OR_RETURN(bool ran, batcher.Step());
    for (auto& s : batcher.TakeFinished()) {
      if (on_finished) on_finished(s->result);  // as each request ends (after the step that ended it)
      results[s->index] = std::move(s->result);
    }
    if (!ran && batcher.idle()) break;
    if (!ran) return Internal("generation stalled with " + std::to_string(batcher.waiting()) + " waiting requests");
  }
  batcher.FlushTrace();
  return results;
}

}  // namespace skipkv
