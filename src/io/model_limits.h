// The ranges every model reader accepts for the shape values (GGUF
// metadata, config.json, make-model), so a value that passes one reader
// passes the others, nothing is narrowed on the way to 32-bit GGUF keys or
// `int` fields, and products of them (tensor sizes) stay far below 2^63.
#pragma once

#include <cstdint>

namespace skipkv::model_limits {

inline constexpr int64_t kMaxLayers = 4096;                   // block_count
inline constexpr int64_t kMaxDim = int64_t{1} << 20;          // embedding_length, feed_forward_length
inline constexpr int64_t kMaxHeads = 4096;                    // head_count, head_count_kv
inline constexpr int64_t kMaxHeadDim = 65536;                 // key_length, value_length, rope dims
inline constexpr int64_t kMaxContext = int64_t{1} << 30;      // context_length
inline constexpr int64_t kMaxVocab = (int64_t{1} << 31) - 1;  // vocab_size, token ids

}  // namespace skipkv::model_limits
