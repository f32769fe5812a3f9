// llama2.c import of the real stories260K checkpoint (file and embedded
// copy), its tokenizer as SentencePiece metadata, and corrupt-input errors.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "io/embedded/embedded_model.h"
#include "io/llama2c.h"
#include "io/model_source.h"

namespace skipkv {
namespace {

const std::string kDir = std::string(SKIPKV_DATA_DIR) + "/models/stories260K";

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), {});
}

float RawFloat(const std::vector<uint8_t>& raw, size_t float_index) {
  float f;
  std::memcpy(&f, raw.data() + 28 + 4 * float_index, 4);
  return f;
}

void CheckStories(const ModelSource& m) {
  const GgufMetadata& md = m.metadata;
  EXPECT_EQ(*md.GetString("general.architecture"), "llama");
  EXPECT_EQ(*md.GetInt("llama.embedding_length"), 64);
  EXPECT_EQ(*md.GetInt("llama.feed_forward_length"), 172);
  EXPECT_EQ(*md.GetInt("llama.block_count"), 5);
  EXPECT_EQ(*md.GetInt("llama.attention.head_count"), 8);
  EXPECT_EQ(*md.GetInt("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(*md.GetInt("llama.vocab_size"), 512);
  EXPECT_EQ(*md.GetInt("llama.context_length"), 512);
  EXPECT_EQ(*md.GetString("skipkv.rope_layout"), "adjacent_pairs");
  EXPECT_FLOAT_EQ(*md.GetFloat("llama.attention.layer_norm_rms_epsilon"), 1e-5f);

  // 1 embedding + 5 x 9 per layer + final norm; classifier shared -> no output.weight.
  EXPECT_EQ(m.tensors.size(), 1u + 5 * 9 + 1);
  EXPECT_EQ(m.FindTensor("output.weight"), nullptr);
  const TensorView* emb = m.FindTensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->ShapeString(), "[64, 512]");
  EXPECT_EQ(m.FindTensor("blk.0.attn_k.weight")->ShapeString(), "[64, 32]");
  EXPECT_EQ(m.FindTensor("blk.4.ffn_gate.weight")->ShapeString(), "[64, 172]");
  EXPECT_EQ(m.FindTensor("blk.4.ffn_down.weight")->ShapeString(), "[172, 64]");
  EXPECT_EQ(m.FindTensor("blk.2.ffn_norm.weight")->ShapeString(), "[64]");
  for (const TensorView& t : m.tensors) EXPECT_EQ(t.type, DType::kF32) << t.name;

  // Values against the raw bytes at the offsets the format defines.
  const std::vector<uint8_t> raw = ReadAll(kDir + "/stories260K.bin");
  const size_t V = 512, D = 64, L = 5, KV = 32, H = 172;
  auto f = [](const TensorView* t, size_t i) {
    float x;
    std::memcpy(&x, t->data + 4 * i, 4);
    return x;
  };
  EXPECT_EQ(f(emb, 0), RawFloat(raw, 0));
  EXPECT_EQ(f(emb, 403 * D + 7), RawFloat(raw, 403 * D + 7));
  const size_t attn_norm = V * D, wq = attn_norm + L * D, wk = wq + L * D * D, wv = wk + L * KV * D;
  const size_t wo = wv + L * KV * D, ffn_norm = wo + L * D * D, w1 = ffn_norm + L * D, w2 = w1 + L * H * D;
  const size_t w3 = w2 + L * H * D, final_norm = w3 + L * H * D;
  EXPECT_EQ(f(m.FindTensor("blk.1.attn_norm.weight"), 3), RawFloat(raw, attn_norm + D + 3));
  EXPECT_EQ(f(m.FindTensor("blk.3.attn_q.weight"), 100), RawFloat(raw, wq + 3 * D * D + 100));
  EXPECT_EQ(f(m.FindTensor("blk.2.attn_v.weight"), 5), RawFloat(raw, wv + 2 * KV * D + 5));
  EXPECT_EQ(f(m.FindTensor("blk.4.ffn_up.weight"), 9), RawFloat(raw, w3 + 4 * H * D + 9));
  EXPECT_EQ(f(m.FindTensor("blk.0.ffn_down.weight"), 171), RawFloat(raw, w2 + 171));
  EXPECT_EQ(f(m.FindTensor("output_norm.weight"), 63), RawFloat(raw, final_norm + 63));
  EXPECT_NE(RawFloat(raw, final_norm + 63), 0.0f);

  // Tokenizer metadata.
  auto tokens = md.GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[403], "\xE2\x96\x81Once");  // " Once" with SentencePiece's U+2581
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[3], "<0x00>");
  EXPECT_EQ((*tokens)[258], "<0xFF>");
  auto types = md.GetIntArray("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.ok());
  EXPECT_EQ((*types)[0], 2);
  EXPECT_EQ((*types)[1], 3);
  EXPECT_EQ((*types)[2], 3);
  EXPECT_EQ((*types)[3], 6);
  EXPECT_EQ((*types)[258], 6);
  EXPECT_EQ((*types)[403], 1);
  auto scores = md.GetFloatArray("tokenizer.ggml.scores");
  ASSERT_TRUE(scores.ok());
  EXPECT_EQ((*scores)[403], -144.0f);
  EXPECT_EQ(*md.GetString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(*md.GetInt("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(*md.GetInt("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(*md.GetInt("tokenizer.ggml.unknown_token_id"), 0);
  EXPECT_TRUE(*md.GetBool("tokenizer.ggml.add_bos_token"));
  EXPECT_TRUE(*md.GetBool("tokenizer.ggml.add_space_prefix"));
}

TEST(Llama2cTest, LoadsStories260KFromFileWithTokenizerBeside) {
  auto m = OpenModel(kDir + "/stories260K.bin");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->format, ModelFormat::kLlama2c);
  CheckStories(**m);
}

TEST(Llama2cTest, EmbeddedDefaultModelIsTheSameModel) {
  const EmbeddedBlob blob = EmbeddedDefaultModelBytes();
  const std::vector<uint8_t> raw = ReadAll(kDir + "/stories260K.bin");
  ASSERT_EQ(blob.size, raw.size());
  EXPECT_EQ(std::memcmp(blob.data, raw.data(), raw.size()), 0);
  EXPECT_EQ(EmbeddedDefaultTokenizerBytes().size, ReadAll(kDir + "/tok512.bin").size());
  auto m = OpenModel(std::string(kEmbeddedModelPath));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*(*m)->metadata.GetString("general.name"), "stories260K");
  CheckStories(**m);
  EXPECT_EQ(OpenModel("").status().code(), StatusCode::kInvalidArgument);
}

TEST(Llama2cTest, CorruptHeadersAndSizesGiveNamedErrors) {
  std::vector<uint8_t> raw = ReadAll(kDir + "/stories260K.bin");
  auto parse = [](const std::vector<uint8_t>& b) { return ParseLlama2cHeader(b.data(), b.size(), "x.bin").status(); };
  EXPECT_TRUE(parse(raw).ok());
  auto set_field = [&](int i, int32_t v) {
    std::vector<uint8_t> b = raw;
    std::memcpy(b.data() + 4 * i, &v, 4);
    return b;
  };
  Status st = parse(set_field(2, 0));
  EXPECT_NE(st.message().find("n_layers = 0"), std::string::npos) << st.message();
  st = parse(set_field(0, 1 << 30));
  EXPECT_NE(st.message().find("dim"), std::string::npos) << st.message();
  st = parse(set_field(4, 3));  // 8 heads not a multiple of 3 kv heads
  EXPECT_NE(st.message().find("n_kv_heads 3"), std::string::npos) << st.message();
  st = parse(set_field(5, -512));  // unshared classifier but the file has none
  EXPECT_NE(st.message().find("lacks the classifier"), std::string::npos) << st.message();
  std::vector<uint8_t> cut(raw.begin(), raw.end() - 4);
  st = parse(cut);
  EXPECT_NE(st.message().find("implies 1056540"), std::string::npos) << st.message();
  EXPECT_FALSE(parse(std::vector<uint8_t>(raw.begin(), raw.begin() + 27)).ok());
}

TEST(Llama2cTest, CorruptTokenizerGivesNamedErrors) {
  const std::vector<uint8_t> tok = ReadAll(kDir + "/tok512.bin");
  GgufMetadata md;
  EXPECT_TRUE(AddLlama2cTokenizerMetadata(tok.data(), tok.size(), 512, "tok.bin", &md).ok());
  Status st = AddLlama2cTokenizerMetadata(tok.data(), tok.size(), 513, "tok.bin", &md);
  EXPECT_NE(st.message().find("token 512"), std::string::npos) << st.message();
  st = AddLlama2cTokenizerMetadata(tok.data(), tok.size(), 500, "tok.bin", &md);
  EXPECT_NE(st.message().find("trailing"), std::string::npos) << st.message();
  std::vector<uint8_t> bad = tok;
  const int32_t huge = 1 << 30;
  std::memcpy(bad.data() + 8, &huge, 4);  // length of token 0
  st = AddLlama2cTokenizerMetadata(bad.data(), bad.size(), 512, "tok.bin", &md);
  EXPECT_NE(st.message().find("token 0 has length"), std::string::npos) << st.message();
  for (size_t n = 0; n < tok.size(); n += 7) {  // truncations never crash
    std::vector<uint8_t> cut(tok.begin(), tok.begin() + n);
    EXPECT_FALSE(AddLlama2cTokenizerMetadata(cut.data(), cut.size(), 512, "tok.bin", &md).ok());
  }
}

}  // namespace
}  // namespace skipkv
