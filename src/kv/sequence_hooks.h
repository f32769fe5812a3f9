// SequenceHooks: the per-request extension point of the generation loop.
// SkipKV's sentence bookkeeping (segmentation from the final hidden states,
// PSS updates before a compressing forward, the redundant-sentence score
// penalty) and SEAL-style steering (adding α·V to the residual stream at a
// layer) attach here, as do analysis tools; the loop itself stays
// method-agnostic (spec §6.4–6.5).
//
// One SequenceHooks object per request, created by the factory when the
// request starts (after its cache and compressor exist) and destroyed when it
// finishes. All calls come from the thread that runs Engine::Generate, in
// this order per forward: BeforeForward, OnResidual (per wanted layer),
// OnFinalHidden, then (after the compressor ran) OnToken for a sampled token.
// Hooks cost nothing for requests without them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kv/kv_compressor.h"  // KvCompressor, ForwardKind
#include "model/forward.h"     // BatchToken

namespace skipkv {

struct Request;

struct SequenceStart {
  size_t index = 0;                      // request index
  std::span<const int32_t> prompt;       // real prompt ids
  int64_t pad_len = 0;                   // Δpad (padded mode): gen_pos of the first real token
  int d_model = 0;                       // width of hidden-state rows
  KvCompressor* compressor = nullptr;    // e.g. to install a score adjuster; outlives the hooks
};

// The forward about to run for this sequence.
struct SequenceStep {
  int64_t l_before = 0;  // tokens processed before it (= gen_pos of its first token)
  int64_t l_after = 0;
  ForwardKind kind = ForwardKind::kDecode;
  // The compressor's schedule says this forward compresses (layers holding
  // at least B slots are compacted right after it; spec §6.5 step 7 runs
  // the PSS update before such a forward).
  bool compresses = false;
};

class SequenceHooks {
 public:
  virtual ~SequenceHooks() = default;

  virtual void OnStart(const SequenceStart& start) {}
  virtual void BeforeForward(const SequenceStep& step) {}

  // Residual stream at the input of `layer` (before its attention norm) for
  // this sequence's rows of the forward: rows[i] describes hidden row i,
  // hidden is [rows.size()][d_model] and may be modified (steering). Called
  // only for layers where WantsResidual(layer) is true. layer is in
  // [0, n_layers]: n_layers is the output of the last layer (the final
  // norm's input).
  virtual bool WantsResidual(int layer) const { return false; }
  virtual void OnResidual(int layer, std::span<const BatchToken> rows, float* hidden) {}

  // The final RMS-normed hidden state (the LM head's input) of this
  // sequence's rows, [rows.size()][d_model], read-only. Pad rows
  // (valid == false) are included; skip them.
  virtual bool WantsFinalHidden() const { return false; }
  virtual void OnFinalHidden(std::span<const BatchToken> rows, const float* hidden) {}

  // A token was sampled (before stop conditions are checked; an
  // end-of-generation token is reported too). `text` is the decoded piece of
  // that token: what the request's streaming detokenizer returned for it,
  // before stop-string matching. It may be empty (an incomplete UTF-8
  // character, whose bytes come with a later token; a special or
  // end-of-generation token). Valid only during the call.
  virtual void OnToken(int32_t token, std::string_view text) {}

  // Name/value pairs copied into GenerationResult::diagnostics at the end
  // (e.g. "skipkv.redundant_sentences", "steer.alpha").
  virtual std::vector<std::pair<std::string, double>> Diagnostics() const { return {}; }
};

// Creates the hooks of a request (nullptr = none for this request).
using SequenceHooksFactory = std::function<std::unique_ptr<SequenceHooks>(size_t index, const Request& request)>;

}  // namespace skipkv
