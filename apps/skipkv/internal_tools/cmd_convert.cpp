// `skipkv convert IN -o OUT.gguf [--type T]`: writes any model skipkv reads
// (llama2.c, Hugging Face directory, GGUF) as a GGUF v3 file, tensor by
// tensor. Without --type every tensor keeps its type (an exact copy); with
// it, 1-D tensors stay F32 and the others follow the rule in io/model_writer.h.
// Hugging Face directories get their tokenizer.json embedded as GGUF
// tokenizer metadata (byte-level BPE; --r1-specials for R1-Distill-Qwen).
// Internal tool: it reads and writes model files tensor by tensor (src/io), below the
// public API by nature.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "command_registry.h"
#include "progress_bar.h"
#include "io/hf_vocab.h"
#include "io/model_source.h"
#include "io/model_writer.h"
#include "util/json_depth.h"
#include "util/mapped_file.h"

namespace skipkv::cli {
namespace {

struct ConvertOptions {
  std::string input;
  std::string output;
  std::string type;
  std::string tokenizer;
  bool r1_specials = false;
  int threads = 0;
  bool quiet = false;
};

int Fail(const Status& st) {
  std::fprintf(stderr, "skipkv convert: %s\n", st.ToString().c_str());
  return 1;
}

// Embeds a Hugging Face directory's tokenizer.json as GGUF gpt2 metadata:
// pre-tokenizer by architecture (llama -> "llama-bpe", qwen2 -> "qwen2"),
// padded to <arch>.vocab_size, add_bos_token from tokenizer_config.json.
Status AddHfTokenizer(const ConvertOptions& o, ModelSource* src) {
  SKIPKV_ASSIGN_OR_RETURN(std::string arch, src->metadata.GetString("general.architecture"));
  SKIPKV_ASSIGN_OR_RETURN(int64_t vocab, src->metadata.GetIntOr(arch + ".vocab_size", 0));
  Gpt2VocabOptions vo;
  if (o.r1_specials) {
    vo = R1DistillQwenVocabOptions(vocab);
  } else {
    vo.vocab_size = vocab;
    vo.pre = arch == "llama" ? "llama-bpe" : "qwen2";
    if (!src->tokenizer_config_path.empty()) {
      SKIPKV_ASSIGN_OR_RETURN(std::string text, ReadFileToString(src->tokenizer_config_path));
      SKIPKV_RETURN_IF_ERROR(CheckJsonDepth(text, src->tokenizer_config_path));  // before parsing: issue 43
      const nlohmann::json cfg = nlohmann::json::parse(text, nullptr, false);
      if (cfg.is_object() && cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) {
        vo.add_bos = cfg["add_bos_token"].get<bool>();
      }
    }
  }
  return AddGpt2TokenizerMetadata(src->tokenizer_json_path, vo, &src->metadata);
}

int Run(const ConvertOptions& o) {
  auto m = OpenModel(o.input, o.tokenizer);
  if (!m.ok()) return Fail(m.status());
  ModelSource& src = **m;
  if (src.format == ModelFormat::kHuggingFace && !src.tokenizer_json_path.empty() &&
      !src.metadata.Has("tokenizer.ggml.tokens")) {
    const Status st = AddHfTokenizer(o, &src);
    if (!st.ok()) return Fail(st);
  }
  GgufExportOptions opts;
  opts.threads = o.threads;
  if (!o.type.empty()) {
    auto spec = ParseWeightType(o.type);
    if (!spec.ok()) return Fail(spec.status());
    opts.type = *spec;
  }
  if (!o.quiet) {
    auto bar = std::make_shared<ProgressBar>("convert");
    opts.progress = [bar](size_t done, size_t total, const std::string& name) {
      bar->Update(static_cast<double>(done), static_cast<double>(total), name);
    };
  }
  const Status st = WriteModelAsGguf(src, o.output, opts);
  if (!st.ok()) return Fail(st);
  if (!o.quiet) std::fprintf(stderr, "wrote %s (%zu tensors)\n", o.output.c_str(), src.tensors.size());
  return 0;
}

CommandRegistrar reg("convert", "Write a llama2.c / Hugging Face / GGUF model as a GGUF file", [](CLI::App& sub) {
  auto o = std::make_shared<ConvertOptions>();
  sub.add_option("input", o->input, "Input model: llama2.c .bin, Hugging Face directory, .gguf, or :default:")
      ->required();
  sub.add_option("-o,--output", o->output, "Output .gguf path")->required();
  sub.add_option("--type", o->type, "f32|f16|bf16|q8_0|q4_0|q4_k|q6_k|q4_k_m (default: keep each tensor's type)");
  sub.add_option("--tokenizer", o->tokenizer, "llama2.c: the tokenizer.bin (default: tokenizer.bin/tok*.bin beside)");
  sub.add_flag("--r1-specials", o->r1_specials,
               "HF input: install DeepSeek-R1-Distill-Qwen's special tokens over the Qwen2 BPE");
  sub.add_option("-t,--threads", o->threads, "Threads for quantisation (0 = all cores)");
  sub.add_flag("-q,--quiet", o->quiet, "No progress output");
  return [o]() { return Run(*o); };
});

}  // namespace
}  // namespace skipkv::cli
