// safetensors header validation; see safetensors.h for the format.
#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "util/json_depth.h"

namespace skipkv {
namespace {
// The reference implementation refuses headers above 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;
}  // namespace

size_t SafetensorsDTypeSize(const std::string& dtype) {
  static const std::map<std::string, size_t> kSizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2},
      {"F16", 2},  {"BF16", 2}, {"I32", 4}, {"U32", 4},     {"F32", 4},     {"I64", 8}, {"U64", 8},
      {"F64", 8}};
  auto it = kSizes.find(dtype);
  return it == kSizes.end() ? 0 : it->second;
}

StatusOr<SafetensorsHeader> ParseSafetensorsHeader(const uint8_t* data, size_t size, const std::string& name) {
  if (size < 8) return CorruptData(name + ": " + std::to_string(size) + " bytes, too short for a safetensors header");
  uint64_t header_len = 0;
  std::memcpy(&header_len, data, 8);
  if (header_len > size - 8 || header_len > kMaxHeaderBytes) {
    return CorruptData(name + ": header length " + std::to_string(header_len) + " exceeds the file (" +
                       std::to_string(size) + " bytes) or the 100 MB limit");
  }
  SafetensorsHeader h;
  h.data_start = 8 + header_len;
  const uint64_t data_size = size - h.data_start;

  const char* text = reinterpret_cast<const char*>(data + 8);
  // Depth before parsing (issue 43); the header is one JSON text after the 8-byte length.
  SKIPKV_RETURN_IF_ERROR(CheckJsonDepth(std::string_view(text, header_len), name + " (JSON header)"));
  nlohmann::json j = nlohmann::json::parse(text, text + header_len, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return CorruptData(name + ": header is not valid JSON");
  if (!j.is_object()) return CorruptData(name + ": header JSON is not an object");

  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& v = it.value();
    if (key == "__metadata__") {
      if (!v.is_object()) return CorruptData(name + ": __metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) return CorruptData(name + ": __metadata__ value '" + m.key() + "' is not a string");
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string what = name + ": tensor '" + key + "'";
    if (!v.is_object()) return CorruptData(what + " is not an object");
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string()) return CorruptData(what + ": missing or non-string 'dtype'");
    if (sh == v.end() || !sh->is_array()) return CorruptData(what + ": missing or non-array 'shape'");
    if (off == v.end() || !off->is_array() || off->size() != 2) {
      return CorruptData(what + ": 'data_offsets' must be an array [begin, end]");
    }
    SafetensorsEntry e;
    e.name = key;
    e.dtype = dt->get<std::string>();
    const size_t elem = SafetensorsDTypeSize(e.dtype);
    if (elem == 0) return Unsupported(what + ": unknown dtype '" + e.dtype + "'");
    if (sh->size() > 8) return CorruptData(what + ": " + std::to_string(sh->size()) + " dimensions");
    uint64_t bytes = elem;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned()) return CorruptData(what + ": shape entry " + d.dump() + " is not a non-negative integer");
      const uint64_t x = d.get<uint64_t>();
      if (x != 0 && bytes > std::numeric_limits<uint64_t>::max() / x) return CorruptData(what + ": shape overflows");
      bytes *= x;
      if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return CorruptData(what + ": shape overflows");
      e.shape.push_back(static_cast<int64_t>(x));
    }
    const auto& b = (*off)[0];
    const auto& en = (*off)[1];
    if (!b.is_number_unsigned() || !en.is_number_unsigned()) {
      return CorruptData(what + ": data_offsets " + off->dump() + " are not non-negative integers");
    }
    e.begin = b.get<uint64_t>();
    e.end = en.get<uint64_t>();
    if (e.begin > e.end || e.end > data_size) {
      return CorruptData(what + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                         "] outside the " + std::to_string(data_size) + "-byte data section");
    }
    if (e.end - e.begin != bytes) {
      return CorruptData(what + ": shape " + sh->dump() + " x " + e.dtype + " needs " + std::to_string(bytes) +
                         " bytes but data_offsets span " + std::to_string(e.end - e.begin));
    }
    h.tensors.push_back(std::move(e));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < h.tensors.size(); ++i) {
    if (h.tensors[i].begin < h.tensors[i - 1].end) {
      return CorruptData(name + ": tensors '" + h.tensors[i - 1].name + "' and '" + h.tensors[i].name +
                         "' have overlapping data_offsets");
    }
  }
  return h;
}

}  // namespace skipkv
