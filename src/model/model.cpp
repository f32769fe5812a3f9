// Weight binding: every tensor the forward pass reads is looked up by its
// GGUF name and checked against the shape the config implies (ggml order,
// ne[0] = row length). Norm weights and biases become f32 vectors.
#include "model/model.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "tensor/dtype.h"
#include "tensor/interleaved.h"
#include "tensor/quant.h"
#include "util/logging.h"
#include "util/mapped_file.h"

namespace skipkv {

namespace {

std::string ShapeOf(std::initializer_list<int64_t> ne) {
  std::string s = "[";
  bool first = true;
  for (int64_t n : ne) {
    if (!first) s += ", ";
    s += std::to_string(n);
    first = false;
  }
  return s + "]";
}

// Whether `t` has exactly the dimensions `ne` (trailing ones ignored).
bool HasShape(const TensorView& t, std::initializer_list<int64_t> ne) {
  int i = 0;
  for (int64_t n : ne) {
    if (t.ne[i++] != n) return false;
  }
  for (; i < 4; ++i) {
    if (t.ne[i] != 1) return false;
  }
  return true;
}

class Binder {
 public:
  explicit Binder(const ModelSource& source) : source_(source) {}

  // A matrix W[rows][cols] in math order, i.e. ne {cols, rows}, of any dtype
  // the kernels compute with. `what` names the dimensions for the error.
  StatusOr<TensorView> Matrix(const std::string& name, int64_t cols, int64_t rows, const char* what) {
    const TensorView* t = source_.FindTensor(name);
    if (t == nullptr) return NotFound("tensor '" + name + "' is missing");
    if (!HasShape(*t, {cols, rows})) {
      return InvalidArgument("tensor '" + name + "' has shape " + t->ShapeString() + "; expected " +
                             ShapeOf({cols, rows}) + " (" + what + ", ggml order)");
    }
    const DTypeInfo& info = GetDTypeInfo(t->type);
    if (!info.supported) {
      return Unsupported("tensor '" + name + "' has type " + info.name +
                         ", which skipkv cannot compute with");
    }
    if (t->data == nullptr) return InvalidArgument("tensor '" + name + "' has no data");
    return *t;
  }

  // A vector of n values stored as f32, f16 or bf16, converted to f32.
  StatusOr<std::vector<float>> Vector(const std::string& name, int64_t n, const char* what) {
    const TensorView* t = source_.FindTensor(name);
    if (t == nullptr) return NotFound("tensor '" + name + "' is missing");
    return ToF32(*t, n, what);
  }

  // The same, but absent is fine (an empty vector).
  StatusOr<std::vector<float>> OptionalVector(const std::string& name, int64_t n, const char* what) {
    const TensorView* t = source_.FindTensor(name);
    if (t == nullptr) return std::vector<float>{};
    return ToF32(*t, n, what);
  }

 private:
  static StatusOr<std::vector<float>> ToF32(const TensorView& t, int64_t n, const char* what) {
    if (!HasShape(t, {n})) {
      return InvalidArgument("tensor '" + t.name + "' has shape " + t.ShapeString() + "; expected " +
                             ShapeOf({n}) + " (" + what + ")");
    }
    if (t.data == nullptr) return InvalidArgument("tensor '" + t.name + "' has no data");
    if (t.type != DType::kF32 && t.type != DType::kF16 && t.type != DType::kBF16) {
      return Unsupported("tensor '" + t.name + "' has type " + DTypeName(t.type) +
                         "; norm weights and biases must be f32, f16 or bf16");
    }
    std::vector<float> out(static_cast<size_t>(n));
    DequantizeRow(t.type, t.data, out.data(), n);
    return out;
  }

