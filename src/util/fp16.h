// Scalar IEEE half and bfloat16 conversions (round-to-nearest-even). These are
// the reference conversions; SIMD kernels convert in bulk with Highway.
#pragma once

#include <cstdint>
#include <cstring>

namespace skipkv {

using f16_t = uint16_t;   // IEEE 754 binary16 bits
using bf16_t = uint16_t;  // bfloat16 bits (upper half of a float)

inline float F32FromBits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t BitsFromF32(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float F16ToF32(f16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return F32FromBits(sign);
    // Subnormal half: normalise.
    int e = -1;
    do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
    mant &= 0x3ffu;
    return F32FromBits(sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | (mant << 13));
  }
  if (exp == 31) return F32FromBits(sign | 0x7f800000u | (mant << 13));  // inf / nan
  return F32FromBits(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

inline f16_t F32ToF16(float f) {
  const uint32_t x = BitsFromF32(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<f16_t>(sign | 0x7e00u);  // nan
  if (abs >= 0x477ff000u) return static_cast<f16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {                                            // subnormal or zero half
    if (abs < 0x33000000u) return static_cast<f16_t>(sign);           // rounds to zero
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t half_m = m >> (shift);
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_m & 1u))) ++half_m;
    return static_cast<f16_t>(sign | half_m);
  }
  uint32_t r = abs - 0x38000000u;  // rebias exponent 127 -> 15
  const uint32_t rem = r & 0x1fffu;
  r >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<f16_t>(sign | r);
}

inline float BF16ToF32(bf16_t b) { return F32FromBits(static_cast<uint32_t>(b) << 16); }

inline bf16_t F32ToBF16(float f) {
  uint32_t x = BitsFromF32(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_t>((x >> 16) | 0x40u);  // quiet nan
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<bf16_t>(x >> 16);
}

}  // namespace skipkv
