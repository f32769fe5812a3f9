// Storage-type rule and streaming GGUF export; see model_writer.h.
#include "io/model_writer.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <regex>

#include "io/gguf_stream_writer.h"
#include "tensor/quant.h"
#include "util/thread_pool.h"

namespace skipkv {

StatusOr<WeightTypeSpec> ParseWeightType(const std::string& s) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  WeightTypeSpec spec;
  spec.name = l;
  if (l == "q4_k_m") {
    spec.base = DType::kQ4_K;
    spec.q4_k_m = true;
    return spec;
  }
  static const std::pair<const char*, DType> kTypes[] = {
      {"f32", DType::kF32},   {"f16", DType::kF16},   {"bf16", DType::kBF16}, {"q8_0", DType::kQ8_0},
      {"q4_0", DType::kQ4_0}, {"q4_k", DType::kQ4_K}, {"q6_k", DType::kQ6_K}};
  for (const auto& [n, t] : kTypes) {
    if (l == n) {
      spec.base = t;
      return spec;
    }
  }
  return InvalidArgument("unknown weight type '" + s + "' (expected f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, q4_k_m)");
}

uint32_t LlamaFileType(const WeightTypeSpec& spec) {
  if (spec.q4_k_m) return 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  switch (spec.base) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kQ4_0: return 2;
    case DType::kQ8_0: return 7;
    case DType::kQ4_K: return 14;  // MOSTLY_Q4_K_S: every tensor Q4_K
    case DType::kQ6_K: return 18;
    case DType::kBF16: return 32;
    default: return 1;
  }
}

bool UseMoreBits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

namespace {
int LayerOf(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::atoi(name.c_str() + 4);
}
bool IsQuantised(DType t) { return BlockSize(t) > 1; }
}  // namespace

DType ChooseTensorType(const WeightTypeSpec& spec, const std::string& name, int n_dims, int64_t ne0, int n_layers,
                       bool has_output) {
  if (n_dims <= 1) return DType::kF32;
  DType t = spec.base;
  if (spec.q4_k_m) {
    const int layer = LayerOf(name);
    const bool more = layer >= 0 && UseMoreBits(layer, n_layers);
    if (name == "output.weight" || (name == "token_embd.weight" && !has_output)) t = DType::kQ6_K;
    else if (more && (name.find(".attn_v.weight") != std::string::npos ||
                      name.find(".ffn_down.weight") != std::string::npos)) t = DType::kQ6_K;
  }
  if (ne0 % BlockSize(t) == 0) return t;
  if (IsQuantised(t) && ne0 % 32 == 0) return DType::kQ8_0;
  if (t != DType::kF32) return DType::kF16;
  return DType::kF32;
}

namespace {

// Maps a row (or element) index of the adjacent-pair layout to its index in
// the rotate-half layout: within each head of size hd, output 2i <- input i
// and output 2i+1 <- input hd/2 + i.
int64_t RotateHalfSourceIndex(int64_t o, int64_t hd) {
  const int64_t h = o / hd, j = o % hd;
  return h * hd + (j % 2 == 0 ? j / 2 : hd / 2 + j / 2);
}

}  // namespace

