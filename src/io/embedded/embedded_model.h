// The default model compiled into libskipkv_io: karpathy's stories260K
// (llama2.c format, dim 64, 5 layers, GQA 8/4 heads, vocab 512) with its
// tok512 tokenizer. It makes every command and test runnable without
// downloading anything. OpenModel(kEmbeddedModelPath) returns it too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "io/model_source.h"

namespace skipkv {

// The path string that names the embedded model in OpenModel() and on the CLI.
inline constexpr std::string_view kEmbeddedModelPath = ":default:";

// The raw embedded images (static storage, valid for the whole program).
struct EmbeddedBlob {
  const uint8_t* data;
  size_t size;
};
EmbeddedBlob EmbeddedDefaultModelBytes();      // stories260K.bin
EmbeddedBlob EmbeddedDefaultTokenizerBytes();  // tok512.bin

// The embedded model as a ModelSource (format kLlama2c, path ":default:",
// general.name "stories260K"); tensors point into the program image.
StatusOr<std::unique_ptr<ModelSource>> OpenEmbeddedDefaultModel();

}  // namespace skipkv
