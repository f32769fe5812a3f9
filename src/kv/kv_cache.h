// SequenceKvCache: the KV storage of one sequence, designed for per-head
// eviction. For every (layer, KV head) it holds `size(layer)` slots, each with
// K (after RoPE) and V rows of head_dim elements, the token's original
// position `gen_pos` and a `valid` flag (false for padding slots, which
// attention and scoring must mask). Slots are kept in strictly ascending
// gen_pos; attention never assumes slot == position.
//
// Invariants: all KV heads of a layer hold the same number of slots (every
// policy keeps exactly B per head); a compaction keeps slot order. Capacity
// grows geometrically when max_capacity == kUnbounded (FullKV), otherwise it
// is allocated once at max_capacity (budget + interval, or the prompt length
// if larger) and Reserve() past it is an error.
//
// Also per layer: the post-RoPE queries of the last `window` positions
// (the observation window of SnapKV / R-KV / SkipKV), and optionally an
// accumulated-attention score per slot (for cumulative H2O).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "skipkv/types.h"  // KvDType
#include "util/aligned_buffer.h"
#include "util/fp16.h"
#include "util/status.h"

namespace skipkv {

struct KvCacheShape {
  int n_layers = 0;
  int n_heads = 0;     // query heads (for the query window)
  int n_kv_heads = 0;
  int head_dim = 0;
  int query_window = 8;          // α: queries kept per layer
  KvDType dtype = KvDType::kF16;
  bool track_attention = false;  // keep per-slot accumulated attention (H2O)
};

class SequenceKvCache {
 public:
  static constexpr int64_t kUnbounded = -1;

  SequenceKvCache(const KvCacheShape& shape, int64_t initial_capacity, int64_t max_capacity);

  const KvCacheShape& shape() const { return shape_; }
  int64_t size(int layer) const { return layers_[layer].size; }
  int64_t capacity() const { return capacity_; }
  int64_t max_capacity() const { return max_capacity_; }
  size_t bytes_per_slot_element() const { return shape_.dtype == KvDType::kF16 ? 2 : 4; }

  // Ensures every layer can take `n_more` appended slots. Grows when
  // unbounded; returns OutOfRange when a bounded cache would overflow.
  Status Reserve(int64_t n_more);

  // Appends one token to `layer`: k and v are [n_kv_heads][head_dim] f32
  // (k after RoPE). The slot index is size(layer) before the call. The caller
  // must have reserved room. gen_pos must exceed the last slot's gen_pos.
  void Append(int layer, const float* k, const float* v, int32_t gen_pos, bool valid);

  // Raw per-head storage: [capacity][head_dim] of the cache dtype; slots
  // [0, size(layer)) are live.
  const void* K(int layer, int kv_head) const;
  const void* V(int layer, int kv_head) const;
  const int32_t* GenPos(int layer, int kv_head) const;
  const uint8_t* Valid(int layer, int kv_head) const;
  float* AttentionScore(int layer, int kv_head);  // nullptr unless track_attention
  const float* AttentionScore(int layer, int kv_head) const;

  // Reads slot `slot` of (layer, kv_head) as f32 (for scoring and tests).
  void ReadK(int layer, int kv_head, int64_t slot, float* out) const;
  void ReadV(int layer, int kv_head, int64_t slot, float* out) const;

  // Keeps, for every KV head h, exactly the slots keep[h] (strictly
  // ascending, all the same length) and drops the rest. CHECKs the contract.
  void Compact(int layer, const std::vector<std::vector<int32_t>>& keep);

  // Query window: pushes the post-RoPE queries [n_heads][head_dim] of the
  // newest position of `layer`; only the last `query_window` are kept.
  void PushQuery(int layer, const float* q);
  int QueryWindowCount(int layer) const;
  // Copies the window in chronological order into out [n_heads][count][head_dim].
  void CopyQueryWindow(int layer, float* out) const;

  // Memory accounting: bytes of K/V rows in live slots (all layers) and the
  // bytes allocated for K/V (capacity). Metadata is counted separately.
  size_t LiveKvBytes() const;
  size_t AllocatedKvBytes() const;
  size_t AllocatedMetadataBytes() const;

  // Drops every slot and query (keeps the allocation).
  void Clear();

 private:
  struct Layer {
    int64_t size = 0;
    AlignedBuffer k, v;          // [n_kv_heads][capacity][head_dim]
    std::vector<int32_t> gen_pos;  // [n_kv_heads][capacity]
    std::vector<uint8_t> valid;    // [n_kv_heads][capacity]
    std::vector<float> attn;       // [n_kv_heads][capacity] when tracking
    std::vector<float> qwin;       // [query_window][n_heads][head_dim] ring
    int q_count = 0;               // queries pushed (saturates at query_window)
    int q_next = 0;                // ring write index
  };

  void Grow(int64_t new_capacity);
  size_t HeadStride() const { return static_cast<size_t>(capacity_) * shape_.head_dim * bytes_per_slot_element(); }

  KvCacheShape shape_;
  int64_t capacity_ = 0;
  int64_t max_capacity_ = kUnbounded;
  std::vector<Layer> layers_;
};

}  // namespace skipkv
