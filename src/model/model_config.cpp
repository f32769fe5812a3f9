// Reads ModelConfig from GGUF-style metadata: one table of keys, then
// validation. Loaders for other formats map onto these same keys.
#include "model/model_config.h"


#include <cmath>
#include <numbers>
#include <sstream>

#include "io/model_limits.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"

namespace skipkv {

const char* ArchitectureName(Architecture a) {
  switch (a) {
    case Architecture::kLlama:
      return "llama";
    case Architecture::kQwen2:
      return "qwen2";
  }
  return "?";
}

std::string ModelConfig::ToString() const {
  std::ostringstream s;
  s << ArchitectureName(arch) << ": layers=" << n_layers << " D=" << d_model << " heads=" << n_heads
    << " kv_heads=" << n_kv_heads << " head_dim=" << head_dim << " ffn=" << ffn_dim << " vocab=" << vocab_size
    << " ctx=" << context_length << " eps=" << rms_eps << " rope_theta=" << rope.theta
    << " rope=" << (rope.style == kernels::RopeStyle::kRotateHalf ? "rotate_half" : "adjacent_pairs");
  if (rope.rot_dim != 0 && rope.rot_dim != head_dim) s << " rot_dim=" << rope.rot_dim;
  if (rope.llama3_factor > 0) {
    s << " rope_scaling=llama3(factor=" << rope.llama3_factor << ", low=" << rope.llama3_low_freq_factor
      << ", high=" << rope.llama3_high_freq_factor << ", orig_ctx=" << rope.llama3_original_context << ")";
  }
  if (rope.linear_scale != 1.f) s << " rope_scaling=linear(" << rope.linear_scale << ")";
  if (qkv_bias) s << " qkv_bias";
  if (tied_embeddings) s << " tied_embeddings";
  return s.str();
}

namespace {

// Reads an integer key that must be in [lo, hi].
StatusOr<int64_t> IntInRange(const GgufMetadata& md, const std::string& key, int64_t lo, int64_t hi,
                             const int64_t* dflt = nullptr) {
  StatusOr<int64_t> v = dflt ? md.GetIntOr(key, *dflt) : md.GetInt(key);
  if (!v.ok()) return v.status();
  if (*v < lo || *v > hi) {
    return InvalidArgument("metadata key '" + key + "' = " + std::to_string(*v) + " is out of range [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

StatusOr<float> PositiveFloat(const GgufMetadata& md, const std::string& key, double dflt) {
  SKIPKV_ASSIGN_OR_RETURN(double v, md.GetFloatOr(key, dflt));
  if (!(v > 0) || !std::isfinite(v)) {
    return InvalidArgument("metadata key '" + key + "' = " + std::to_string(v) +
                           " must be positive and finite");
  }
  return static_cast<float>(v);
}

// Llama-3 frequency scaling as Hugging Face computes it: the per-frequency
// divisor applied to theta^(-2i/d) (1 for short wavelengths, `factor` for
// long ones, a smooth blend between). llama.cpp's converter stores exactly
// these divisors as the tensor rope_freqs.weight.
float Llama3Divisor(const kernels::RopeParams& p, int i, int rot_dim) {
  const double freq = std::pow(static_cast<double>(p.theta), -2.0 * i / rot_dim);
  const double wavelen = 2.0 * std::numbers::pi / freq;
  const double low_wavelen = p.llama3_original_context / p.llama3_low_freq_factor;
  const double high_wavelen = p.llama3_original_context / p.llama3_high_freq_factor;
  if (wavelen < high_wavelen) return 1.f;
  if (wavelen > low_wavelen) return p.llama3_factor;
  const double smooth = (p.llama3_original_context / wavelen - p.llama3_low_freq_factor) /
                        (p.llama3_high_freq_factor - p.llama3_low_freq_factor);
  return static_cast<float>(1.0 / ((1.0 - smooth) / p.llama3_factor + smooth));
}

// Reads rope_freqs.weight (llama.cpp's encoding of Llama-3 scaling) as f32.
StatusOr<std::vector<float>> ReadF32Vector(const TensorView& t) {
  if (t.type != DType::kF32 && t.type != DType::kF16 && t.type != DType::kBF16) {
    return Unsupported("tensor '" + t.name + "' has type " + DTypeName(t.type) + "; expected f32, f16 or bf16");
  }
  std::vector<float> out(static_cast<size_t>(t.NumElements()));
  DequantizeRow(t.type, t.data, out.data(), t.NumElements());
  return out;
}

Status ReadRopeScaling(const GgufMetadata& md, const std::string& a, const ModelSource& source,
                       ModelConfig& c) {
  kernels::RopeParams& rope = c.rope;
  const int rot_dim = rope.rot_dim;
  SKIPKV_ASSIGN_OR_RETURN(std::string type, md.GetStringOr(a + ".rope.scaling.type", "none"));
  if (type == "none" || type.empty()) {
    // Older llama.cpp files carry a bare linear scale.
    SKIPKV_ASSIGN_OR_RETURN(float lin, PositiveFloat(md, a + ".rope.scale_linear", 1.0));
    rope.linear_scale = lin;
  } else if (type == "linear") {
    SKIPKV_ASSIGN_OR_RETURN(float f, PositiveFloat(md, a + ".rope.scaling.factor", 1.0));
    rope.linear_scale = f;
  } else if (type == "llama3") {
    SKIPKV_ASSIGN_OR_RETURN(rope.llama3_factor, PositiveFloat(md, a + ".rope.scaling.factor", 8.0));
    SKIPKV_ASSIGN_OR_RETURN(rope.llama3_low_freq_factor,
                            PositiveFloat(md, a + ".rope.scaling.low_freq_factor", 1.0));
    SKIPKV_ASSIGN_OR_RETURN(rope.llama3_high_freq_factor,
                            PositiveFloat(md, a + ".rope.scaling.high_freq_factor", 4.0));
    const int64_t dflt_ctx = 8192;
    SKIPKV_ASSIGN_OR_RETURN(int64_t octx, IntInRange(md, a + ".rope.scaling.original_context_length", 1,
                                                     int64_t{1} << 30, &dflt_ctx));
    rope.llama3_original_context = static_cast<int>(octx);
    if (rope.llama3_high_freq_factor <= rope.llama3_low_freq_factor) {
      return InvalidArgument("metadata key '" + a + ".rope.scaling.high_freq_factor' (" +
                             std::to_string(rope.llama3_high_freq_factor) +
                             ") must exceed low_freq_factor (" + std::to_string(rope.llama3_low_freq_factor) +
                             ")");
    }
  } else {
    return Unsupported("RoPE scaling type '" + type + "' (metadata key '" + a +
                       ".rope.scaling.type'); supported: none, linear, llama3");
  }

  // llama.cpp writes Llama-3 scaling as per-frequency divisors in the tensor
  // rope_freqs.weight instead of metadata. Accept it when it is exactly the
  // llama3 formula (with the metadata's parameters, else Llama 3.1's
  // defaults); anything else would silently change the model, so refuse it.
  if (const TensorView* rf = source.FindTensor("rope_freqs.weight")) {
    if (rf->NumElements() != rot_dim / 2) {
      return InvalidArgument("tensor 'rope_freqs.weight' has shape " + rf->ShapeString() + "; expected [" +
                             std::to_string(rot_dim / 2) + "]");
    }
    SKIPKV_ASSIGN_OR_RETURN(std::vector<float> divisors, ReadF32Vector(*rf));
    kernels::RopeParams p = rope;
    if (p.llama3_factor == 0) {
      p.llama3_factor = 8.f;
      p.llama3_low_freq_factor = 1.f;
      p.llama3_high_freq_factor = 4.f;
      p.llama3_original_context = 8192;
    }
    for (int i = 0; i < rot_dim / 2; ++i) {
      const float want = Llama3Divisor(p, i, rot_dim);
      if (std::fabs(divisors[i] - want) > 1e-3f * want) {
        return Unsupported("tensor 'rope_freqs.weight'[" + std::to_string(i) + "] = " +
                           std::to_string(divisors[i]) + " does not match llama3 RoPE scaling (expected " +
                           std::to_string(want) + "); custom per-frequency RoPE factors are not supported");
      }
    }
    rope = p;
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ModelConfig> ModelConfigFromSource(const ModelSource& source) {
  const GgufMetadata& md = source.metadata;
  ModelConfig c;

  // ---- Architecture -------------------------------------------------------
  SKIPKV_ASSIGN_OR_RETURN(std::string a, md.GetString(kKeyArchitecture));
  if (a == "llama") {
    c.arch = Architecture::kLlama;
  } else if (a == "qwen2") {
    c.arch = Architecture::kQwen2;
  } else {
    return Unsupported("architecture '" + a + "' (metadata key '" + kKeyArchitecture +
                       "'); supported: llama, qwen2");
  }

  // ---- The key table ------------------------------------------------------
  using namespace model_limits;
  SKIPKV_ASSIGN_OR_RETURN(int64_t n_layers, IntInRange(md, a + ".block_count", 1, kMaxLayers));
  SKIPKV_ASSIGN_OR_RETURN(int64_t d_model, IntInRange(md, a + ".embedding_length", 1, kMaxDim));
  SKIPKV_ASSIGN_OR_RETURN(int64_t n_heads, IntInRange(md, a + ".attention.head_count", 1, kMaxHeads));
  SKIPKV_ASSIGN_OR_RETURN(int64_t n_kv_heads,
                          IntInRange(md, a + ".attention.head_count_kv", 1, kMaxHeads, &n_heads));
  const int64_t dflt_head_dim = d_model / n_heads;
  SKIPKV_ASSIGN_OR_RETURN(int64_t head_dim,
                          IntInRange(md, a + ".attention.key_length", 1, kMaxHeadDim, &dflt_head_dim));
  SKIPKV_ASSIGN_OR_RETURN(int64_t v_dim, IntInRange(md, a + ".attention.value_length", 1, kMaxHeadDim, &head_dim));
  SKIPKV_ASSIGN_OR_RETURN(int64_t ffn_dim, IntInRange(md, a + ".feed_forward_length", 1, kMaxDim));
  SKIPKV_ASSIGN_OR_RETURN(int64_t ctx, IntInRange(md, a + ".context_length", 1, kMaxContext));
  SKIPKV_ASSIGN_OR_RETURN(float eps, PositiveFloat(md, a + ".attention.layer_norm_rms_epsilon", 1e-5));
  SKIPKV_ASSIGN_OR_RETURN(float theta, PositiveFloat(md, a + ".rope.freq_base", 10000.0));
  SKIPKV_ASSIGN_OR_RETURN(int64_t rot_dim, IntInRange(md, a + ".rope.dimension_count", 2, kMaxHeadDim, &head_dim));

  if (n_heads % n_kv_heads != 0) {
    return InvalidArgument("'" + a + ".attention.head_count' (" + std::to_string(n_heads) +
                           ") is not a multiple of '" + a + ".attention.head_count_kv' (" +
                           std::to_string(n_kv_heads) + ")");
  }
  if (!md.Has(a + ".attention.key_length") && d_model % n_heads != 0) {
    return InvalidArgument("'" + a + ".embedding_length' (" + std::to_string(d_model) +
                           ") is not a multiple of the head count (" + std::to_string(n_heads) + ") and '" +
                           a + ".attention.key_length' is absent");
  }
  if (v_dim != head_dim) {
    return Unsupported("'" + a + ".attention.value_length' (" + std::to_string(v_dim) +
                       ") differs from key_length (" + std::to_string(head_dim) + ")");
  }
  if (rot_dim % 2 != 0 || rot_dim > head_dim) {
    return InvalidArgument("'" + a + ".rope.dimension_count' = " + std::to_string(rot_dim) +
                           " must be even and at most the head dimension " + std::to_string(head_dim));
  }
  c.n_layers = static_cast<int>(n_layers);
  c.d_model = static_cast<int>(d_model);
  c.n_heads = static_cast<int>(n_heads);
  c.n_kv_heads = static_cast<int>(n_kv_heads);
  c.head_dim = static_cast<int>(head_dim);
  c.ffn_dim = static_cast<int>(ffn_dim);
  c.context_length = ctx;
  c.rms_eps = eps;

  // ---- RoPE ----------------------------------------------------------------
  // Style: explicit key, else as llama.cpp: GGUF llama stores Q/K rows in
  // Meta's interleaved layout (adjacent pairs); qwen2 uses rotate-half (NEOX).
  c.rope.theta = theta;
  c.rope.rot_dim = static_cast<int>(rot_dim);
  const char* dflt_layout = c.arch == Architecture::kLlama ? "adjacent_pairs" : "rotate_half";
  SKIPKV_ASSIGN_OR_RETURN(std::string layout, md.GetStringOr(kKeyRopeLayout, dflt_layout));
  if (layout == "adjacent_pairs") {
    c.rope.style = kernels::RopeStyle::kAdjacentPairs;
  } else if (layout == "rotate_half") {
    c.rope.style = kernels::RopeStyle::kRotateHalf;
  } else {
    return InvalidArgument(std::string("metadata key '") + kKeyRopeLayout + "' = '" + layout +
                           "'; expected 'rotate_half' or 'adjacent_pairs'");
  }
  SKIPKV_RETURN_IF_ERROR(ReadRopeScaling(md, a, source, c));

  // ---- Facts carried by the tensors ---------------------------------------
  const TensorView* embd = source.FindTensor("token_embd.weight");
  if (embd == nullptr) return NotFound("tensor 'token_embd.weight' is missing");
  if (embd->ne[1] < 1 || embd->ne[1] > kMaxVocab) {
    return InvalidArgument("tensor 'token_embd.weight' has shape " + embd->ShapeString() +
                           "; bad vocabulary size");
  }
  c.vocab_size = static_cast<int>(embd->ne[1]);
  if (md.Has(a + ".vocab_size")) {
    SKIPKV_ASSIGN_OR_RETURN(int64_t vs, md.GetInt(a + ".vocab_size"));
    if (vs != c.vocab_size) {
      return InvalidArgument("metadata key '" + a + ".vocab_size' = " + std::to_string(vs) +
                             " but tensor 'token_embd.weight' has " + std::to_string(c.vocab_size) + " rows");
    }
  }
  // Tied LM head: no output.weight, or the HF importer's explicit flag.
  const bool has_output = source.FindTensor("output.weight") != nullptr;
  SKIPKV_ASSIGN_OR_RETURN(bool tie_flag, md.GetBoolOr(kKeyTieEmbeddings, !has_output));
  if (!tie_flag && !has_output) {
    return NotFound(std::string("tensor 'output.weight' is missing and '") + kKeyTieEmbeddings +
                    "' is false");
  }
  c.tied_embeddings = tie_flag || !has_output;
  c.qkv_bias = source.FindTensor("blk.0.attn_q.bias") != nullptr;
  return c;
}

}  // namespace skipkv
