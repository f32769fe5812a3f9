// ModelSource helpers and OpenModel's format dispatch.
#include "io/model_source.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/embedded/embedded_model.h"
#include "io/hf_checkpoint.h"
#include "io/llama2c.h"
#include "tensor/interleaved.h"

namespace skipkv {
namespace fs = std::filesystem;

const char* ModelFormatName(ModelFormat f) {
  switch (f) {
    case ModelFormat::kGguf: return "gguf";
    case ModelFormat::kHuggingFace: return "huggingface";
    case ModelFormat::kLlama2c: return "llama2c";
  }
  return "unknown";
}

const TensorView* ModelSource::FindTensor(const std::string& name) const {
  for (const TensorView& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::unique_ptr<ModelSource> ModelSourceFromGguf(std::unique_ptr<GgufFile> file) {
  auto src = std::make_unique<ModelSource>();
  src->path = file->path();
  src->format = ModelFormat::kGguf;
  src->metadata = file->metadata();
  src->tensors = file->tensors();
  src->weights_load = file->load();
  src->owners.push_back(std::shared_ptr<GgufFile>(std::move(file)));
  return src;
}

std::string WeightsLoadDescription(const ModelSource& src) {
  if (src.path == kEmbeddedModelPath || src.path == kEmbeddedTestbedPath) return "embedded in the binary";
  std::string d = src.weights_load == FileLoad::kRead ? "read into memory (huge pages advised)" : "mapped";
  int interleaved = 0;
  for (const TensorView& t : src.tensors) interleaved += FileTypeOf(t.type) != t.type;
  if (interleaved > 0) d += ", " + std::to_string(interleaved) + " tensors interleaved in 16-row groups";
  return d;
}

StatusOr<std::unique_ptr<ModelSource>> OpenModel(const std::string& path, const std::string& tokenizer_path,
                                                 FileLoad weights) {
  if (path == kEmbeddedModelPath) return OpenEmbeddedDefaultModel();
  if (path == kEmbeddedTestbedPath) return OpenEmbeddedTestbedModel();
  if (path.empty()) {
    return InvalidArgument("empty model path (use '" + std::string(kEmbeddedModelPath) +
                           "' for the embedded stories260K model, '" + std::string(kEmbeddedTestbedPath) +
                           "' for the embedded testbed)");
  }
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) return NotFound("model path '" + path + "' does not exist");
  if (fs::is_directory(status)) return OpenHfCheckpoint(path, weights);
  char magic[4] = {};
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) return IoError("cannot open '" + path + "'");
    in.read(magic, 4);
  }
  if (std::memcmp(magic, "GGUF", 4) == 0) {
    SKIPKV_ASSIGN_OR_RETURN(auto file, GgufFile::Open(path, weights));
    return ModelSourceFromGguf(std::move(file));
  }
  return OpenLlama2c(path, tokenizer_path, weights);
}

}  // namespace skipkv
