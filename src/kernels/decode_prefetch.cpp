// The software prefetch distance of the decode kernels for Q8_0x16, Q4_Kx16
// and Q6_K (simd_internal.h, DecodePrefetch; the prefetch itself is in
// matmul_x16-inl.h and matmul_vnni-inl.h). Issue 40 asks what llama.cpp does on an Intel Xeon that
// skipkv does not, prefetch distance among the suspects: on Zen 5 a prefetch
// helped Q4_Kx16 decode and slowed Q8_0x16's (BENCHMARKS.md), so the defaults
// follow Zen 5, and SKIPKV_DECODE_PREFETCH lets one run on another CPU (and
// bench_amx, through SetDecodePrefetchForTesting) sweep the distance without
// a rebuild.
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kernels/simd_internal.h"
#include "util/logging.h"

namespace skipkv::kernels::internal {
namespace {

constexpr DecodePrefetch kDefaults{};

// ParseDecodePrefetch's value of one "BYTES": digits only, at most
// kMaxDecodePrefetchBytes.
bool ParseBytes(std::string_view text, int64_t* bytes, std::string* why) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0) {
    *why = "'" + std::string(text) + "' is not a byte count (digits, e.g. 4096; 0 turns the prefetch off)";
    return false;
  }
  if (v > kMaxDecodePrefetchBytes) {
    *why = std::string(text) + " bytes is beyond the largest distance, " +
           std::to_string(kMaxDecodePrefetchBytes);
    return false;
  }
  *bytes = v;
  return true;
}

// The setting in force: SKIPKV_DECODE_PREFETCH, read once (a malformed value
// is reported and ignored, as SKIPKV_SIMD's), unless a test replaced it.
struct Setting {
  std::atomic<int64_t> q8_0_bytes{kDefaults.q8_0_bytes}, q4_k_bytes{kDefaults.q4_k_bytes},
      q6_k_bytes{kDefaults.q6_k_bytes};
  bool from_env = false;
  Setting() {
    const char* env = std::getenv("SKIPKV_DECODE_PREFETCH");
    if (env == nullptr || *env == '\0') return;
    DecodePrefetch p;
    std::string why;
    if (!ParseDecodePrefetch(env, &p, &why)) {
      SKIPKV_LOG_WARN("SKIPKV_DECODE_PREFETCH=%s ignored: %s", env, why.c_str());
      return;
    }
    q8_0_bytes = p.q8_0_bytes;
    q4_k_bytes = p.q4_k_bytes;
    q6_k_bytes = p.q6_k_bytes;
    from_env = true;
  }
};

Setting& TheSetting() {
  static Setting s;
  return s;
}

std::string Describe(int64_t bytes, size_t block_bytes) {
  if (bytes == 0) return "none";
  const int64_t blocks = (bytes + static_cast<int64_t>(block_bytes) - 1) / static_cast<int64_t>(block_bytes);
  return std::to_string(bytes) + " B (" + std::to_string(blocks) + (blocks == 1 ? " block)" : " blocks)");
}

}  // namespace

bool ParseDecodePrefetch(std::string_view text, DecodePrefetch* out, std::string* why) {
  std::string reason;
  DecodePrefetch p;
  const auto fail = [&] {
    if (why != nullptr) *why = reason;
    return false;
  };
  if (text.find('=') == std::string_view::npos) {
    int64_t bytes = 0;
    if (!ParseBytes(text, &bytes, &reason)) return fail();
    p.q8_0_bytes = p.q4_k_bytes = p.q6_k_bytes = bytes;
    *out = p;
    return true;
  }
  struct Key {
    const char* name;
    int64_t* bytes;
    bool seen;
  } keys[] = {{"q8_0", &p.q8_0_bytes, false}, {"q4_k", &p.q4_k_bytes, false}, {"q6_k", &p.q6_k_bytes, false}};
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (comma != std::string_view::npos && text.empty()) {
      reason = "a trailing ','";
      return fail();
    }
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      reason = "'" + std::string(item) + "' is not TYPE=BYTES (TYPE q8_0, q4_k or q6_k)";
      return fail();
    }
    const std::string_view type = item.substr(0, eq);
    int64_t bytes = 0;
    if (!ParseBytes(item.substr(eq + 1), &bytes, &reason)) return fail();
    Key* key = nullptr;
    for (Key& k : keys) {
      if (type == k.name) key = &k;
    }
    if (key == nullptr) {
      reason = "unknown type '" + std::string(type) + "' (q8_0, q4_k or q6_k)";
      return fail();
    }
    if (key->seen) {
      reason = "'" + std::string(type) + "' given twice";
      return fail();
    }
    *key->bytes = bytes;
    key->seen = true;
  }
  *out = p;
  return true;
}

int64_t DecodePrefetchBlocks(DType interleaved) {
  const Setting& s = TheSetting();
  switch (interleaved) {
    case DType::kQ8_0x16:
      return (s.q8_0_bytes.load(std::memory_order_relaxed) + sizeof(BlockQ8_0x16) - 1) / sizeof(BlockQ8_0x16);
    case DType::kQ4_Kx16:
      return (s.q4_k_bytes.load(std::memory_order_relaxed) + sizeof(BlockQ4_Kx16) - 1) / sizeof(BlockQ4_Kx16);
    case DType::kQ6_K:
      return (s.q6_k_bytes.load(std::memory_order_relaxed) + sizeof(BlockQ6_K) - 1) / sizeof(BlockQ6_K);
    default:
      return 0;
  }
}

void SetDecodePrefetchForTesting(const DecodePrefetch& p) {
  Setting& s = TheSetting();
  s.q8_0_bytes.store(p.q8_0_bytes, std::memory_order_relaxed);
  s.q4_k_bytes.store(p.q4_k_bytes, std::memory_order_relaxed);
  s.q6_k_bytes.store(p.q6_k_bytes, std::memory_order_relaxed);
}

void ResetDecodePrefetchForTesting() {
  Setting& s = TheSetting();
  s.from_env = false;
  SetDecodePrefetchForTesting(kDefaults);
}

std::string DecodePrefetchStatus() {
  const Setting& s = TheSetting();
  return "Q8_0x16 " + Describe(s.q8_0_bytes.load(std::memory_order_relaxed), sizeof(BlockQ8_0x16)) +
         ", Q4_Kx16 " + Describe(s.q4_k_bytes.load(std::memory_order_relaxed), sizeof(BlockQ4_Kx16)) +
         ", Q6_K " + Describe(s.q6_k_bytes.load(std::memory_order_relaxed), sizeof(BlockQ6_K)) +
         (s.from_env ? " (SKIPKV_DECODE_PREFETCH)" : "");
}

}  // namespace skipkv::kernels::internal

namespace skipkv::kernels {
std::string DecodePrefetchStatus() { return internal::DecodePrefetchStatus(); }
}  // namespace skipkv::kernels
