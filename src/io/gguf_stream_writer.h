// GgufStreamWriter: writes a GGUF v3 file tensor by tensor without holding
// the weights in memory. The tensor table (names, types, shapes) is declared
// up front, so every data offset is known and the header is written first;
// then each tensor's bytes are appended in declaration order, in as many
// chunks as the caller likes, and padding is inserted automatically.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "io/gguf.h"

namespace skipkv {

struct GgufTensorDecl {
  std::string name;
  DType type = DType::kF32;
  std::vector<int64_t> ne;  // ggml order, 1..4 dims, each > 0, ne[0] a multiple of BlockSize(type)
  size_t NumBytes() const;
  size_t NumElements() const {
    size_t n = 1;
    for (int64_t v : ne) n *= static_cast<size_t>(v);
    return n;
  }
};

// Validates the declarations (names unique and non-empty, dims, block
// multiples) and returns the serialized header — magic, version 3, metadata,
// tensor table — padded to the alignment. `offsets` receives each tensor's
// offset inside the data section and `alignment` the alignment used
// (general.alignment if set, else 32).
StatusOr<std::vector<uint8_t>> SerializeGgufHeader(const GgufMetadata& metadata,
                                                   const std::vector<GgufTensorDecl>& tensors,
                                                   std::vector<uint64_t>* offsets, size_t* alignment);

class GgufStreamWriter {
 public:
  static StatusOr<std::unique_ptr<GgufStreamWriter>> Create(const std::string& path, const GgufMetadata& metadata,
                                                            std::vector<GgufTensorDecl> tensors);
  ~GgufStreamWriter();
  GgufStreamWriter(const GgufStreamWriter&) = delete;
  GgufStreamWriter& operator=(const GgufStreamWriter&) = delete;

  // Appends bytes of the current tensor; a chunk may not cross into the next
  // tensor. When a tensor is complete the writer pads and moves on.
  Status Append(const void* data, size_t nbytes);
  // Index of the tensor the next Append writes to (== count when all done).
  size_t current_tensor() const { return current_; }
  // Checks that every tensor was written completely, flushes and closes.
  Status Finish();

 private:
  GgufStreamWriter() = default;
  Status WriteRaw(const void* data, size_t nbytes);

  std::string path_;
  std::FILE* fp_ = nullptr;
  std::vector<GgufTensorDecl> tensors_;
  size_t alignment_ = 32;
  size_t current_ = 0;
  size_t written_in_current_ = 0;
};

}  // namespace skipkv
