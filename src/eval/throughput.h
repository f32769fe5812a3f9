// The paper's Table 1 protocol (issue 12 item 3), the planning half: for a
// method and a KV-memory limit, the largest batch whose KV caches fit. A
// sequence's cache holds what the engine allocates for it
// (KvPolicy::CacheCapacity): an evicting method max(P, B + Δt) slots per
// (layer, KV head) — the budget plus the slots that arrive between two
// compressions — and FullKV its whole history, P + max_length. A slot costs
// K and V rows of every layer and KV head: 2 · n_layers · n_kv_heads ·
// head_dim · sizeof(element) bytes. The timing half (running the batch on
// GSM8K prompts) is apps/skipkv/bench_throughput.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "kv/kv_policy.h"
#include "util/status.h"

namespace skipkv::eval {

// "8GiB", "512 MiB", "1.5GB", "4096" (bytes): binary (KiB..TiB) and decimal
// (KB..TB) units, case-insensitive, B optional. InvalidArgument naming the text.
StatusOr<uint64_t> ParseByteSize(const std::string& text);

// K+V bytes of one slot position across all layers and KV heads.
uint64_t KvBytesPerSlot(int n_layers, int n_kv_heads, int head_dim, int element_bytes);

struct BatchPlan {
  int64_t slots_per_sequence = 0;  // per (layer, KV head)
  uint64_t bytes_per_sequence = 0;
  int64_t max_batch = 0;  // floor(kv_memory / bytes_per_sequence); 0 = not even one fits
};

// prompt_len = the longest prompt of the batch (padded rows hold that many),
// max_length = generated tokens FullKV must hold. InvalidArgument for a bad
// method configuration or non-positive sizes.
StatusOr<BatchPlan> PlanMaxBatch(const KvPolicyConfig& method, int64_t prompt_len, int64_t max_length,
                                 uint64_t bytes_per_slot, uint64_t kv_memory);

}  // namespace skipkv::eval
