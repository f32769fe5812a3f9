// `skipkv make-model --preset P --type T --seed S -o FILE.gguf`: a model of
// a real architecture with random weights and a complete tokenizer, for
// benchmarks and tests that need the shapes (and llama.cpp compatibility)
// but not the trained weights. Presets and the weight rule: io/make_model.h.
// Internal tool: it writes model files with random weights (src/io), below the public
// API by nature.
#include <cstdio>
#include <memory>
#include <string>

#include "command_registry.h"
#include "progress_bar.h"
#include "io/make_model.h"

namespace skipkv::cli {
namespace {

struct MakeModelCliOptions {
  std::string preset = "tiny-qwen2";
  int layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0, context = 0;
  std::string type = "f16";
  uint64_t seed = 1;
  std::string tokenizer;
  std::string chat_template;
  std::string output;
  int threads = 0;
  bool quiet = false;
};

int Run(const MakeModelCliOptions& o) {
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "skipkv make-model: %s\n", st.ToString().c_str());
    return 1;
  };
  auto shape = LookupModelPreset(o.preset);
  if (!shape.ok()) return fail(shape.status());
  auto type = ParseWeightType(o.type);
  if (!type.ok()) return fail(type.status());
  MakeModelOptions opts;
  opts.preset = o.preset;
  opts.shape = *shape;
  for (auto [dst, src] : {std::pair{&opts.shape.layers, o.layers}, {&opts.shape.hidden, o.hidden},
                          {&opts.shape.heads, o.heads}, {&opts.shape.kv_heads, o.kv_heads},
                          {&opts.shape.ffn, o.ffn}, {&opts.shape.vocab, o.vocab}, {&opts.shape.context, o.context}}) {
    if (src != 0) *dst = src;
  }
  opts.type = *type;
  opts.seed = o.seed;
  opts.tokenizer_path = o.tokenizer;
  opts.chat_template_path = o.chat_template;
  opts.output_path = o.output;
  opts.threads = o.threads;
  if (!o.quiet) {
    auto bar = std::make_shared<ProgressBar>("make-model");
    opts.progress = [bar](size_t done, size_t total, const std::string& name) {
      bar->Update(static_cast<double>(done), static_cast<double>(total), name);
    };
  }
  const Status st = MakeRandomModel(opts);
  if (!st.ok()) return fail(st);
  if (!o.quiet) std::fprintf(stderr, "wrote %s\n", o.output.c_str());
  return 0;
}

CommandRegistrar reg("make-model", "Write a random-weight GGUF model of a preset architecture", [](CLI::App& sub) {
  auto o = std::make_shared<MakeModelCliOptions>();
  sub.add_option("--preset", o->preset, "r1-qwen-1.5b | tiny-qwen2 | tiny-llama")->capture_default_str();
  sub.add_option("--layers", o->layers, "Override the number of layers");
  sub.add_option("--hidden", o->hidden, "Override the hidden size");
  sub.add_option("--heads", o->heads, "Override the number of attention heads");
  sub.add_option("--kv-heads", o->kv_heads, "Override the number of KV heads");
  sub.add_option("--ffn", o->ffn, "Override the feed-forward size");
  sub.add_option("--vocab", o->vocab, "Override the vocabulary size (>= the tokenizer's)");
  sub.add_option("--context", o->context, "Override the context length");
  sub.add_option("--type", o->type, "f32|f16|bf16|q8_0|q4_0|q4_k|q6_k|q4_k_m")->capture_default_str();
  sub.add_option("--seed", o->seed, "Random seed (weights depend only on seed and tensor name)")->capture_default_str();
  sub.add_option("--tokenizer", o->tokenizer,
                 std::string("qwen2: tokenizer.json (default ") + kDefaultQwenTokenizerJson +
                     "); llama: tokenizer.bin (default: embedded tok512)");
  sub.add_option("--chat-template", o->chat_template, "Jinja file stored as tokenizer.chat_template");
  sub.add_option("-o,--output", o->output, "Output .gguf path")->required();
  sub.add_option("-t,--threads", o->threads, "Threads (0 = all cores)");
  sub.add_flag("-q,--quiet", o->quiet, "No progress output");
  return [o]() { return Run(*o); };
});

}  // namespace
}  // namespace skipkv::cli
