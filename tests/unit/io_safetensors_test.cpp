// safetensors header validation and Hugging Face checkpoint directories
// (single file and sharded), written by the test into a temp directory.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/hf_checkpoint.h"
#include "io/model_source.h"
#include "io/safetensors.h"

namespace skipkv {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

struct StTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

std::vector<uint8_t> Serialize(const std::vector<StTensor>& ts, size_t pad_header_to = 8) {
  json h = json::object();
  uint64_t off = 0;
  for (const auto& t : ts) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  h["__metadata__"] = {{"format", "pt"}};
  std::string text = h.dump();
  while ((8 + text.size()) % pad_header_to != 0) text += ' ';
  std::vector<uint8_t> out(8);
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  out.insert(out.end(), text.begin(), text.end());
  for (const auto& t : ts) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

StTensor F32(const std::string& name, std::vector<int64_t> shape, float base) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  StTensor t{name, "F32", shape, std::vector<uint8_t>(4 * n)};
  for (int64_t i = 0; i < n; ++i) {
    const float v = base + static_cast<float>(i);
    std::memcpy(t.bytes.data() + 4 * i, &v, 4);
  }
  return t;
}

StTensor Half(const std::string& name, const std::string& dtype, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  StTensor t{name, dtype, shape, std::vector<uint8_t>(2 * n)};
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t v = dtype == "F16" ? F32ToF16(0.5f * i) : F32ToBF16(0.5f * i);
    std::memcpy(t.bytes.data() + 2 * i, &v, 2);
  }
  return t;
}

