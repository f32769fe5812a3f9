// The two run-time switches of the decode kernels for Q8_0x16, Q4_Kx16 and
// Q6_Kx16 (simd_internal.h): the software prefetch distance (DecodePrefetch;
// the prefetch itself is PrefetchBlockAhead in matmul_body-inl.h) and the number of
// weight streams a thread reads side by side (DecodeStreams; the driver is
// X16OneTokenStreams in matmul_x16-inl.h). Issue 40 asks what llama.cpp does
// on an Intel Xeon that skipkv does not, prefetch distance and rows per thread
// among the suspects: the defaults follow Zen 5 (BENCHMARKS.md), and
// SKIPKV_DECODE_PREFETCH and SKIPKV_DECODE_STREAMS let one run on another CPU
// (and bench_amx, through Set*ForTesting) sweep them without a rebuild.
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

// The types both switches cover: the key of their syntax, the name the status
// shows, the weight type, its block's bytes and the two structs' fields.
struct TypeInfo {
  const char* key;
  const char* label;
  DType type;
  int64_t block_bytes;
  int64_t DecodePrefetch::*bytes;
  int64_t DecodeStreams::*streams;
};
constexpr TypeInfo kTypes[] = {
    {"q8_0", "Q8_0x16", DType::kQ8_0x16, sizeof(BlockQ8_0x16), &DecodePrefetch::q8_0_bytes,
     &DecodeStreams::q8_0},
    {"q4_k", "Q4_Kx16", DType::kQ4_Kx16, sizeof(BlockQ4_Kx16), &DecodePrefetch::q4_k_bytes,
     &DecodeStreams::q4_k},
    {"q6_k", "Q6_Kx16", DType::kQ6_Kx16, sizeof(BlockQ6_Kx16), &DecodePrefetch::q6_k_bytes,
     &DecodeStreams::q6_k},
};
constexpr size_t kNumTypes = std::size(kTypes);

int64_t WholeBlocks(int64_t bytes, int64_t block_bytes) { return (bytes + block_bytes - 1) / block_bytes; }

// One switch: its environment variable, the name of its value in messages,
// the parser of one value, and how its struct maps to kTypes' fields.
template <class Values>
struct SwitchInfo {
  const char* env;
  const char* value_name;  // "BYTES", "N"
  bool (*parse_value)(std::string_view text, int64_t* v, std::string* why);
  int64_t Values::*TypeInfo::*field;
};

// One prefetch "BYTES": digits only, at most kMaxDecodePrefetchBytes.
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

// One stream count "N": 1, 2, 4 or 8 (the counts the kernels are compiled for).
bool ParseStreamCount(std::string_view text, int64_t* n, std::string* why) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
      (v != 1 && v != 2 && v != 4 && v != 8)) {
    *why = "'" + std::string(text) + "' is not a stream count (1, 2, 4 or 8; 1 reads one stream)";
    return false;
  }
  *n = v;
  return true;
}

constexpr SwitchInfo<DecodePrefetch> kPrefetchSwitch{"SKIPKV_DECODE_PREFETCH", "BYTES", ParseBytes,
                                                     &TypeInfo::bytes};
constexpr SwitchInfo<DecodeStreams> kStreamsSwitch{"SKIPKV_DECODE_STREAMS", "N", ParseStreamCount,
                                                   &TypeInfo::streams};

// The syntax both switches share: "V" (every type) or "TYPE=V,TYPE=V" (any of
// the types; those left out keep the values *out has). *out is changed only
// when the whole text is valid.
template <class Values>
bool ParsePerType(const SwitchInfo<Values>& sw, std::string_view text, Values* out, std::string* why) {
  std::string reason;
  Values p = *out;
  const auto fail = [&] {
    if (why != nullptr) *why = reason;
    return false;
  };
  if (text.find('=') == std::string_view::npos) {
    int64_t v = 0;
    if (!sw.parse_value(text, &v, &reason)) return fail();
    for (const TypeInfo& t : kTypes) p.*(t.*sw.field) = v;
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
      reason = "'" + std::string(item) + "' is not TYPE=" + sw.value_name + " (TYPE q8_0, q4_k or q6_k)";
      return fail();
    }
    const std::string_view type = item.substr(0, eq);
    int64_t v = 0;
    if (!sw.parse_value(item.substr(eq + 1), &v, &reason)) return fail();
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
    p.*(kTypes[i].*sw.field) = v;
    seen[i] = true;
  }
  *out = p;
  return true;
}

