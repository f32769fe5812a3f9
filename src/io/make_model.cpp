// Random-weight model generation; see make_model.h.
#include "io/make_model.h"

#include <cmath>
#include <filesystem>

#include "io/embedded/embedded_model.h"
#include "io/gguf_stream_writer.h"
#include "io/hf_vocab.h"
#include "io/llama2c.h"
#include "io/model_limits.h"
#include "tensor/quant.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

namespace skipkv {

StatusOr<ModelShape> LookupModelPreset(const std::string& name) {
  ModelShape s;
  if (name == "r1-qwen-1.5b") {
    s = {"qwen2", 28, 1536, 12, 2, 8960, 151936, 131072, 10000.0f, 1e-6f, false, "deepseek-r1-qwen"};
  } else if (name == "tiny-qwen2") {
    s = {"qwen2", 2, 256, 4, 2, 512, 151936, 4096, 1000000.0f, 1e-6f, true, "qwen2"};
  } else if (name == "tiny-llama") {
    s = {"llama", 2, 256, 4, 2, 512, 512, 512, 10000.0f, 1e-5f, false, ""};
  } else {
    return InvalidArgument("unknown preset '" + name + "' (expected r1-qwen-1.5b, tiny-qwen2, tiny-llama)");
  }
  return s;
}

namespace {

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t HashName(const std::string& s) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Fills `row` with N(0, std^2) values from a stream that depends only on (seed, name, row index).
void RandomRow(uint64_t seed, uint64_t name_hash, int64_t r, float stddev, float* row, int64_t n) {
  uint64_t state = seed ^ (name_hash * 0x9e3779b97f4a7c15ull) ^ (static_cast<uint64_t>(r) << 1);
  SplitMix64(state);
  for (int64_t i = 0; i < n; i += 2) {  // Box-Muller, two values per pair of uniforms
    const double u1 = (static_cast<double>(SplitMix64(state) >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;
    const double rad = std::sqrt(-2.0 * std::log(u1)) * stddev;
    row[i] = static_cast<float>(rad * std::cos(2.0 * M_PI * u2));
    if (i + 1 < n) row[i + 1] = static_cast<float>(rad * std::sin(2.0 * M_PI * u2));
  }
}

struct TensorPlan {
  GgufTensorDecl decl;
  bool ones;  // norm weights
};

Status CheckShape(const ModelShape& s) {
  using namespace model_limits;
  struct Field {
    const char* name;
    int value;
    int64_t max;
  };
  const Field fields[] = {{"layers", s.layers, kMaxLayers}, {"hidden", s.hidden, kMaxDim},
                          {"heads", s.heads, kMaxHeads},    {"kv-heads", s.kv_heads, kMaxHeads},
                          {"ffn", s.ffn, kMaxDim},          {"vocab", s.vocab, kMaxVocab},
                          {"context", s.context, kMaxContext}};
  for (const Field& f : fields) {
    if (f.value <= 0 || f.value > f.max) {
      return InvalidArgument(std::string("--") + f.name + " = " + std::to_string(f.value) + " is outside [1, " +
                             std::to_string(f.max) + "]");
    }
  }
  if (s.hidden % s.heads != 0 || (s.hidden / s.heads) % 2 != 0) {
    return InvalidArgument("--hidden " + std::to_string(s.hidden) + " must be --heads " + std::to_string(s.heads) +
                           " times an even head size");
  }
  if (s.heads % s.kv_heads != 0) {
    return InvalidArgument("--heads " + std::to_string(s.heads) + " is not a multiple of --kv-heads " +
                           std::to_string(s.kv_heads));
  }
  return Status::Ok();
}

}  // namespace

Status MakeRandomModel(const MakeModelOptions& opts) {
  const ModelShape& s = opts.shape;
  SKIPKV_RETURN_IF_ERROR(CheckShape(s));
  SKIPKV_ASSIGN_OR_RETURN(const int threads, ResolveThreadCount(opts.threads, "threads"));
  GgufMetadata md;
  const std::string a = s.arch + ".";
  const int head = s.hidden / s.heads, kv_dim = head * s.kv_heads;
  md.Set("general.architecture", GgufValue::Str(s.arch));
  md.Set("general.name", GgufValue::Str("skipkv-random-" + opts.preset));
  md.Set("general.file_type", GgufValue::U32(LlamaFileType(opts.type)));
  md.Set("general.quantization_version", GgufValue::U32(2));
  md.Set("skipkv.random_seed", GgufValue::U64(opts.seed));
  md.Set(a + "block_count", GgufValue::U32(s.layers));
  md.Set(a + "context_length", GgufValue::U32(s.context));
  md.Set(a + "embedding_length", GgufValue::U32(s.hidden));
  md.Set(a + "feed_forward_length", GgufValue::U32(s.ffn));
  md.Set(a + "attention.head_count", GgufValue::U32(s.heads));
  md.Set(a + "attention.head_count_kv", GgufValue::U32(s.kv_heads));
  md.Set(a + "rope.dimension_count", GgufValue::U32(head));
  md.Set(a + "rope.freq_base", GgufValue::F32(s.rope_theta));
  md.Set(a + "attention.layer_norm_rms_epsilon", GgufValue::F32(s.rms_eps));
  md.Set(a + "vocab_size", GgufValue::U32(s.vocab));

  if (s.arch == "qwen2") {
    std::string tok = opts.tokenizer_path;
    if (tok.empty()) {  // the default: relative to the working directory, else to the source tree
      tok = kDefaultQwenTokenizerJson;
#ifdef SKIPKV_SOURCE_DIR
      const std::string in_tree = std::string(SKIPKV_SOURCE_DIR) + "/" + kDefaultQwenTokenizerJson;
      if (!std::filesystem::exists(tok) && std::filesystem::exists(in_tree)) tok = in_tree;
#endif
    }
    if (!std::filesystem::exists(tok)) {
      return NotFound("tokenizer.json '" + tok + "' not found (run scripts/setup.sh, or pass --tokenizer PATH)");
    }
    Gpt2VocabOptions vo = R1DistillQwenVocabOptions(s.vocab);
    vo.pre = s.tokenizer_pre.empty() ? "qwen2" : s.tokenizer_pre;
    SKIPKV_RETURN_IF_ERROR(AddGpt2TokenizerMetadata(tok, vo, &md));
  } else if (s.arch == "llama") {
    if (opts.tokenizer_path.empty()) {
      const EmbeddedBlob tok = EmbeddedDefaultTokenizerBytes();
      if (s.vocab != 512) {
        return InvalidArgument("--vocab " + std::to_string(s.vocab) +
                               ": the embedded tok512 vocabulary has 512 tokens (pass --tokenizer tokenizer.bin)");
      }
      SKIPKV_RETURN_IF_ERROR(AddLlama2cTokenizerMetadata(tok.data, tok.size, s.vocab, "<embedded>/tok512.bin", &md));
    } else {
      SKIPKV_ASSIGN_OR_RETURN(auto file, MappedFile::Open(opts.tokenizer_path));
      SKIPKV_RETURN_IF_ERROR(AddLlama2cTokenizerMetadata(file->data(), file->size(), s.vocab, opts.tokenizer_path, &md));
    }
  } else {
    return InvalidArgument("unknown architecture '" + s.arch + "'");
  }
  if (!opts.chat_template_path.empty()) {
    SKIPKV_ASSIGN_OR_RETURN(std::string tmpl, ReadFileToString(opts.chat_template_path));
    md.Set("tokenizer.chat_template", GgufValue::Str(tmpl));
  }

  // Tensor table in llama.cpp's order.
  std::vector<TensorPlan> plan;
  auto add = [&](const std::string& name, std::vector<int64_t> ne, bool ones = false) {
    plan.push_back({{name, DType::kF32, std::move(ne)}, ones});
  };
  add("token_embd.weight", {s.hidden, s.vocab});
  for (int l = 0; l < s.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add(b + "attn_norm.weight", {s.hidden}, true);
    add(b + "attn_q.weight", {s.hidden, s.hidden});
    add(b + "attn_k.weight", {s.hidden, kv_dim});
    add(b + "attn_v.weight", {s.hidden, kv_dim});
    if (s.arch == "qwen2") {
      add(b + "attn_q.bias", {s.hidden});
      add(b + "attn_k.bias", {kv_dim});
      add(b + "attn_v.bias", {kv_dim});
    }
    add(b + "attn_output.weight", {s.hidden, s.hidden});
    add(b + "ffn_norm.weight", {s.hidden}, true);
    add(b + "ffn_gate.weight", {s.hidden, s.ffn});
    add(b + "ffn_up.weight", {s.hidden, s.ffn});
    add(b + "ffn_down.weight", {s.ffn, s.hidden});
  }
  add("output_norm.weight", {s.hidden}, true);
  if (!s.tied_output) add("output.weight", {s.hidden, s.vocab});
  std::vector<GgufTensorDecl> decls;
  for (TensorPlan& p : plan) {
    p.decl.type = ChooseTensorType(opts.type, p.decl.name, static_cast<int>(p.decl.ne.size()), p.decl.ne[0],
                                   s.layers, !s.tied_output);
    decls.push_back(p.decl);
  }
  SKIPKV_ASSIGN_OR_RETURN(auto writer, GgufStreamWriter::Create(opts.output_path, md, decls));

  ThreadPool pool(threads);
  constexpr int64_t kRowsPerChunk = 512;
  std::vector<uint8_t> chunk;
  size_t total_elems = 0, done_elems = 0;
  for (const auto& p : plan) total_elems += p.decl.NumElements();
  for (size_t i = 0; i < plan.size(); ++i) {
    const GgufTensorDecl& d = plan[i].decl;
    const int64_t n = d.ne[0];
    const int64_t rows = d.ne.size() > 1 ? d.ne[1] : 1;
    const size_t row_bytes = RowBytes(d.type, n);
    const uint64_t name_hash = HashName(d.name);
    for (int64_t r0 = 0; r0 < rows; r0 += kRowsPerChunk) {
      const int64_t nr = std::min(kRowsPerChunk, rows - r0);
      chunk.resize(row_bytes * nr);
      pool.ParallelFor(nr, 16, [&](int64_t b, int64_t e, int) {
        std::vector<float> row(n);
        for (int64_t r = b; r < e; ++r) {
          if (plan[i].ones) std::fill(row.begin(), row.end(), 1.0f);
          else RandomRow(opts.seed, name_hash, r0 + r, 0.02f, row.data(), n);
          QuantizeRow(d.type, row.data(), chunk.data() + r * row_bytes, n);
        }
      });
      SKIPKV_RETURN_IF_ERROR(writer->Append(chunk.data(), chunk.size()));
      done_elems += static_cast<size_t>(nr * n);
      if (opts.progress) opts.progress(done_elems, total_elems, d.name);
    }
  }
  return writer->Finish();
}

}  // namespace skipkv
