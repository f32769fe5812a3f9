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

Status WriteModelAsGguf(const ModelSource& src, const std::string& out_path, const GgufExportOptions& opts) {
  GgufMetadata md = src.metadata;
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

  ThreadPool pool(opts.threads);
  constexpr int64_t kRowsPerChunk = 256;
  std::vector<uint8_t> chunk;
  for (size_t i = 0; i < src.tensors.size(); ++i) {
    const TensorView& t = src.tensors[i];
    const DType dst = decls[i].type;
    if (dst == t.type) {
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
            DequantizeRow(t.type, t.data + (r0 + r) * in_row, row.data(), n);
            QuantizeRow(dst, row.data(), chunk.data() + r * out_row, n);
          }
        });
        SKIPKV_RETURN_IF_ERROR(writer->Append(chunk.data(), chunk.size()));
      }
    }
    if (opts.progress) opts.progress(i, src.tensors.size(), t.name);
  }
  return writer->Finish();
}

}  // namespace skipkv
