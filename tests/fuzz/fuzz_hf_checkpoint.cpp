// libFuzzer target: the Hugging Face checkpoint readers' JSON. The first
// byte picks what the rest is:
//   0: config.json, through HfConfigToMetadata. Invariant: an accepted
//      config's integer keys reach the GGUF metadata unchanged (no narrowing);
//   1: tokenizer.json, through AddGpt2TokenizerMetadataFromJson (as convert
//      embeds it). Invariant: tokens and token types have equal lengths;
//   2: config.json in a checkpoint directory with a small valid
//      model.safetensors (OpenHfCheckpoint: file reading, tensor mapping).
// For all: no crash, hang or uncaught exception (an escaping exception is
// reported by libFuzzer as a crash); rejected input is a Status.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "io/hf_checkpoint.h"
#include "io/hf_vocab.h"

#include "fuzz_check.h"

namespace {
namespace fs = std::filesystem;

fs::path g_dir;

void WriteFile(const fs::path& p, const void* data, size_t size) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

void FuzzConfig(const std::string& text) {
  const nlohmann::json c = nlohmann::json::parse(text, nullptr, false);
  if (c.is_discarded()) return;
  skipkv::GgufMetadata md;
  if (!skipkv::HfConfigToMetadata(c, "config.json", &md).ok()) return;
  auto arch = md.GetString("general.architecture");
  Check(arch.ok(), "accepted config without general.architecture");
  const std::pair<const char*, const char*> keys[] = {
      {"num_hidden_layers", "block_count"},          {"hidden_size", "embedding_length"},
      {"intermediate_size", "feed_forward_length"},  {"num_attention_heads", "attention.head_count"},
      {"max_position_embeddings", "context_length"}, {"vocab_size", "vocab_size"}};
  for (const auto& [json_key, gguf_key] : keys) {
    auto v = md.GetInt(*arch + "." + gguf_key);
    Check(v.ok(), "accepted config lacks a required key");
    Check(c.at(json_key).is_number_integer() && c.at(json_key).get<int64_t>() == *v, "integer narrowed");
  }
}

void FuzzTokenizer(const std::string& text, uint8_t flags) {
  skipkv::Gpt2VocabOptions o;
  if (flags & 1) o = skipkv::R1DistillQwenVocabOptions(0);
  if (flags & 2) o.vocab_size = 300;
  skipkv::GgufMetadata md;
  if (!skipkv::AddGpt2TokenizerMetadataFromJson(text, "tokenizer.json", o, &md).ok()) return;
  auto tokens = md.GetStringArray("tokenizer.ggml.tokens");
  auto types = md.GetIntArray("tokenizer.ggml.token_type");
  Check(tokens.ok() && types.ok() && tokens->size() == types->size(),
        "tokens and token types differ in length");
}

void FuzzDirectory(const uint8_t* data, size_t size) {
  WriteFile(g_dir / "config.json", data, size);
  auto src = skipkv::OpenHfCheckpoint(g_dir.string());
  if (!src.ok()) return;
  for (const auto& t : (*src)->tensors) Check(t.data != nullptr, "tensor without data");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_dir = fs::temp_directory_path() / ("skipkv_fuzz_hf_" + std::to_string(::getpid()));
  fs::create_directories(g_dir);
  // One F32 [2, 2] embedding: an 8-byte length, the JSON header, 16 bytes of data.
  const std::string header =
      R"({"model.embed_tokens.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  std::string file(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  file += header;
  file += std::string(16, '\0');
  WriteFile(g_dir / "model.safetensors", file.data(), file.size());
  std::atexit([] {
    std::error_code ec;
    fs::remove_all(g_dir, ec);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0] % 3;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (mode == 0)
    FuzzConfig(text);
  else if (mode == 1)
    FuzzTokenizer(text, data[0] >> 2);
  else
    FuzzDirectory(data + 1, size - 1);
  return 0;
}
