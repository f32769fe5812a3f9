// The software prefetch distance of the decode kernels for Q8_0x16, Q4_Kx16
// and Q6_Kx16 (simd_internal.h, DecodePrefetch; the prefetch itself is
// PrefetchBlockAhead in matmul.cpp). Issue 40 asks what llama.cpp does on an
// Intel Xeon that skipkv does not, prefetch distance among the suspects: on
// Zen 5 a prefetch helped Q4_Kx16 decode and slowed Q8_0x16's
// (BENCHMARKS.md), so the defaults follow Zen 5, and SKIPKV_DECODE_PREFETCH
// lets one run on another CPU (and bench_amx, through
// SetDecodePrefetchForTesting) sweep the distance without a rebuild.
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <iterator>
#include <string>
#include <string_view>

#include "kernels/simd_internal.h"
#include "util/logging.h"

namespace skipkv::kernels::internal {
namespace {

constexpr DecodePrefetch kDefaults{};

// The types the setting covers: SKIPKV_DECODE_PREFETCH's key, the name the
// status shows, the weight type, its block's bytes and DecodePrefetch's field.
struct TypeInfo {
  const char* key;
  const char* label;
  DType type;
  int64_t block_bytes;
  int64_t DecodePrefetch::*bytes;
};
constexpr TypeInfo kTypes[] = {
    {"q8_0", "Q8_0x16", DType::kQ8_0x16, sizeof(BlockQ8_0x16), &DecodePrefetch::q8_0_bytes},
    {"q4_k", "Q4_Kx16", DType::kQ4_Kx16, sizeof(BlockQ4_Kx16), &DecodePrefetch::q4_k_bytes},
    {"q6_k", "Q6_Kx16", DType::kQ6_Kx16, sizeof(BlockQ6_Kx16), &DecodePrefetch::q6_k_bytes},
};
constexpr size_t kNumTypes = std::size(kTypes);

int64_t WholeBlocks(int64_t bytes, int64_t block_bytes) { return (bytes + block_bytes - 1) / block_bytes; }

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

// The setting in force, bytes per kTypes entry: SKIPKV_DECODE_PREFETCH, read
// once (a malformed value is reported and ignored, as SKIPKV_SIMD's), unless
// a test replaced it.
struct Setting {
  std::atomic<int64_t> bytes[kNumTypes];
  bool from_env = false;
  void Store(const DecodePrefetch& p) {
    for (size_t i = 0; i < kNumTypes; ++i) bytes[i].store(p.*kTypes[i].bytes, std::memory_order_relaxed);
  }
  Setting() {
    Store(kDefaults);
    const char* env = std::getenv("SKIPKV_DECODE_PREFETCH");
    if (env == nullptr || *env == '\0') return;
    DecodePrefetch p;
    std::string why;
    if (!ParseDecodePrefetch(env, &p, &why)) {
      SKIPKV_LOG_WARN("SKIPKV_DECODE_PREFETCH=%s ignored: %s", env, why.c_str());
      return;
    }
    Store(p);
    from_env = true;
  }
};

Setting& TheSetting() {
  static Setting s;
  return s;
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
    for (const TypeInfo& t : kTypes) p.*t.bytes = bytes;
    *out = p;
    return true;
  }
  bool seen[kNumTypes] = {};
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
    size_t i = 0;
    while (i < kNumTypes && type != kTypes[i].key) ++i;
    if (i == kNumTypes) {
      reason = "unknown type '" + std::string(type) + "' (q8_0, q4_k or q6_k)";
      return fail();
    }
    if (seen[i]) {
      reason = "'" + std::string(type) + "' given twice";
      return fail();
    }
    p.*kTypes[i].bytes = bytes;
    seen[i] = true;
  }
  *out = p;
  return true;
}

int64_t DecodePrefetchBlocks(DType type) {
  const Setting& s = TheSetting();
  for (size_t i = 0; i < kNumTypes; ++i) {
    if (kTypes[i].type == type)
      return WholeBlocks(s.bytes[i].load(std::memory_order_relaxed), kTypes[i].block_bytes);
  }
  return 0;
}

void SetDecodePrefetchForTesting(const DecodePrefetch& p) { TheSetting().Store(p); }

void ResetDecodePrefetchForTesting() {
  Setting& s = TheSetting();
  s.from_env = false;
  s.Store(kDefaults);
}

std::string DecodePrefetchStatus() {
  const Setting& s = TheSetting();
  std::string out;
  for (size_t i = 0; i < kNumTypes; ++i) {
    const int64_t bytes = s.bytes[i].load(std::memory_order_relaxed);
    const int64_t blocks = WholeBlocks(bytes, kTypes[i].block_bytes);
    out += std::string(i ? ", " : "") + kTypes[i].label + " " +
           (bytes == 0 ? "none"
                       : std::to_string(bytes) + " B (" + std::to_string(blocks) +
                             (blocks == 1 ? " block)" : " blocks)"));
  }
  return out + (s.from_env ? " (SKIPKV_DECODE_PREFETCH)" : "");
}

}  // namespace skipkv::kernels::internal

namespace skipkv::kernels {
std::string DecodePrefetchStatus() { return internal::DecodePrefetchStatus(); }
}  // namespace skipkv::kernels
