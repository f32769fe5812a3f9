// The models compiled into libskipkv_io:
//  - the default, karpathy's stories260K (llama2.c format, dim 64, 5 layers,
//    GQA 8/4 heads, vocab 512) with its tok512 tokenizer. It makes every
//    command and test runnable without downloading anything.
//    OpenModel(kEmbeddedModelPath) returns it too;
//  - the testbed (":testbed:"), the project's trained mini reasoning model
//    (qwen2, GGUF with its 400-id BPE; data/models/testbed/README.md), the
//    model of `skipkv demo`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "io/model_source.h"

namespace skipkv {

// The path string that names the embedded model in OpenModel() and on the CLI.
inline constexpr std::string_view kEmbeddedModelPath = ":default:";
inline constexpr std::string_view kEmbeddedTestbedPath = ":testbed:";

// The raw embedded images (static storage, valid for the whole program).
struct EmbeddedBlob {
  const uint8_t* data;
  size_t size;
};
EmbeddedBlob EmbeddedDefaultModelBytes();      // stories260K.bin
EmbeddedBlob EmbeddedDefaultTokenizerBytes();  // tok512.bin
EmbeddedBlob EmbeddedTestbedBytes();           // data/models/testbed/testbed.gguf

// The embedded model as a ModelSource (format kLlama2c, path ":default:",
// general.name "stories260K"); tensors point into the program image.
StatusOr<std::unique_ptr<ModelSource>> OpenEmbeddedDefaultModel();

// The embedded testbed GGUF as a ModelSource (format kGguf, path ":testbed:").
StatusOr<std::unique_ptr<ModelSource>> OpenEmbeddedTestbedModel();

}  // namespace skipkv