// A switch's setting in force, one value per kTypes entry: its environment
// variable, read once (a malformed value is reported and ignored, as
// SKIPKV_SIMD's), unless a test replaced it.
template <class Values>
struct Setting {
  const SwitchInfo<Values>& sw;
  std::atomic<int64_t> v[kNumTypes];
  bool from_env = false;
  void Store(const Values& p) {
    for (size_t i = 0; i < kNumTypes; ++i) v[i].store(p.*(kTypes[i].*sw.field), std::memory_order_relaxed);
  }
  void Reset() {  // the defaults, not the environment's
    from_env = false;
    Store(Values{});
  }
  // "Q8_0x16 <describe(0, value)>, Q4_Kx16 ..., Q6_Kx16 ...", then the
  // variable's name when the environment set it.
  template <class Describe>
  std::string Status(Describe describe) const {
    std::string out;
    for (size_t i = 0; i < kNumTypes; ++i) {
      out += std::string(i ? ", " : "") + kTypes[i].label + " " +
             describe(i, v[i].load(std::memory_order_relaxed));
    }
    return from_env ? out + " (" + sw.env + ")" : out;
  }
  int64_t Get(DType type, int64_t otherwise) const {
    for (size_t i = 0; i < kNumTypes; ++i) {
      if (kTypes[i].type == type) return v[i].load(std::memory_order_relaxed);
    }
    return otherwise;
  }
  explicit Setting(const SwitchInfo<Values>& info) : sw(info) {
    Store(Values{});
    const char* env = std::getenv(sw.env);
    if (env == nullptr || *env == '\0') return;
    Values p;
    std::string why;
    if (!ParsePerType(sw, env, &p, &why)) {
      SKIPKV_LOG_WARN("%s=%s ignored: %s", sw.env, env, why.c_str());
      return;
    }
    Store(p);
    from_env = true;
  }
};

Setting<DecodePrefetch>& ThePrefetch() {
  static Setting<DecodePrefetch> s(kPrefetchSwitch);
  return s;
}
Setting<DecodeStreams>& TheStreams() {
  static Setting<DecodeStreams> s(kStreamsSwitch);
  return s;
}

}  // namespace

bool ParseDecodePrefetch(std::string_view text, DecodePrefetch* out, std::string* why) {
  DecodePrefetch p;
  if (!ParsePerType(kPrefetchSwitch, text, &p, why)) return false;
  *out = p;
  return true;
}

int64_t DecodePrefetchBlocks(DType type) {
  for (const TypeInfo& t : kTypes) {
    if (t.type == type) return WholeBlocks(ThePrefetch().Get(type, 0), t.block_bytes);
  }
  return 0;
}

void SetDecodePrefetchForTesting(const DecodePrefetch& p) { ThePrefetch().Store(p); }

void ResetDecodePrefetchForTesting() { ThePrefetch().Reset(); }

std::string DecodePrefetchStatus() {
  return ThePrefetch().Status([](size_t i, int64_t bytes) {
    const int64_t blocks = WholeBlocks(bytes, kTypes[i].block_bytes);
    return bytes == 0 ? std::string("none")
                      : std::to_string(bytes) + " B (" + std::to_string(blocks) +
                            (blocks == 1 ? " block)" : " blocks)");
  });
}

bool ParseDecodeStreams(std::string_view text, DecodeStreams* out, std::string* why) {
  DecodeStreams p;
  if (!ParsePerType(kStreamsSwitch, text, &p, why)) return false;
  *out = p;
  return true;
}

int DecodeStreamCount(DType type) { return static_cast<int>(TheStreams().Get(type, 1)); }

void SetDecodeStreamsForTesting(const DecodeStreams& p) { TheStreams().Store(p); }

void ResetDecodeStreamsForTesting() { TheStreams().Reset(); }

std::string DecodeStreamsStatus() {
  return TheStreams().Status([](size_t, int64_t n) { return std::to_string(n); });
}

}  // namespace skipkv::kernels::internal

namespace skipkv::kernels {
std::string DecodePrefetchStatus() { return internal::DecodePrefetchStatus(); }
std::string DecodeStreamsStatus() { return internal::DecodeStreamsStatus(); }
}  // namespace skipkv::kernels
