// Accessors for the blobs that embedded_blobs.cpp.in (.incbin) places in .rodata.
#include "io/embedded/embedded_model.h"

#include "io/gguf.h"
#include "io/llama2c.h"

extern "C" {
extern const uint8_t skipkv_embedded_model_begin[];
extern const uint8_t skipkv_embedded_model_end[];
extern const uint8_t skipkv_embedded_tokenizer_begin[];
extern const uint8_t skipkv_embedded_tokenizer_end[];
extern const uint8_t skipkv_embedded_testbed_begin[];
extern const uint8_t skipkv_embedded_testbed_end[];
}

namespace skipkv {

EmbeddedBlob EmbeddedDefaultModelBytes() {
  return {skipkv_embedded_model_begin, static_cast<size_t>(skipkv_embedded_model_end - skipkv_embedded_model_begin)};
}

EmbeddedBlob EmbeddedDefaultTokenizerBytes() {
  return {skipkv_embedded_tokenizer_begin,
          static_cast<size_t>(skipkv_embedded_tokenizer_end - skipkv_embedded_tokenizer_begin)};
}

StatusOr<std::unique_ptr<ModelSource>> OpenEmbeddedDefaultModel() {
  const EmbeddedBlob model = EmbeddedDefaultModelBytes();
  const EmbeddedBlob tok = EmbeddedDefaultTokenizerBytes();
  SKIPKV_ASSIGN_OR_RETURN(auto src, Llama2cFromMemory(model.data, model.size, tok.data, tok.size,
                                                      "<embedded>/stories260K.bin", "<embedded>/tok512.bin"));
  src->path = std::string(kEmbeddedModelPath);
  src->metadata.Set("general.name", GgufValue::Str("stories260K"));
  return src;
}

EmbeddedBlob EmbeddedTestbedBytes() {
  return {skipkv_embedded_testbed_begin,
          static_cast<size_t>(skipkv_embedded_testbed_end - skipkv_embedded_testbed_begin)};
}

StatusOr<std::unique_ptr<ModelSource>> OpenEmbeddedTestbedModel() {
  const EmbeddedBlob blob = EmbeddedTestbedBytes();
  SKIPKV_ASSIGN_OR_RETURN(auto file, GgufFile::FromMemory(blob.data, blob.size, "<embedded>/testbed.gguf"));
  auto src = ModelSourceFromGguf(std::move(file));
  src->path = std::string(kEmbeddedTestbedPath);
  return src;
}

}  // namespace skipkv
