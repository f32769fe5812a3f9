// KV-cache eviction policies: configuration, validation, and the KvPolicy
// interface ("what to evict"). The cache (SequenceKvCache::Compact) does the
// "how to compact"; the schedule and per-sequence bookkeeping live in
// kv_compressor.h. The maths is specified in docs/kv-policies.md and
// /work/shared/spec/algorithms.md §2, §3, §6.6.
//
// Vocabulary (spec §0.2): B = budget = slots per (layer, KV head) left after
// a compression, the recent window included; α = window = observation
// window of queries and the number of most recent slots always kept; Δt =
// interval between compressions, counted on l = tokens processed so far
// (padded prompt + fed tokens, reset per request); Δpad = left-padding slots
// of a row in the padded batch mode.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kv/kv_cache.h"
#include "skipkv/kv_config.h"  // KvPolicyConfig, PadPolicy, KnownKvPolicyNames, ValidateKvPolicyConfig
#include "util/status.h"

namespace skipkv {

// The checks every evicting policy's factory runs first: window ≥ 1,
// budget > window, interval ≥ 1, mix_lambda in [0, 1], pool_kernel odd.
// `full` does not call it (it uses none of these fields).
Status ValidateEvictionConfig(const KvPolicyConfig& config);

// Padded mode: checks that every row of a batch with left paddings
// `pad_lens` (Δpad per row) still has room for real tokens, i.e. that
// Δpad ≤ KvPolicy::max_pad_len() (spec A10: B − α > max Δpad for
// rkv/snapkv). OK for every batch in ragged mode and for `full`.
Status ValidatePadLens(const KvPolicyConfig& config, std::span<const int64_t> pad_lens);

// True when `config` names a valid policy that evicts (false for `full` and
// for invalid configurations): for callers that only hold a config, e.g. to
// print the budget only when it matters.
bool KvPolicyEvicts(const KvPolicyConfig& config);
// Same for KvPolicy::uses_sentences(); the skipkv fields do not affect it
// (an invalid τ still names a policy that uses sentences).
bool KvPolicyUsesSentences(const KvPolicyConfig& config);

// ---- Extension points (SkipKV) ----------------------------------------------

// A per-slot additive adjustment of the candidate scores before selection
// (higher score = kept). SkipKV subtracts λ over the gen_pos ranges of
// redundant sentences (spec §6.6 (c)); see GenPosRangePenalty in
// kv/score_adjust.h. Must be thread-safe for concurrent calls on different
// layers (it is read-only during a compression).
class SlotScoreAdjuster {
 public:
  virtual ~SlotScoreAdjuster() = default;
  // score[n] for n in [0, score.size()) belongs to candidate slot n of
  // (layer, kv_head); gen_pos covers all slots of the head (the candidates
  // first, then the recent window; strictly ascending, size >= score.size()).
  virtual void Adjust(int layer, int kv_head, std::span<const int32_t> gen_pos,
                      std::span<float> score) const = 0;
  // How many of `gen_pos` (strictly ascending) this adjuster penalises, each
  // counted once; the compressor reports it for the evicted slots (SkipKV's
  // "redundant tokens evicted per compression", spec §6.10). 0 by default.
  virtual int64_t CountPenalized(std::span<const int32_t> gen_pos) const { return 0; }
  // How many ranges the adjuster penalises (SkipKV: |T|), for the trace. 0 by default.
  virtual int64_t RangeCount() const { return 0; }
};

// Per-sequence policy state, created by KvPolicy::NewSequenceState and owned
// by the sequence's KvCompressor (e.g. SkipKV's redundant-sentence table).
class KvSequenceState {
 public:
  virtual ~KvSequenceState() = default;
  // Adjustment to apply to this sequence's scores, or nullptr.
  virtual const SlotScoreAdjuster* adjuster() const { return nullptr; }
};

// ---- The policy interface ----------------------------------------------------

// Everything a policy may look at for one (sequence, layer) compression.
// Pointers stay valid for the duration of SelectKeep only.
struct KvLayerInput {
  int layer = 0;
  int64_t n_slots = 0;  // N: live slots per KV head (> budget when called)
  int n_heads = 0;      // query heads
  int n_kv_heads = 0;
  int head_dim = 0;
  // Keys as f32, [n_kv_heads][n_slots][head_dim], post-RoPE (only when the
  // policy needs_keys(); nullptr otherwise).
  const float* keys = nullptr;
  // Query window, [n_heads][n_queries][head_dim], oldest first, the last row
  // is the current token's query (only when needs_queries()).
  const float* queries = nullptr;
  int n_queries = 0;
  // Per KV head: [n_slots] gen_pos (strictly ascending) and valid flags.
  std::span<const int32_t* const> gen_pos;
  std::span<const uint8_t* const> valid;
  // Per KV head: [n_slots] accumulated attention (needs_attention_scores()).
  std::span<const float* const> attention;
  bool padded = false;  // PadPolicy::kPadded: invalid slots are never evicted
  // Applied in order to the candidate scores (none, the sequence state's,
  // and/or an extra one); nullptr entries are skipped.
  std::span<const SlotScoreAdjuster* const> adjusters;
};

// Per-thread scratch for scoring, grown as needed so that steady-state
// compressions do not allocate.
struct KvScratch {
  // Owned by the kvscore functions (scores.h), which may clobber them.
  std::vector<float> lhs;       // Redundancy: the unit keys Kn [n][d]
  std::vector<float> packed;    // A·Bᵀ right operand in kernels::PackPanels form (keys / unit keys)
  std::vector<float> product;   // AttentionImportance: logits [rows][n]; Redundancy: column sums of S
  std::vector<float> row_max;   // AttentionImportance: GQA-max logits of one window row; Redundancy: S[0][n]
  std::vector<float> last_val;  // Redundancy: S[a][j*] of each row's retain-last edit
  std::vector<int32_t> idx;     // Redundancy: j* per row; selection: candidate order
  // For the policies: importance, redundancy, final score, gathered queries.
  std::vector<float> imp, red, score, q;
};

// Output: for each KV head the kept slot indices, exactly budget() of them,
// strictly ascending (SequenceKvCache::Compact's argument).
using KeepSets = std::vector<std::vector<int32_t>>;

// A policy decides which slots of one (sequence, layer) survive. Policies are
// immutable after creation and shared by all sequences; SelectKeep is called
// concurrently for different layers/sequences with distinct scratch.
class KvPolicy {
 public:
  virtual ~KvPolicy() = default;
  virtual std::string_view name() const = 0;
  const KvPolicyConfig& config() const { return config_; }
  int64_t budget() const { return config_.budget; }

