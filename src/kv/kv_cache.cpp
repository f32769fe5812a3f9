// SequenceKvCache: slot storage, appends, the query window and Compact; see kv_cache.h.
#include "kv/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "util/check.h"

namespace skipkv {

SequenceKvCache::SequenceKvCache(const KvCacheShape& shape, int64_t initial_capacity, int64_t max_capacity)
    : shape_(shape), max_capacity_(max_capacity) {
  SKIPKV_CHECK(shape.n_layers > 0 && shape.n_kv_heads > 0 && shape.head_dim > 0);
  SKIPKV_CHECK(shape.n_heads % shape.n_kv_heads == 0);
  SKIPKV_CHECK(shape.query_window >= 0);
  layers_.resize(shape.n_layers);
  for (auto& l : layers_) {
    l.qwin.assign(static_cast<size_t>(shape.query_window) * shape.n_heads * shape.head_dim, 0.f);
  }
  int64_t cap = std::max<int64_t>(initial_capacity, 1);
  if (max_capacity_ != kUnbounded) cap = max_capacity_;
  Grow(cap);
}

void SequenceKvCache::Grow(int64_t new_capacity) {
  const int hk = shape_.n_kv_heads;
  const size_t elt = bytes_per_slot_element();
  const size_t row = static_cast<size_t>(shape_.head_dim) * elt;
  for (auto& l : layers_) {
    AlignedBuffer nk(static_cast<size_t>(hk) * new_capacity * row);
    AlignedBuffer nv(static_cast<size_t>(hk) * new_capacity * row);
    std::vector<int32_t> ng(static_cast<size_t>(hk) * new_capacity, 0);
    std::vector<uint8_t> nvld(static_cast<size_t>(hk) * new_capacity, 0);
    std::vector<float> na(shape_.track_attention ? static_cast<size_t>(hk) * new_capacity : 0, 0.f);
    for (int h = 0; h < hk; ++h) {
      if (l.size > 0) {
        std::memcpy(nk.data() + h * new_capacity * row, l.k.data() + h * capacity_ * row, l.size * row);
        std::memcpy(nv.data() + h * new_capacity * row, l.v.data() + h * capacity_ * row, l.size * row);
        std::copy_n(l.gen_pos.begin() + h * capacity_, l.size, ng.begin() + h * new_capacity);
        std::copy_n(l.valid.begin() + h * capacity_, l.size, nvld.begin() + h * new_capacity);
        if (shape_.track_attention) std::copy_n(l.attn.begin() + h * capacity_, l.size, na.begin() + h * new_capacity);
      }
    }
    l.k = std::move(nk);
    l.v = std::move(nv);
    l.gen_pos = std::move(ng);
    l.valid = std::move(nvld);
    l.attn = std::move(na);
  }
  capacity_ = new_capacity;
}

Status SequenceKvCache::Reserve(int64_t n_more) {
  int64_t needed = 0;
  for (const auto& l : layers_) needed = std::max(needed, l.size + n_more);
  if (needed <= capacity_) return Status::Ok();
  if (max_capacity_ != kUnbounded) {
    return OutOfRange("KV cache full: need " + std::to_string(needed) + " slots but the budget allows " +
                      std::to_string(max_capacity_));
  }
  Grow(std::max(needed, capacity_ * 2));
  return Status::Ok();
}

void SequenceKvCache::Append(int layer, const float* k, const float* v, int32_t gen_pos, bool valid) {
  Layer& l = layers_[layer];
  SKIPKV_CHECK(l.size < capacity_);
  const int d = shape_.head_dim;
  for (int h = 0; h < shape_.n_kv_heads; ++h) {
    const size_t idx = static_cast<size_t>(h) * capacity_ + l.size;
    SKIPKV_DCHECK(l.size == 0 || l.gen_pos[idx - 1] < gen_pos);
    if (shape_.dtype == KvDType::kF16) {
      f16_t* kd = l.k.as<f16_t>() + idx * d;
      f16_t* vd = l.v.as<f16_t>() + idx * d;
      for (int i = 0; i < d; ++i) {
        kd[i] = F32ToF16(k[h * d + i]);
        vd[i] = F32ToF16(v[h * d + i]);
      }
    } else {
      std::memcpy(l.k.as<float>() + idx * d, k + h * d, d * sizeof(float));
      std::memcpy(l.v.as<float>() + idx * d, v + h * d, d * sizeof(float));
    }
    l.gen_pos[idx] = gen_pos;
    l.valid[idx] = valid ? 1 : 0;
    if (shape_.track_attention) l.attn[idx] = 0.f;
  }
  ++l.size;
}

const void* SequenceKvCache::K(int layer, int kv_head) const { return layers_[layer].k.data() + kv_head * HeadStride(); }
const void* SequenceKvCache::V(int layer, int kv_head) const { return layers_[layer].v.data() + kv_head * HeadStride(); }
const int32_t* SequenceKvCache::GenPos(int layer, int kv_head) const {
  return layers_[layer].gen_pos.data() + static_cast<size_t>(kv_head) * capacity_;
}
const uint8_t* SequenceKvCache::Valid(int layer, int kv_head) const {
  return layers_[layer].valid.data() + static_cast<size_t>(kv_head) * capacity_;
}
float* SequenceKvCache::AttentionScore(int layer, int kv_head) {
  return shape_.track_attention ? layers_[layer].attn.data() + static_cast<size_t>(kv_head) * capacity_ : nullptr;
}
const float* SequenceKvCache::AttentionScore(int layer, int kv_head) const {
  return shape_.track_attention ? layers_[layer].attn.data() + static_cast<size_t>(kv_head) * capacity_ : nullptr;
}

static void ReadRow(const void* base, KvDType dtype, int64_t slot, int d, float* out) {
  if (dtype == KvDType::kF16) {
    const f16_t* p = static_cast<const f16_t*>(base) + slot * d;
    for (int i = 0; i < d; ++i) out[i] = F16ToF32(p[i]);
  } else {
    std::memcpy(out, static_cast<const float*>(base) + slot * d, d * sizeof(float));
  }
}

void SequenceKvCache::ReadK(int layer, int kv_head, int64_t slot, float* out) const {
  ReadRow(K(layer, kv_head), shape_.dtype, slot, shape_.head_dim, out);
}
void SequenceKvCache::ReadV(int layer, int kv_head, int64_t slot, float* out) const {
  ReadRow(V(layer, kv_head), shape_.dtype, slot, shape_.head_dim, out);
}

void SequenceKvCache::Compact(int layer, const std::vector<std::vector<int32_t>>& keep) {
  Layer& l = layers_[layer];
  SKIPKV_CHECK(static_cast<int>(keep.size()) == shape_.n_kv_heads);
  const size_t n_keep = keep[0].size();
  const size_t row = static_cast<size_t>(shape_.head_dim) * bytes_per_slot_element();
  for (int h = 0; h < shape_.n_kv_heads; ++h) {
    const auto& kh = keep[h];
    SKIPKV_CHECK(kh.size() == n_keep);
    std::byte* kb = l.k.data() + h * HeadStride();
    std::byte* vb = l.v.data() + h * HeadStride();
    int32_t* gp = l.gen_pos.data() + static_cast<size_t>(h) * capacity_;
    uint8_t* vl = l.valid.data() + static_cast<size_t>(h) * capacity_;
    float* at = shape_.track_attention ? l.attn.data() + static_cast<size_t>(h) * capacity_ : nullptr;
    for (size_t i = 0; i < n_keep; ++i) {
      const int32_t src = kh[i];
      SKIPKV_CHECK(src >= 0 && src < l.size);
      SKIPKV_CHECK(i == 0 || kh[i - 1] < src);
      // src >= i because keep is strictly ascending, so a forward copy is safe.
      if (static_cast<size_t>(src) != i) {
        std::memcpy(kb + i * row, kb + src * row, row);
        std::memcpy(vb + i * row, vb + src * row, row);
        gp[i] = gp[src];
        vl[i] = vl[src];
        if (at) at[i] = at[src];
      }
    }
  }
  l.size = static_cast<int64_t>(n_keep);
}

void SequenceKvCache::PushQuery(int layer, const float* q) {
  Layer& l = layers_[layer];
  if (shape_.query_window == 0) return;
  const size_t n = static_cast<size_t>(shape_.n_heads) * shape_.head_dim;
  std::memcpy(l.qwin.data() + static_cast<size_t>(l.q_next) * n, q, n * sizeof(float));
  l.q_next = (l.q_next + 1) % shape_.query_window;
  l.q_count = std::min(l.q_count + 1, shape_.query_window);
}

int SequenceKvCache::QueryWindowCount(int layer) const { return layers_[layer].q_count; }

void SequenceKvCache::CopyQueryWindow(int layer, float* out) const {
  const Layer& l = layers_[layer];
  const int count = l.q_count;
  const int d = shape_.head_dim;
  const size_t n = static_cast<size_t>(shape_.n_heads) * d;
  const int first = (l.q_next - count + shape_.query_window) % std::max(shape_.query_window, 1);
  for (int w = 0; w < count; ++w) {
    const float* src = l.qwin.data() + static_cast<size_t>((first + w) % shape_.query_window) * n;
    for (int h = 0; h < shape_.n_heads; ++h) {
      std::memcpy(out + (static_cast<size_t>(h) * count + w) * d, src + static_cast<size_t>(h) * d, d * sizeof(float));
    }
  }
}

size_t SequenceKvCache::LiveKvBytes() const {
  size_t total = 0;
  for (const auto& l : layers_) total += static_cast<size_t>(l.size) * shape_.n_kv_heads * shape_.head_dim * bytes_per_slot_element() * 2;
  return total;
}

size_t SequenceKvCache::AllocatedKvBytes() const {
  return static_cast<size_t>(capacity_) * shape_.n_kv_heads * shape_.head_dim * bytes_per_slot_element() * 2 * layers_.size();
}

size_t SequenceKvCache::AllocatedMetadataBytes() const {
  size_t per_slot = sizeof(int32_t) + sizeof(uint8_t) + (shape_.track_attention ? sizeof(float) : 0);
  return static_cast<size_t>(capacity_) * shape_.n_kv_heads * per_slot * layers_.size();
}

void SequenceKvCache::Clear() {
  for (auto& l : layers_) {
    l.size = 0;
    l.q_count = 0;
    l.q_next = 0;
  }
}

}  // namespace skipkv
