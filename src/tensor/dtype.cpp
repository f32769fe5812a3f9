// The dtype table (names, block sizes, bytes per block) and its lookups; see dtype.h.
#include "tensor/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include "util/check.h"

namespace skipkv {
namespace {

// Sizes of every ggml type id we might meet in a GGUF file; `supported`
// marks the ones skipkv computes with.
constexpr std::array<DTypeInfo, 25> kTypes = {{
    {DType::kF32, "f32", 1, 4, true},
    {DType::kF16, "f16", 1, 2, true},
    {DType::kQ4_0, "q4_0", 32, 18, true},
    {DType::kQ4_1, "q4_1", 32, 20, false},
    {DType::kQ5_0, "q5_0", 32, 22, false},
    {DType::kQ5_1, "q5_1", 32, 24, false},
    {DType::kQ8_0, "q8_0", 32, 34, true},
    {DType::kQ8_1, "q8_1", 32, 36, false},
    {DType::kQ2_K, "q2_K", 256, 84, false},
    {DType::kQ3_K, "q3_K", 256, 110, false},
    {DType::kQ4_K, "q4_K", 256, 144, true},
    {DType::kQ5_K, "q5_K", 256, 176, false},
    {DType::kQ6_K, "q6_K", 256, 210, true},
    {DType::kQ8_K, "q8_K", 256, 292, false},
    {DType::kI8, "i8", 1, 1, false},
    {DType::kI16, "i16", 1, 2, false},
    {DType::kI32, "i32", 1, 4, false},
    {DType::kI64, "i64", 1, 8, false},
    {DType::kF64, "f64", 1, 8, false},
    {DType::kBF16, "bf16", 1, 2, true},
    {DType::kF32x16, "f32_x16", 1, 4, true},
    {DType::kF16x16, "f16_x16", 1, 2, true},
    {DType::kQ8_0x16, "q8_0_x16", 32, 34, true},
    {DType::kQ4_Kx16, "q4_K_x16", 256, 144, true},
    {DType::kQ6_Kx16, "q6_K_x16", 256, 210, true},
}};

bool IsInternal(DType t) { return static_cast<uint32_t>(t) >= kFirstInternalDType; }

}  // namespace

std::optional<DTypeInfo> LookupDType(uint32_t id) {
  for (const auto& info : kTypes) {
    if (static_cast<uint32_t>(info.type) == id && !IsInternal(info.type)) return info;
  }
  return std::nullopt;
}

const DTypeInfo& GetDTypeInfo(DType t) {
  for (const auto& info : kTypes) {
    if (info.type == t) return info;
  }
  SKIPKV_CHECK_MSG(false, "unknown DType");
}

std::optional<DType> DTypeFromName(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const auto& info : kTypes) {
    if (IsInternal(info.type)) continue;
    std::string n(info.name);
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
    if (n == lower) return info.type;
  }
  return std::nullopt;
}

}  // namespace skipkv
