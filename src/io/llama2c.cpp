// llama2.c checkpoint and tokenizer import; see llama2c.h.
#include "io/llama2c.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>

namespace skipkv {
namespace fs = std::filesystem;

uint64_t Llama2cConfig::ExpectedFileBytes() const {
  const uint64_t d = dim, h = hidden_dim, L = n_layers, v = vocab_size, s = seq_len;
  const uint64_t head = d / n_heads, kv = head * n_kv_heads;
  uint64_t floats = v * d                  // token embedding
                    + L * d                // attention norms
                    + L * d * d            // wq
                    + 2 * L * kv * d       // wk, wv
                    + L * d * d            // wo
                    + L * d                // ffn norms
                    + 3 * L * h * d        // w1, w2, w3
                    + d                    // final norm
                    + s * head;            // two legacy RoPE tables of seq_len * head/2
  if (!shared_classifier) floats += v * d;
  return 28 + 4 * floats;
}

StatusOr<Llama2cConfig> ParseLlama2cHeader(const uint8_t* data, size_t size, const std::string& name) {
  if (size < 28) return CorruptData(name + ": " + std::to_string(size) + " bytes, too short for a llama2.c header");
  int32_t h[7];
  std::memcpy(h, data, sizeof(h));
  static const char* kFields[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  // Generous bounds: they keep every product below 2^63 and reject garbage.
  static const int64_t kMax[7] = {1 << 16, 1 << 18, 1 << 10, 1 << 10, 1 << 10, 1 << 22, 1 << 22};
  Llama2cConfig c;
  c.shared_classifier = h[5] > 0;
  if (h[5] < 0 && h[5] != INT32_MIN) h[5] = -h[5];
  for (int i = 0; i < 7; ++i) {
    if (h[i] <= 0 || h[i] > kMax[i]) {
      return CorruptData(name + ": llama2.c header field " + kFields[i] + " = " + std::to_string(h[i]) +
                         " is outside [1, " + std::to_string(kMax[i]) + "] (not a llama2.c checkpoint?)");
    }
  }
  c.dim = h[0]; c.hidden_dim = h[1]; c.n_layers = h[2]; c.n_heads = h[3]; c.n_kv_heads = h[4];
  c.vocab_size = h[5]; c.seq_len = h[6];
  if (c.dim % c.n_heads != 0 || (c.dim / c.n_heads) % 2 != 0) {
    return CorruptData(name + ": dim " + std::to_string(c.dim) + " is not n_heads " + std::to_string(c.n_heads) +
                       " times an even head size");
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    return CorruptData(name + ": n_heads " + std::to_string(c.n_heads) + " is not a multiple of n_kv_heads " +
                       std::to_string(c.n_kv_heads));
  }
  const uint64_t expected = c.ExpectedFileBytes();
  if (size != expected) {
    Llama2cConfig other = c;
    other.shared_classifier = !c.shared_classifier;
    std::string hint;
    if (size == other.ExpectedFileBytes()) {
      hint = c.shared_classifier ? " (the file also holds a classifier, but vocab_size > 0 says it is shared)"
                                 : " (the file lacks the classifier that vocab_size < 0 announces)";
    }
    return CorruptData(name + ": file is " + std::to_string(size) + " bytes but the header (dim " +
                       std::to_string(c.dim) + ", " + std::to_string(c.n_layers) + " layers, vocab " +
                       std::to_string(c.vocab_size) + ") implies " + std::to_string(expected) + hint);
  }
  return c;
}

Status AddLlama2cTokenizerMetadata(const uint8_t* data, size_t size, int64_t vocab_size, const std::string& name,
                                   GgufMetadata* md) {
  if (size < 4) return CorruptData(name + ": too short for a tokenizer.bin");
  uint32_t max_len;
  std::memcpy(&max_len, data, 4);
  size_t pos = 4;
  std::vector<GgufValue> tokens, scores, types;
  tokens.reserve(vocab_size);
  for (int64_t id = 0; id < vocab_size; ++id) {
    if (size - pos < 8) {
      return CorruptData(name + ": truncated at token " + std::to_string(id) + " of " + std::to_string(vocab_size));
    }
    float score;
    int32_t len;
    std::memcpy(&score, data + pos, 4);
    std::memcpy(&len, data + pos + 4, 4);
    pos += 8;
    if (len < 0 || static_cast<uint32_t>(len) > max_len || static_cast<size_t>(len) > size - pos) {
      return CorruptData(name + ": token " + std::to_string(id) + " has length " + std::to_string(len) +
                         " (max_token_length " + std::to_string(max_len) + ", " + std::to_string(size - pos) +
                         " bytes left)");
    }
    std::string raw(reinterpret_cast<const char*>(data + pos), len);
    pos += len;
    std::string piece;
    for (char ch : raw) {
      if (ch == ' ') piece += "\xE2\x96\x81";  // U+2581, SentencePiece's space marker
      else piece += ch;
    }
    int32_t type = 1;  // normal
    if (id == 0) type = 2;                         // unknown
    else if (id == 1 || id == 2) type = 3;         // control (BOS, EOS)
    else if (raw.size() == 6 && raw.compare(0, 3, "<0x") == 0 && raw[5] == '>' &&
             std::isxdigit(static_cast<unsigned char>(raw[3])) && std::isxdigit(static_cast<unsigned char>(raw[4]))) {
      type = 6;                                    // byte fallback
    }
    tokens.push_back(GgufValue::Str(std::move(piece)));
    scores.push_back(GgufValue::F32(score));
    types.push_back(GgufValue::I32(type));
  }
  if (pos != size) {
    return CorruptData(name + ": " + std::to_string(size - pos) + " trailing bytes after " +
                       std::to_string(vocab_size) + " tokens (vocabulary size mismatch?)");
  }
  md->Set("tokenizer.ggml.model", GgufValue::Str("llama"));
  md->Set("tokenizer.ggml.tokens", GgufValue::Arr(GgufType::kString, std::move(tokens)));
  md->Set("tokenizer.ggml.scores", GgufValue::Arr(GgufType::kFloat32, std::move(scores)));
  md->Set("tokenizer.ggml.token_type", GgufValue::Arr(GgufType::kInt32, std::move(types)));
  md->Set("tokenizer.ggml.bos_token_id", GgufValue::U32(1));
  md->Set("tokenizer.ggml.eos_token_id", GgufValue::U32(2));
  md->Set("tokenizer.ggml.unknown_token_id", GgufValue::U32(0));
  md->Set("tokenizer.ggml.add_bos_token", GgufValue::Bool(true));
  md->Set("tokenizer.ggml.add_eos_token", GgufValue::Bool(false));
  md->Set("tokenizer.ggml.add_space_prefix", GgufValue::Bool(true));
  return Status::Ok();
}

StatusOr<std::unique_ptr<ModelSource>> Llama2cFromMemory(const uint8_t* model, size_t model_size,
                                                         const uint8_t* tok, size_t tok_size,
                                                         const std::string& name, const std::string& tok_name) {
  SKIPKV_ASSIGN_OR_RETURN(Llama2cConfig c, ParseLlama2cHeader(model, model_size, name));
  auto src = std::make_unique<ModelSource>();
  src->path = name;
  src->format = ModelFormat::kLlama2c;
  GgufMetadata& md = src->metadata;
  const int64_t head = c.dim / c.n_heads, kv_dim = head * c.n_kv_heads;
  md.Set("general.architecture", GgufValue::Str("llama"));
  md.Set("general.name", GgufValue::Str(fs::path(name).stem().string()));
  md.Set("llama.block_count", GgufValue::U32(c.n_layers));
  md.Set("llama.context_length", GgufValue::U32(c.seq_len));
  md.Set("llama.embedding_length", GgufValue::U32(c.dim));
  md.Set("llama.feed_forward_length", GgufValue::U32(c.hidden_dim));
  md.Set("llama.attention.head_count", GgufValue::U32(c.n_heads));
  md.Set("llama.attention.head_count_kv", GgufValue::U32(c.n_kv_heads));
  md.Set("llama.rope.dimension_count", GgufValue::U32(static_cast<uint32_t>(head)));
  md.Set("llama.rope.freq_base", GgufValue::F32(10000.0f));
  md.Set("llama.attention.layer_norm_rms_epsilon", GgufValue::F32(1e-5f));
  md.Set("llama.vocab_size", GgufValue::U32(c.vocab_size));
  md.Set("skipkv.rope_layout", GgufValue::Str("adjacent_pairs"));
  if (tok != nullptr) SKIPKV_RETURN_IF_ERROR(AddLlama2cTokenizerMetadata(tok, tok_size, c.vocab_size, tok_name, &md));

  const uint8_t* p = model + 28;
  // Adds `count` per-layer tensors (or one global when layered=false) of
  // shape ne, consuming them from the image in order.
  auto take = [&](const std::string& suffix, std::initializer_list<int64_t> ne, bool layered) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    const int copies = layered ? c.n_layers : 1;
    for (int l = 0; l < copies; ++l) {
      TensorView t;
      t.name = layered ? "blk." + std::to_string(l) + "." + suffix : suffix;
      t.type = DType::kF32;
      t.n_dims = static_cast<int>(ne.size());
      int d = 0;
      for (int64_t x : ne) t.ne[d++] = x;
      t.data = p;
      p += n * 4;
      src->tensors.push_back(std::move(t));
    }
  };
  take("token_embd.weight", {c.dim, c.vocab_size}, false);
  take("attn_norm.weight", {c.dim}, true);
  take("attn_q.weight", {c.dim, c.dim}, true);
  take("attn_k.weight", {c.dim, kv_dim}, true);
  take("attn_v.weight", {c.dim, kv_dim}, true);
  take("attn_output.weight", {c.dim, c.dim}, true);
  take("ffn_norm.weight", {c.dim}, true);
  take("ffn_gate.weight", {c.dim, c.hidden_dim}, true);
  take("ffn_down.weight", {c.hidden_dim, c.dim}, true);
  take("ffn_up.weight", {c.dim, c.hidden_dim}, true);
  take("output_norm.weight", {c.dim}, false);
  p += static_cast<size_t>(c.seq_len) * head * 4;  // skip the legacy freq_cis_real / freq_cis_imag tables
  if (!c.shared_classifier) take("output.weight", {c.dim, c.vocab_size}, false);
  // Group tensors by layer like llama.cpp's files (token_embd, blk.0.*, blk.1.*, ..., output_norm, output).
  auto rank = [](const std::string& n) -> int64_t {
    if (n.rfind("blk.", 0) == 0) return 1 + std::stoll(n.substr(4));
    return n == "token_embd.weight" ? 0 : (int64_t{1} << 40);
  };
  std::stable_sort(src->tensors.begin(), src->tensors.end(),
                   [&](const TensorView& a, const TensorView& b) { return rank(a.name) < rank(b.name); });
  return src;
}

StatusOr<std::unique_ptr<ModelSource>> OpenLlama2c(const std::string& path, const std::string& tokenizer_path,
                                                   FileLoad load) {
  SKIPKV_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> model, MappedFile::Open(path, load));
  std::string tok_path = tokenizer_path;
  if (tok_path.empty()) {
    const fs::path dir = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
    if (fs::exists(dir / "tokenizer.bin")) {
      tok_path = (dir / "tokenizer.bin").string();
    } else {
      std::vector<std::string> candidates;
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string fn = e.path().filename().string();
        if (fn.rfind("tok", 0) == 0 && e.path().extension() == ".bin") candidates.push_back(e.path().string());
      }
      std::sort(candidates.begin(), candidates.end());
      if (!candidates.empty()) tok_path = candidates.front();
    }
  }
  std::unique_ptr<MappedFile> tok;
  if (!tok_path.empty()) {
    SKIPKV_ASSIGN_OR_RETURN(tok, MappedFile::Open(tok_path));
    if (tok->size() == 0) return CorruptData(tok_path + ": empty tokenizer file");
  }
  SKIPKV_ASSIGN_OR_RETURN(auto src, Llama2cFromMemory(model->data(), model->size(), tok ? tok->data() : nullptr,
                                                      tok ? tok->size() : 0, path, tok_path));
  src->weights_load = model->load();
  src->owners.push_back(std::shared_ptr<MappedFile>(std::move(model)));
  if (tok) src->owners.push_back(std::shared_ptr<MappedFile>(std::move(tok)));
  return src;
}

}  // namespace skipkv
