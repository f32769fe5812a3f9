// Table 1 planning: byte sizes and the largest batch that fits (see throughput.h).
#include "eval/throughput.h"

#include <cctype>
#include <cmath>

#include "kv/kv_cache.h"

namespace skipkv::eval {

StatusOr<uint64_t> ParseByteSize(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string number = text.substr(0, i);
  std::string unit;
  for (size_t j = i; j < text.size(); ++j)
    if (text[j] != ' ') unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[j])));
  auto bad = [&] {
    return InvalidArgument("'" + text + "' is not a byte size (e.g. 8GiB, 512MiB, 2GB, 4096)");
  };
  if (number.empty() || number.find('.') != number.rfind('.')) return bad();
  if (!unit.empty() && unit.back() == 'b') unit.pop_back();
  double scale = 0;
  if (unit.empty())
    scale = 1;
  else if (unit == "ki" || unit == "k")
    scale = unit == "k" ? 1e3 : 1024.0;
  else if (unit == "mi" || unit == "m")
    scale = unit == "m" ? 1e6 : 1048576.0;
  else if (unit == "gi" || unit == "g")
    scale = unit == "g" ? 1e9 : 1073741824.0;
  else if (unit == "ti" || unit == "t")
    scale = unit == "t" ? 1e12 : 1099511627776.0;
  else
    return bad();
  double v = 0;
  try {
    v = std::stod(number) * scale;
  } catch (...) {
    return bad();
  }
  if (!(v >= 1) || v > 1.8e19) return bad();
  return static_cast<uint64_t>(std::floor(v));
}

uint64_t KvBytesPerSlot(int n_layers, int n_kv_heads, int head_dim, int element_bytes) {
  return 2ull * static_cast<uint64_t>(n_layers) * static_cast<uint64_t>(n_kv_heads) *
         static_cast<uint64_t>(head_dim) * static_cast<uint64_t>(element_bytes);
}

StatusOr<BatchPlan> PlanMaxBatch(const KvPolicyConfig& method, int64_t prompt_len, int64_t max_length,
                                 uint64_t bytes_per_slot, uint64_t kv_memory) {
  if (prompt_len < 1 || max_length < 1 || bytes_per_slot == 0 || kv_memory == 0) {
    return InvalidArgument("batch plan: prompt_len (" + std::to_string(prompt_len) + "), max_length (" +
                           std::to_string(max_length) + "), bytes per slot and KV memory must be positive");
  }
  SKIPKV_ASSIGN_OR_RETURN(std::shared_ptr<const KvPolicy> policy, CreateKvPolicy(method));
  BatchPlan p;
  const int64_t cap = policy->CacheCapacity(prompt_len);
  p.slots_per_sequence = cap == SequenceKvCache::kUnbounded ? prompt_len + max_length : cap;
  p.bytes_per_sequence = static_cast<uint64_t>(p.slots_per_sequence) * bytes_per_slot;
  p.max_batch = static_cast<int64_t>(kv_memory / p.bytes_per_sequence);
  return p;
}

}  // namespace skipkv::eval
