// Rotary-embedding frequencies shared by the reference and SIMD Rope, so both
// rotate by exactly the same angles (the kernels differ only in arithmetic).
#pragma once

#include <cmath>
#include <numbers>
#include <vector>

#include "kernels/ops.h"

namespace skipkv::kernels::internal {

// Inverse frequency of rotation pair i (0 <= i < rot_dim / 2):
//   inv_freq = theta^(-2i / rot_dim), then Llama-3 scaling when llama3_factor > 0,
// exactly as HF transformers' _compute_llama3_parameters:
//   wavelen > orig/low_freq_factor   -> inv_freq / factor          (long waves)
//   wavelen < orig/high_freq_factor  -> inv_freq                   (short waves)
//   otherwise smooth = (orig/wavelen - low) / (high - low),
//             inv_freq = (1 - smooth) * inv_freq / factor + smooth * inv_freq.
inline double RopeInvFreq(const RopeParams& p, int rot_dim, int i) {
  double inv_freq = std::pow(static_cast<double>(p.theta), -2.0 * i / rot_dim);
  if (p.llama3_factor > 0.f) {
    const double factor = p.llama3_factor;
    const double low = p.llama3_low_freq_factor, high = p.llama3_high_freq_factor;
    const double orig = p.llama3_original_context;
    const double low_freq_wavelen = orig / low;
    const double high_freq_wavelen = orig / high;
    const double wavelen = 2.0 * std::numbers::pi / inv_freq;
    if (wavelen > low_freq_wavelen) {
      inv_freq /= factor;
    } else if (wavelen >= high_freq_wavelen) {
      const double smooth = (orig / wavelen - low) / (high - low);
      inv_freq = (1.0 - smooth) * inv_freq / factor + smooth * inv_freq;
    }
  }
  return inv_freq;
}

// cos/sin of the rotation angle of each pair i < half at position pos, from
// precomputed inverse frequencies:
//   angle = (pos / linear_scale) * inv_freq[i], computed in double.
inline void RopeCosSinFromInvFreq(const double* inv_freq, int half, int64_t pos, float linear_scale,
                                  float* cos_out, float* sin_out) {
  const double scaled_pos = static_cast<double>(pos) / static_cast<double>(linear_scale);
  for (int i = 0; i < half; ++i) {
    const double angle = scaled_pos * inv_freq[i];
    cos_out[i] = static_cast<float>(std::cos(angle));
    sin_out[i] = static_cast<float>(std::sin(angle));
  }
}

inline void RopeCosSin(const RopeParams& p, int rot_dim, int64_t pos, float* cos_out, float* sin_out) {
  std::vector<double> inv(rot_dim / 2);
  for (int i = 0; i < rot_dim / 2; ++i) inv[i] = RopeInvFreq(p, rot_dim, i);
  RopeCosSinFromInvFreq(inv.data(), rot_dim / 2, pos, p.linear_scale, cos_out, sin_out);
}

}  // namespace skipkv::kernels::internal