  const ModelSource& source_;
};

}  // namespace

StatusOr<ModelWeights> BindWeights(const ModelSource& source, const ModelConfig& c) {
  Binder b(source);
  ModelWeights w;
  const int64_t D = c.d_model, F = c.ffn_dim, V = c.vocab_size, Q = c.q_dim(), KV = c.kv_dim();

  SKIPKV_ASSIGN_OR_RETURN(w.token_embd, b.Matrix("token_embd.weight", D, V, "[D, vocab]"));
  w.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights& lw = w.layers[l];
    SKIPKV_ASSIGN_OR_RETURN(lw.attn_norm, b.Vector(p + "attn_norm.weight", D, "[D]"));
    SKIPKV_ASSIGN_OR_RETURN(lw.wq, b.Matrix(p + "attn_q.weight", D, Q, "[D, n_heads * head_dim]"));
    SKIPKV_ASSIGN_OR_RETURN(lw.wk, b.Matrix(p + "attn_k.weight", D, KV, "[D, n_kv_heads * head_dim]"));
    SKIPKV_ASSIGN_OR_RETURN(lw.wv, b.Matrix(p + "attn_v.weight", D, KV, "[D, n_kv_heads * head_dim]"));
    if (c.arch == Architecture::kQwen2) {  // Qwen2 always has q/k/v biases
      SKIPKV_ASSIGN_OR_RETURN(lw.bq, b.Vector(p + "attn_q.bias", Q, "[n_heads * head_dim]"));
      SKIPKV_ASSIGN_OR_RETURN(lw.bk, b.Vector(p + "attn_k.bias", KV, "[n_kv_heads * head_dim]"));
      SKIPKV_ASSIGN_OR_RETURN(lw.bv, b.Vector(p + "attn_v.bias", KV, "[n_kv_heads * head_dim]"));
    } else {  // optional for Llama-family checkpoints
      SKIPKV_ASSIGN_OR_RETURN(lw.bq, b.OptionalVector(p + "attn_q.bias", Q, "[n_heads * head_dim]"));
      SKIPKV_ASSIGN_OR_RETURN(lw.bk, b.OptionalVector(p + "attn_k.bias", KV, "[n_kv_heads * head_dim]"));
      SKIPKV_ASSIGN_OR_RETURN(lw.bv, b.OptionalVector(p + "attn_v.bias", KV, "[n_kv_heads * head_dim]"));
    }
    SKIPKV_ASSIGN_OR_RETURN(lw.wo, b.Matrix(p + "attn_output.weight", Q, D, "[n_heads * head_dim, D]"));
    SKIPKV_ASSIGN_OR_RETURN(lw.ffn_norm, b.Vector(p + "ffn_norm.weight", D, "[D]"));
    SKIPKV_ASSIGN_OR_RETURN(lw.w_gate, b.Matrix(p + "ffn_gate.weight", D, F, "[D, ffn]"));
    SKIPKV_ASSIGN_OR_RETURN(lw.w_up, b.Matrix(p + "ffn_up.weight", D, F, "[D, ffn]"));
    SKIPKV_ASSIGN_OR_RETURN(lw.w_down, b.Matrix(p + "ffn_down.weight", F, D, "[ffn, D]"));
  }
  SKIPKV_ASSIGN_OR_RETURN(w.output_norm, b.Vector("output_norm.weight", D, "[D]"));
  if (c.tied_embeddings) {
    w.output = w.token_embd;
  } else {
    SKIPKV_ASSIGN_OR_RETURN(w.output, b.Matrix("output.weight", D, V, "[D, vocab]"));
  }
  return w;
}

int InterleaveWeights(ModelSource& source) {
  if (source.weights_load != FileLoad::kRead) return 0;
  std::vector<TensorView*> todo;
  const uint8_t *lo = nullptr, *hi = nullptr;
  for (TensorView& t : source.tensors) {
    if (t.ne[2] != 1 || t.ne[3] != 1 || !CanInterleave(t.type, t.ne[1], t.ne[0]) ||
        !kernels::InterleavedWeightsWanted(t.type)) {
      continue;
    }
    todo.push_back(&t);
    lo = lo == nullptr ? t.data : std::min(lo, t.data);
    hi = std::max(hi, t.data + t.NumBytes());
  }
  if (todo.empty()) return 0;
  // The read region is private anonymous memory (MappedFile): writable for
  // the rewrite, read-only again afterwards.
  if (Status s = SetHugePagesWritable(lo, hi, true); !s.ok()) {
    SKIPKV_LOG_WARN("%s: the weights keep the file's layout: %s", source.path.c_str(), s.message().c_str());
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  for (TensorView* t : todo) {
    InterleaveRows(t->type, const_cast<uint8_t*>(t->data), t->ne[1], t->ne[0]);
    t->type = *InterleavedType(t->type);
  }
  SKIPKV_LOG_INFO("%s: %zu tensors interleaved in 16-row groups in %.2f s", source.path.c_str(), todo.size(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (Status s = SetHugePagesWritable(lo, hi, false); !s.ok()) {
    SKIPKV_LOG_WARN("%s: %s", source.path.c_str(), s.message().c_str());
  }
  return static_cast<int>(todo.size());
}

StatusOr<std::unique_ptr<Model>> Model::Load(std::shared_ptr<const ModelSource> source) {
  if (source == nullptr) return InvalidArgument("Model::Load: no model source");
  const std::string where = source->path.empty() ? std::string("model") : source->path;
  StatusOr<ModelConfig> config = ModelConfigFromSource(*source);
  if (!config.ok()) return config.status().WithContext(where);
  StatusOr<ModelWeights> weights = BindWeights(*source, *config);
  if (!weights.ok()) return weights.status().WithContext(where);
  std::unique_ptr<Model> m(new Model());
  m->source_ = std::move(source);
  m->config_ = std::move(config).value();
  m->weights_ = std::move(weights).value();
  return m;
}

KvCacheShape Model::KvShape(KvDType dtype, int query_window, bool track_attention) const {
  KvCacheShape s;
  s.n_layers = config_.n_layers;
  s.n_heads = config_.n_heads;
  s.n_kv_heads = config_.n_kv_heads;
  s.head_dim = config_.head_dim;
  s.query_window = query_window;
  s.dtype = dtype;
  s.track_attention = track_attention;
  return s;
}

}  // namespace skipkv