Status WriteModelAsGguf(const ModelSource& src, const std::string& out_path, const GgufExportOptions& opts) {
  SKIPKV_ASSIGN_OR_RETURN(const int threads, ResolveThreadCount(opts.threads, "threads"));
  GgufMetadata md = src.metadata;
  // Heads of the q/k tensors to permute (0: no permutation).
  int64_t q_heads = 0, k_heads = 0;
  if (*md.GetStringOr("general.architecture", "") == "llama" &&
      *md.GetStringOr("skipkv.rope_layout", "") == "rotate_half") {
    SKIPKV_ASSIGN_OR_RETURN(q_heads, md.GetInt("llama.attention.head_count"));
    SKIPKV_ASSIGN_OR_RETURN(k_heads, md.GetIntOr("llama.attention.head_count_kv", q_heads));
    md.Set("skipkv.rope_layout", GgufValue::Str("adjacent_pairs"));
  }
  auto heads_to_permute = [&](const std::string& name) -> int64_t {
    if (q_heads == 0) return 0;
    if (name.find(".attn_q.") != std::string::npos) return q_heads;
    if (name.find(".attn_k.") != std::string::npos) return k_heads;
    return 0;
  };
  std::vector<GgufTensorDecl> decls;
  int n_layers = 0;
  for (const TensorView& t : src.tensors) n_layers = std::max(n_layers, LayerOf(t.name) + 1);
  const bool has_output = src.FindTensor("output.weight") != nullptr;
  for (const TensorView& t : src.tensors) {
    DType type = t.type;
    if (opts.type) type = ChooseTensorType(*opts.type, t.name, t.n_dims, t.ne[0], n_layers, has_output);
    if (type != t.type && (!IsQuantizable(t.type) || !IsQuantizable(type))) {
      return Unsupported("tensor '" + t.name + "': cannot convert " + DTypeName(t.type) + " to " + DTypeName(type));
    }
    decls.push_back({t.name, type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)});
  }
  if (opts.type) md.Set("general.file_type", GgufValue::U32(LlamaFileType(*opts.type)));
  md.Set("general.quantization_version", GgufValue::U32(2));
  SKIPKV_ASSIGN_OR_RETURN(auto writer, GgufStreamWriter::Create(out_path, md, decls));

  ThreadPool pool(threads);
  constexpr int64_t kRowsPerChunk = 256;
  std::vector<uint8_t> chunk;
  size_t total_elems = 0, done_elems = 0;
  for (const TensorView& t : src.tensors) total_elems += static_cast<size_t>(t.NumElements());
  for (size_t i = 0; i < src.tensors.size(); ++i) {
    const TensorView& t = src.tensors[i];
    const DType dst = decls[i].type;
    const int64_t perm_heads = heads_to_permute(t.name);
    // Permuted dimension: rows of a weight, elements of a 1-D bias.
    const int64_t perm_len = t.n_dims == 1 ? t.ne[0] : t.NumRows();
    if (perm_heads > 0 && (perm_len % perm_heads != 0 || (perm_len / perm_heads) % 2 != 0 || t.n_dims > 2)) {
      return CorruptData("tensor '" + t.name + "' " + t.ShapeString() + " cannot be split into " +
                         std::to_string(perm_heads) + " heads of even size");
    }
    const int64_t hd = perm_heads > 0 ? perm_len / perm_heads : 0;
    if (perm_heads > 0 && t.n_dims == 1) {
      std::vector<float> in(t.ne[0]), out(t.ne[0]);
      DequantizeRow(t.type, t.data, in.data(), t.ne[0]);
      for (int64_t o = 0; o < t.ne[0]; ++o) out[o] = in[RotateHalfSourceIndex(o, hd)];
      chunk.resize(RowBytes(dst, t.ne[0]));
      QuantizeRow(dst, out.data(), chunk.data(), t.ne[0]);
      SKIPKV_RETURN_IF_ERROR(writer->Append(chunk.data(), chunk.size()));
    } else if (dst == t.type && perm_heads == 0) {
      SKIPKV_RETURN_IF_ERROR(writer->Append(t.data, t.NumBytes()));
    } else {
      const int64_t n = t.ne[0], rows = t.NumRows();
      const size_t in_row = t.RowBytesCount(), out_row = RowBytes(dst, n);
      for (int64_t r0 = 0; r0 < rows; r0 += kRowsPerChunk) {
        const int64_t nr = std::min(kRowsPerChunk, rows - r0);
        chunk.resize(out_row * nr);
        pool.ParallelFor(nr, 8, [&](int64_t b, int64_t e, int) {
          std::vector<float> row(n);
          for (int64_t r = b; r < e; ++r) {
            const int64_t src_row = hd > 0 ? RotateHalfSourceIndex(r0 + r, hd) : r0 + r;
            if (dst == t.type) {
              std::memcpy(chunk.data() + r * out_row, t.data + src_row * in_row, out_row);
              continue;
            }
            DequantizeRow(t.type, t.data + src_row * in_row, row.data(), n);
            QuantizeRow(dst, row.data(), chunk.data() + r * out_row, n);
          }
        });
        SKIPKV_RETURN_IF_ERROR(writer->Append(chunk.data(), chunk.size()));
        if (opts.progress) opts.progress(done_elems + static_cast<size_t>((r0 + nr) * n), total_elems, t.name);
      }
    }
    done_elems += static_cast<size_t>(t.NumElements());
    if (opts.progress) opts.progress(done_elems, total_elems, t.name);
  }
  return writer->Finish();
}

}  // namespace skipkv
