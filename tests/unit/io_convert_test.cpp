// GGUF export: llama2.c -> GGUF -> reload is exact; type conversion follows
// the documented rule; random models are deterministic and carry complete
// tokenizer metadata.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "prereq.h"
#include "io/embedded/embedded_model.h"
#include "io/make_model.h"
#include "io/model_source.h"
#include "io/model_writer.h"
#include "tensor/quant.h"

namespace skipkv {
namespace {
namespace fs = std::filesystem;

std::string TempPath(const std::string& name) {
  return (fs::temp_directory_path() / ("skipkv_io_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), {});
}

TEST(ConvertTest, Llama2cToGgufRoundTripIsExact) {
  auto src = OpenModel(std::string(SKIPKV_DATA_DIR) + "/models/stories260K/stories260K.bin");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  const std::string out = TempPath("stories.gguf");
  ASSERT_TRUE(WriteModelAsGguf(**src, out, {}).ok());
  auto back = OpenModel(out);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ((*back)->format, ModelFormat::kGguf);
  for (const auto& [k, v] : (*src)->metadata.entries()) {
    const GgufValue* got = (*back)->metadata.Find(k);
    ASSERT_NE(got, nullptr) << k;
    EXPECT_TRUE(*got == v) << k;
  }
  ASSERT_EQ((*back)->tensors.size(), (*src)->tensors.size());
  for (size_t i = 0; i < (*src)->tensors.size(); ++i) {
    const TensorView& a = (*src)->tensors[i];
    const TensorView& b = (*back)->tensors[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.type, b.type);
    EXPECT_EQ(a.ShapeString(), b.ShapeString());
    ASSERT_EQ(a.NumBytes(), b.NumBytes());
    EXPECT_EQ(std::memcmp(a.data, b.data, a.NumBytes()), 0) << a.name;
  }
  fs::remove(out);
}

TEST(ConvertTest, TypedConversionFollowsTheRule) {
  auto src = OpenEmbeddedDefaultModel();
  ASSERT_TRUE(src.ok());
  const std::string out = TempPath("stories_q8.gguf");
  GgufExportOptions opts;
  opts.type = *ParseWeightType("q8_0");
  opts.threads = 2;
  ASSERT_TRUE(WriteModelAsGguf(**src, out, opts).ok());
  auto back = OpenModel(out);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*(*back)->metadata.GetInt("general.file_type"), 7);
  EXPECT_EQ((*back)->FindTensor("blk.0.attn_norm.weight")->type, DType::kF32);  // 1-D stays F32
  EXPECT_EQ((*back)->FindTensor("blk.0.attn_q.weight")->type, DType::kQ8_0);
  EXPECT_EQ((*back)->FindTensor("blk.0.ffn_down.weight")->type, DType::kF16);   // 172 % 32 != 0
  // Dequantised values stay close to the originals.
  for (const char* name : {"blk.1.attn_q.weight", "blk.1.ffn_down.weight", "token_embd.weight"}) {
    const TensorView* a = (*src)->FindTensor(name);
    const TensorView* b = (*back)->FindTensor(name);
    std::vector<float> x(a->ne[0]), y(a->ne[0]);
    double err = 0, norm = 0;
    for (int64_t r = 0; r < a->NumRows(); ++r) {
      DequantizeRow(a->type, a->Row(r), x.data(), a->ne[0]);
      DequantizeRow(b->type, b->Row(r), y.data(), b->ne[0]);
      for (int64_t i = 0; i < a->ne[0]; ++i) {
        err += (x[i] - y[i]) * (x[i] - y[i]);
        norm += x[i] * x[i];
      }
    }
    EXPECT_LT(std::sqrt(err / norm), 0.01) << name;
  }
  fs::remove(out);
}

TEST(ConvertTest, TypeRuleMatchesLlamaCppQ4KM) {
  const WeightTypeSpec m = *ParseWeightType("Q4_K_M");
  EXPECT_TRUE(m.q4_k_m);
  EXPECT_EQ(ChooseTensorType(m, "output.weight", 2, 1536, 28, true), DType::kQ6_K);
  EXPECT_EQ(ChooseTensorType(m, "token_embd.weight", 2, 1536, 28, true), DType::kQ4_K);
  EXPECT_EQ(ChooseTensorType(m, "token_embd.weight", 2, 1536, 28, false), DType::kQ6_K);
  EXPECT_EQ(ChooseTensorType(m, "blk.0.attn_v.weight", 2, 1536, 28, true), DType::kQ6_K);   // first 1/8
  EXPECT_EQ(ChooseTensorType(m, "blk.4.attn_v.weight", 2, 1536, 28, true), DType::kQ4_K);   // (4-3)%3 != 2
  EXPECT_EQ(ChooseTensorType(m, "blk.5.ffn_down.weight", 2, 8960, 28, true), DType::kQ6_K);
  EXPECT_EQ(ChooseTensorType(m, "blk.4.ffn_down.weight", 2, 8960, 28, true), DType::kQ4_K);
  EXPECT_EQ(ChooseTensorType(m, "blk.4.ffn_up.weight", 2, 96, 28, true), DType::kQ8_0);  // 96 % 256 != 0
  EXPECT_EQ(ChooseTensorType(m, "blk.5.attn_v.weight", 2, 1536, 28, true), DType::kQ6_K);   // (5-3)%3 == 2
  EXPECT_EQ(ChooseTensorType(m, "blk.27.attn_q.weight", 2, 1536, 28, true), DType::kQ4_K);
  EXPECT_EQ(ChooseTensorType(m, "blk.27.attn_q.bias", 1, 1536, 28, true), DType::kF32);
  EXPECT_EQ(ChooseTensorType(*ParseWeightType("q4_0"), "x", 2, 100, 1, true), DType::kF16);
  EXPECT_EQ(ChooseTensorType(*ParseWeightType("f32"), "x", 2, 100, 1, true), DType::kF32);
  EXPECT_FALSE(ParseWeightType("q3_k").ok());
  int more = 0;
  for (int i = 0; i < 28; ++i) more += UseMoreBits(i, 28);
  EXPECT_EQ(more, 3 + 4 + 7);  // i<3, i>=24, and every third layer in between
}

TEST(ConvertTest, RotateHalfLlamaIsPermutedToAdjacentPairs) {
  // A hand-built "HF llama" source: 2 query heads and 1 KV head of size 4, hidden 8.
  ModelSource src;
  src.format = ModelFormat::kHuggingFace;
  src.metadata.Set("general.architecture", GgufValue::Str("llama"));
  src.metadata.Set("llama.attention.head_count", GgufValue::U32(2));
  src.metadata.Set("llama.attention.head_count_kv", GgufValue::U32(1));
  src.metadata.Set("skipkv.rope_layout", GgufValue::Str("rotate_half"));
  std::vector<float> q(8 * 8), k(4 * 8), v(4 * 8), kb(4);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i / 8);  // row index in every column
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>(100 + i / 8);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(200 + i / 8);
  for (size_t i = 0; i < kb.size(); ++i) kb[i] = static_cast<float>(300 + i);
  auto view = [](const char* name, const std::vector<float>& d, int64_t ne0, int64_t ne1, int n_dims) {
    TensorView t;
    t.name = name;
    t.n_dims = n_dims;
    t.ne = {ne0, ne1, 1, 1};
    t.data = reinterpret_cast<const uint8_t*>(d.data());
    return t;
  };
  src.tensors = {view("blk.0.attn_q.weight", q, 8, 8, 2), view("blk.0.attn_k.weight", k, 8, 4, 2),
                 view("blk.0.attn_v.weight", v, 8, 4, 2), view("blk.0.attn_k.bias", kb, 4, 1, 1)};
  const std::string out = TempPath("permuted.gguf");
  ASSERT_TRUE(WriteModelAsGguf(src, out, {}).ok());
  auto back = OpenModel(out);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*(*back)->metadata.GetString("skipkv.rope_layout"), "adjacent_pairs");
  auto row0 = [&](const char* name, int64_t r) {
    const TensorView* t = (*back)->FindTensor(name);
    return reinterpret_cast<const float*>(t->Row(r))[0];
  };
  // Head of 4 rows [a0 a1 b0 b1] (rotate-half pairs (a0,b0), (a1,b1)) -> [a0 b0 a1 b1].
  const float q_expected[8] = {0, 2, 1, 3, 4, 6, 5, 7};
  for (int r = 0; r < 8; ++r) EXPECT_EQ(row0("blk.0.attn_q.weight", r), q_expected[r]) << r;
  const float k_expected[4] = {100, 102, 101, 103};
  for (int r = 0; r < 4; ++r) EXPECT_EQ(row0("blk.0.attn_k.weight", r), k_expected[r]) << r;
  for (int r = 0; r < 4; ++r) EXPECT_EQ(row0("blk.0.attn_v.weight", r), 200 + r) << r;  // v untouched
  const float* bias = reinterpret_cast<const float*>((*back)->FindTensor("blk.0.attn_k.bias")->data);
  EXPECT_EQ(bias[1], 302);
  EXPECT_EQ(bias[2], 301);
  fs::remove(out);
}

TEST(MakeModelTest, TinyLlamaIsDeterministicAndComplete) {
  MakeModelOptions o;
  o.preset = "tiny-llama";
  o.shape = *LookupModelPreset("tiny-llama");
  o.shape.hidden = 64;
  o.shape.ffn = 96;
  o.type = *ParseWeightType("q8_0");
  o.seed = 42;
  o.output_path = TempPath("tiny_llama_a.gguf");
  o.threads = 1;
  ASSERT_TRUE(MakeRandomModel(o).ok());
  MakeModelOptions o2 = o;
  o2.output_path = TempPath("tiny_llama_b.gguf");
  o2.threads = 3;
  ASSERT_TRUE(MakeRandomModel(o2).ok());
  EXPECT_EQ(ReadAll(o.output_path), ReadAll(o2.output_path));  // independent of threads

  auto m = OpenModel(o.output_path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelSource& src = **m;
  EXPECT_EQ(*src.metadata.GetString("general.architecture"), "llama");
  EXPECT_EQ(*src.metadata.GetInt("llama.embedding_length"), 64);
  EXPECT_EQ(src.metadata.GetStringArray("tokenizer.ggml.tokens")->size(), 512u);
  EXPECT_EQ(src.tensors.size(), 1u + 2 * 9 + 2);
  EXPECT_EQ(src.FindTensor("blk.1.attn_k.weight")->ShapeString(), "[64, 32]");
  EXPECT_EQ(src.FindTensor("blk.1.attn_k.weight")->type, DType::kQ8_0);
  const TensorView* norm = src.FindTensor("blk.0.ffn_norm.weight");
  EXPECT_EQ(norm->type, DType::kF32);
  EXPECT_EQ(reinterpret_cast<const float*>(norm->data)[17], 1.0f);
  const TensorView* emb = src.FindTensor("token_embd.weight");
  std::vector<float> row(64);
  double sum2 = 0;
  for (int64_t r = 0; r < emb->NumRows(); ++r) {
    DequantizeRow(emb->type, emb->Row(r), row.data(), 64);
    for (float x : row) sum2 += x * x;
  }
  EXPECT_NEAR(std::sqrt(sum2 / emb->NumElements()), 0.02, 0.002);

  o2.seed = 43;
  ASSERT_TRUE(MakeRandomModel(o2).ok());
  EXPECT_NE(ReadAll(o.output_path), ReadAll(o2.output_path));
  fs::remove(o.output_path);
  fs::remove(o2.output_path);

  o.shape.kv_heads = 3;
  EXPECT_EQ(MakeRandomModel(o).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(LookupModelPreset("gpt-5").ok());
}

TEST(MakeModelTest, TinyQwen2CarriesTheR1Vocabulary) {
  const std::string tok = std::string(SKIPKV_DEPS_DIR) + "/npm/tokenizer-qwen3/models/tokenizer.json";
  if (!fs::exists(tok)) SKIPKV_MISSING_PREREQ(tok);
  MakeModelOptions o;
  o.preset = "tiny-qwen2";
  o.shape = *LookupModelPreset("tiny-qwen2");
  o.shape.hidden = 32;
  o.shape.heads = 2;
  o.shape.kv_heads = 1;
  o.shape.ffn = 32;
  o.shape.layers = 1;
  o.type = *ParseWeightType("f16");
  o.tokenizer_path = tok;
  o.output_path = TempPath("tiny_qwen2.gguf");
  const Status st = MakeRandomModel(o);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto m = OpenModel(o.output_path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const GgufMetadata& md = (*m)->metadata;
  auto tokens = md.GetStringArray("tokenizer.ggml.tokens");
  auto types = md.GetIntArray("tokenizer.ggml.token_type");
  ASSERT_TRUE(tokens.ok() && types.ok());
  ASSERT_EQ(tokens->size(), 151936u);
  EXPECT_EQ((*tokens)[151646], "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>");
  EXPECT_EQ((*tokens)[151648], "<think>");
  EXPECT_EQ((*types)[151646], 3);  // control
  EXPECT_EQ((*types)[151648], 4);  // user-defined
  EXPECT_EQ((*types)[151650], 3);  // <|quad_start|>
  EXPECT_EQ((*tokens)[151665], "[PAD151665]");
  EXPECT_EQ((*types)[151935], 5);
  EXPECT_EQ((*tokens)[0], "!");
  EXPECT_EQ((*types)[100], 1);
  EXPECT_EQ(*md.GetString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*md.GetString("tokenizer.ggml.pre"), "qwen2");
  EXPECT_EQ(*md.GetInt("tokenizer.ggml.bos_token_id"), 151646);
  EXPECT_EQ(*md.GetInt("tokenizer.ggml.eos_token_id"), 151643);
  EXPECT_GT(md.GetStringArray("tokenizer.ggml.merges")->size(), 150000u);
  EXPECT_NE((*m)->FindTensor("blk.0.attn_q.bias"), nullptr);
  EXPECT_EQ((*m)->FindTensor("output.weight"), nullptr);  // tied
  fs::remove(o.output_path);

  o.tokenizer_path = "/nonexistent/tokenizer.json";
  const Status missing = MakeRandomModel(o);
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("/nonexistent/tokenizer.json"), std::string::npos);
}

}  // namespace
}  // namespace skipkv