void WriteFile(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
}
void WriteFile(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

json QwenConfig() {
  return {{"architectures", {"Qwen2ForCausalLM"}}, {"hidden_size", 8}, {"intermediate_size", 16},
          {"num_hidden_layers", 1}, {"num_attention_heads", 2}, {"num_key_value_heads", 1},
          {"max_position_embeddings", 128}, {"vocab_size", 10}, {"rope_theta", 1000000.0},
          {"rms_norm_eps", 1e-6}, {"tie_word_embeddings", true}, {"bos_token_id", 151643},
          {"rope_scaling", nullptr}};
}

std::vector<StTensor> QwenTensors() {
  return {F32("model.embed_tokens.weight", {10, 8}, 0.0f),
          F32("model.layers.0.input_layernorm.weight", {8}, 1.0f),
          Half("model.layers.0.self_attn.q_proj.weight", "BF16", {8, 8}),
          F32("model.layers.0.self_attn.q_proj.bias", {8}, 2.0f),
          Half("model.layers.0.self_attn.k_proj.weight", "F16", {4, 8}),
          F32("model.layers.0.self_attn.k_proj.bias", {4}, 3.0f),
          F32("model.layers.0.self_attn.v_proj.weight", {4, 8}, 4.0f),
          F32("model.layers.0.self_attn.v_proj.bias", {4}, 5.0f),
          F32("model.layers.0.self_attn.o_proj.weight", {8, 8}, 6.0f),
          F32("model.layers.0.post_attention_layernorm.weight", {8}, 7.0f),
          F32("model.layers.0.mlp.gate_proj.weight", {16, 8}, 8.0f),
          F32("model.layers.0.mlp.up_proj.weight", {16, 8}, 9.0f),
          F32("model.layers.0.mlp.down_proj.weight", {8, 16}, 10.0f),
          F32("model.norm.weight", {8}, 11.0f)};
}

class HfDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("skipkv_io_hf_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

void CheckQwen(const ModelSource& m) {
  const GgufMetadata& md = m.metadata;
  EXPECT_EQ(*md.GetString("general.architecture"), "qwen2");
  EXPECT_EQ(*md.GetInt("qwen2.block_count"), 1);
  EXPECT_EQ(*md.GetInt("qwen2.embedding_length"), 8);
  EXPECT_EQ(*md.GetInt("qwen2.feed_forward_length"), 16);
  EXPECT_EQ(*md.GetInt("qwen2.attention.head_count"), 2);
  EXPECT_EQ(*md.GetInt("qwen2.attention.head_count_kv"), 1);
  EXPECT_EQ(*md.GetInt("qwen2.context_length"), 128);
  EXPECT_EQ(*md.GetInt("qwen2.vocab_size"), 10);
  EXPECT_FLOAT_EQ(*md.GetFloat("qwen2.rope.freq_base"), 1e6f);
  EXPECT_FLOAT_EQ(*md.GetFloat("qwen2.attention.layer_norm_rms_epsilon"), 1e-6f);
  EXPECT_EQ(*md.GetString("skipkv.rope_layout"), "rotate_half");
  EXPECT_TRUE(*md.GetBool("skipkv.tie_word_embeddings"));
  EXPECT_EQ(*md.GetInt("tokenizer.ggml.bos_token_id"), 151643);
  EXPECT_EQ(m.tensors.size(), 14u);
  EXPECT_EQ(m.FindTensor("output.weight"), nullptr);
  const TensorView* q = m.FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, DType::kBF16);
  EXPECT_EQ(BF16ToF32(reinterpret_cast<const uint16_t*>(q->data)[5]), 2.5f);
  const TensorView* k = m.FindTensor("blk.0.attn_k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->type, DType::kF16);
  EXPECT_EQ(k->ShapeString(), "[8, 4]");
  const TensorView* down = m.FindTensor("blk.0.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->ShapeString(), "[16, 8]");
  float x;
  std::memcpy(&x, down->data + 4 * 17, 4);
  EXPECT_EQ(x, 27.0f);
  for (const char* n : {"token_embd.weight", "blk.0.attn_norm.weight", "blk.0.attn_q.bias", "blk.0.attn_k.bias",
                        "blk.0.attn_v.weight", "blk.0.attn_v.bias", "blk.0.attn_output.weight",
                        "blk.0.ffn_norm.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight",
                        "output_norm.weight"}) {
    EXPECT_NE(m.FindTensor(n), nullptr) << n;
  }
}

TEST_F(HfDirTest, SingleFileCheckpointLoadsWithMappedNamesAndKeys) {
  WriteFile(dir_ / "config.json", QwenConfig().dump());
  WriteFile(dir_ / "model.safetensors", Serialize(QwenTensors(), 2));  // odd header: forces misaligned data
  WriteFile(dir_ / "tokenizer.json", std::string("{}"));
  auto m = OpenModel(dir_.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->format, ModelFormat::kHuggingFace);
  EXPECT_EQ((*m)->tokenizer_json_path, (dir_ / "tokenizer.json").string());
  EXPECT_EQ((*m)->tokenizer_config_path, "");
  CheckQwen(**m);
  for (const auto& t : (*m)->tensors) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % (t.type == DType::kF32 ? 4 : 2), 0u) << t.name;
  }
}

TEST_F(HfDirTest, ShardedCheckpointLoads) {
  WriteFile(dir_ / "config.json", QwenConfig().dump());
  auto ts = QwenTensors();
  std::vector<StTensor> a(ts.begin(), ts.begin() + 6), b(ts.begin() + 6, ts.end());
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  for (const auto& t : a) index["weight_map"][t.name] = "model-00001-of-00002.safetensors";
  for (const auto& t : b) index["weight_map"][t.name] = "model-00002-of-00002.safetensors";
  WriteFile(dir_ / "model-00001-of-00002.safetensors", Serialize(a));
  WriteFile(dir_ / "model-00002-of-00002.safetensors", Serialize(b));
  WriteFile(dir_ / "model.safetensors.index.json", index.dump());
  auto m = OpenModel(dir_.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  CheckQwen(**m);

  index["weight_map"]["model.layers.0.extra.weight"] = "model-00002-of-00002.safetensors";
  WriteFile(dir_ / "model.safetensors.index.json", index.dump());
  auto bad = OpenModel(dir_.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("model.layers.0.extra.weight"), std::string::npos);
}

TEST_F(HfDirTest, LlamaConfigWithLlama3RopeScaling) {
  json c = {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 8}, {"intermediate_size", 16},
            {"num_hidden_layers", 1}, {"num_attention_heads", 2}, {"head_dim", 4},
            {"max_position_embeddings", 131072}, {"vocab_size", 10}, {"rope_theta", 500000.0},
            {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                              {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}}}};
  GgufMetadata md;
  ASSERT_TRUE(HfConfigToMetadata(c, "config.json", &md).ok());
  EXPECT_EQ(*md.GetString("general.architecture"), "llama");
  EXPECT_EQ(*md.GetInt("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(*md.GetInt("llama.attention.key_length"), 4);
  EXPECT_EQ(*md.GetString("llama.rope.scaling.type"), "llama3");
  EXPECT_FLOAT_EQ(*md.GetFloat("llama.rope.scaling.factor"), 8.0f);
  EXPECT_FLOAT_EQ(*md.GetFloat("llama.rope.scaling.high_freq_factor"), 4.0f);
  EXPECT_EQ(*md.GetInt("llama.rope.scaling.original_context_length"), 8192);
  EXPECT_FALSE(*md.GetBool("skipkv.tie_word_embeddings"));

  c["architectures"] = {"MistralForCausalLM"};
  Status st = HfConfigToMetadata(c, "config.json", &md);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("MistralForCausalLM"), std::string::npos);
  c = QwenConfig();
  c["hidden_size"] = -3;
  st = HfConfigToMetadata(c, "config.json", &md);
  EXPECT_NE(st.message().find("hidden_size"), std::string::npos) << st.message();
}

TEST_F(HfDirTest, UnsupportedDtypeNamesTensorAndDtype) {
  WriteFile(dir_ / "config.json", QwenConfig().dump());
  auto ts = QwenTensors();
  ts.push_back({"model.layers.0.foo", "I64", {2}, std::vector<uint8_t>(16)});
  WriteFile(dir_ / "model.safetensors", Serialize(ts));
  auto m = OpenModel(dir_.string());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(m.status().message().find("model.layers.0.foo"), std::string::npos);
  EXPECT_NE(m.status().message().find("I64"), std::string::npos);
}

TEST(HfNameTest, MapsEveryKnownName) {
  EXPECT_EQ(HfTensorNameToGguf("model.embed_tokens.weight"), "token_embd.weight");
  EXPECT_EQ(HfTensorNameToGguf("lm_head.weight"), "output.weight");
  EXPECT_EQ(HfTensorNameToGguf("model.layers.27.self_attn.o_proj.weight"), "blk.27.attn_output.weight");
  EXPECT_EQ(HfTensorNameToGguf("model.layers.3.self_attn.v_proj.bias"), "blk.3.attn_v.bias");
  EXPECT_EQ(HfTensorNameToGguf("model.layers.3.mlp.down_proj.weight"), "blk.3.ffn_down.weight");
  EXPECT_EQ(HfTensorNameToGguf("model.layers.x.mlp.down_proj.weight"), "");
}

// ---- header parser on crafted input ----------------------------------------

std::vector<uint8_t> WithHeader(const std::string& text, size_t data_bytes) {
  std::vector<uint8_t> out(8);
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  out.insert(out.end(), text.begin(), text.end());
  out.resize(out.size() + data_bytes);
  return out;
}

void ExpectHeaderError(const std::vector<uint8_t>& b, const std::string& needle) {
  auto h = ParseSafetensorsHeader(b.data(), b.size(), "x.safetensors");
  ASSERT_FALSE(h.ok()) << needle;
  EXPECT_NE(h.status().message().find(needle), std::string::npos) << h.status().message();
  EXPECT_NE(h.status().message().find("x.safetensors"), std::string::npos);
}

TEST(SafetensorsHeaderTest, RejectsCorruptHeaders) {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  EXPECT_TRUE(ParseSafetensorsHeader(WithHeader(ok, 16).data(), 8 + ok.size() + 16, "x").ok());
  ExpectHeaderError(std::vector<uint8_t>(5), "too short");
  {
    auto b = WithHeader(ok, 16);
    const uint64_t huge = 1ull << 50;
    std::memcpy(b.data(), &huge, 8);
    ExpectHeaderError(b, "header length");
  }
  ExpectHeaderError(WithHeader("{\"a\": [", 0), "not valid JSON");
  ExpectHeaderError(WithHeader("[1,2]", 0), "not an object");
  ExpectHeaderError(WithHeader(ok, 8), "outside");
  ExpectHeaderError(WithHeader(R"({"a":{"dtype":"F32","shape":[3,2],"data_offsets":[0,16]}})", 16), "needs 24 bytes");
  ExpectHeaderError(WithHeader(R"({"a":{"dtype":"Q9","shape":[2],"data_offsets":[0,2]}})", 16), "unknown dtype 'Q9'");
  ExpectHeaderError(WithHeader(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 16), "shape entry");
  ExpectHeaderError(WithHeader(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 16), "outside");
  ExpectHeaderError(WithHeader(R"({"a":{"dtype":"F32","shape":[2]}})", 16), "data_offsets");
  ExpectHeaderError(WithHeader(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 16),
                    "overlapping");
  ExpectHeaderError(WithHeader(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,16]}})", 16),
                    "overflow");
  // Every truncation of a valid file is rejected or parses consistently; never crashes.
  const auto full = Serialize(QwenTensors());
  for (size_t n = 0; n < full.size(); n += 3) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + n);
    auto h = ParseSafetensorsHeader(cut.data(), cut.size(), "cut");
    if (h.ok()) {
      for (const auto& e : h->tensors) EXPECT_LE(h->data_start + e.end, cut.size());
    }
  }
}

}  // namespace
}  // namespace skipkv