  // False only for `full`: the compressor never calls SelectKeep.
  virtual bool evicts() const { return true; }
  virtual bool needs_keys() const { return false; }
  virtual bool needs_queries() const { return false; }
  virtual bool needs_attention_scores() const { return false; }
  // True for SkipKV: the policy subtracts the sentence penalty of a
  // SkipkvSequenceState (kv/policies/skipkv.h), so a method running it
  // brings the sentence hooks (src/steer) that fill that state's T.
  virtual bool uses_sentences() const { return false; }

  // R: the number of most recent slots every compression keeps (α for
  // rkv/snapkv, 1 for h2o_rkv, recent for h2o_acc, B − sinks for streaming
  // in ragged mode). The remaining B − R are chosen among slots [0, N − R).
  virtual int64_t recent_window() const = 0;
  // The largest Δpad a padded row may have: pads must leave at least one
  // selectable real slot (and streaming keeps ≥ α recent slots).
  virtual int64_t max_pad_len() const { return budget() - recent_window() - 1; }

  // Fills keep[h] for h in [0, n_kv_heads) with exactly budget() strictly
  // ascending slot indices in [0, n_slots), including the last
  // recent_window() slots, and (padded mode) every invalid slot.
  virtual void SelectKeep(const KvLayerInput& in, KvScratch& scratch, KeepSets& keep) const = 0;

  // Per-sequence state for this policy (nullptr if it has none).
  virtual std::unique_ptr<KvSequenceState> NewSequenceState() const { return nullptr; }

  // Slots a SequenceKvCache needs for a request with a (padded) prompt of
  // `prompt_len` tokens: max(prompt_len, B + Δt) for an evicting policy —
  // the cache never holds more (see kv_compressor.h); `full` returns
  // SequenceKvCache::kUnbounded.
  virtual int64_t CacheCapacity(int64_t prompt_len) const;
  // Sets the fields of a cache shape the policy depends on: query_window = α
  // and track_attention = needs_attention_scores().
  void ConfigureCacheShape(KvCacheShape* shape) const;

 protected:
  explicit KvPolicy(const KvPolicyConfig& config) : config_(config) {}

 private:
  KvPolicyConfig config_;
};

// Validates `config` and creates its policy; unknown names are an
// InvalidArgument listing the known ones.
StatusOr<std::shared_ptr<const KvPolicy>> CreateKvPolicy(const KvPolicyConfig& config);

// ---- The registry ---------------------------------------------------------------

// A factory validates the fields its policy uses (evicting policies call
// ValidateEvictionConfig first) and creates the policy; it is only called
// with a registered name and non-negative trace layers.
using KvPolicyFactory = StatusOr<std::unique_ptr<KvPolicy>> (*)(const KvPolicyConfig& config);

// The optional fields of KvPolicyConfig that only some policies read (the
// others ignore them), declared with each policy in the registry so that no
// caller decides by the policy's name.
enum KvPolicyReads : unsigned {
  kReadsMixLambda = 1u << 0,  // mix_lambda: rkv, skipkv
  kReadsSinks = 1u << 1,      // streaming_sinks: streaming
  kReadsH2oSplit = 1u << 2,   // h2o_heavy, h2o_recent: h2o_acc
};

struct KvPolicyRegistration {
  const char* name;  // the value of KvPolicyConfig::policy
  KvPolicyFactory make;
  unsigned reads = 0;  // KvPolicyReads bits
};

// Whether the registered policy `policy` reads all of the fields in `bits`
// (KvPolicyReads); false for an unknown name.
bool KvPolicyReadsFields(const std::string& policy, unsigned bits);

// The built-in policies, in a fixed order; defined next to them in
// kv/policies/registry.cpp (one line per name, aliases included).
std::span<const KvPolicyRegistration> KvPolicyRegistry();

}  // namespace skipkv
