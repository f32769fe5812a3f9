// ModelConfig's key table and validation, weight binding errors, and the
// forward pass's input checks: every bad input is a Status that names the
// key, tensor or value — and leaves the KV cache untouched.
#include "model/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "model/forward.h"
#include "model/model.h"
#include "model_test_util.h"

namespace skipkv {
namespace {

using testing::MakeTinyModel;
using testing::TinySpec;

TinySpec LlamaSpec() {
  TinySpec s;
  s.arch = "llama";
  s.qkv_bias = false;
  s.tied = true;
  return s;
}

// Replaces (or adds) a metadata key.
void SetKey(ModelSource& src, const std::string& key, GgufValue v) { src.metadata.Set(key, std::move(v)); }

TensorView* Tensor(ModelSource& src, const std::string& name) {
  for (TensorView& t : src.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

void RemoveTensor(ModelSource& src, const std::string& name) {
  std::erase_if(src.tensors, [&](const TensorView& t) { return t.name == name; });
}

::testing::AssertionResult FailsWith(const Status& st, StatusCode code, const std::string& needle) {
  if (st.ok())
    return ::testing::AssertionFailure() << "expected an error containing '" << needle << "', got OK";
  if (st.code() != code) return ::testing::AssertionFailure() << "wrong code: " << st.ToString();
  if (st.message().find(needle) == std::string::npos) {
    return ::testing::AssertionFailure() << "message lacks '" << needle << "': " << st.ToString();
  }
  return ::testing::AssertionSuccess();
}

Status LoadStatus(std::shared_ptr<ModelSource> src) { return Model::Load(std::move(src)).status(); }

// ---- Config --------------------------------------------------------------------

TEST(ModelConfig, Qwen2FromKeys) {
  auto m = MakeTinyModel(TinySpec{});
  auto c = ModelConfigFromSource(*m.source);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, Architecture::kQwen2);
  EXPECT_EQ(c->n_layers, 3);
  EXPECT_EQ(c->d_model, 48);
  EXPECT_EQ(c->n_heads, 6);
  EXPECT_EQ(c->n_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->gqa_group(), 3);
  EXPECT_EQ(c->ffn_dim, 80);
  EXPECT_EQ(c->vocab_size, 97);
  EXPECT_EQ(c->context_length, 256);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-6f);
  EXPECT_EQ(c->rope.style, kernels::RopeStyle::kRotateHalf);
  EXPECT_EQ(c->rope.rot_dim, 8);
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_FALSE(c->tied_embeddings);
  EXPECT_NE(c->ToString().find("qwen2"), std::string::npos);
}

TEST(ModelConfig, LlamaDefaultsToAdjacentPairsAndTied) {
  auto m = MakeTinyModel(LlamaSpec());
  auto c = ModelConfigFromSource(*m.source);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, Architecture::kLlama);
  EXPECT_EQ(c->rope.style, kernels::RopeStyle::kAdjacentPairs);
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_FALSE(c->qkv_bias);
  // The explicit layout key wins over the architecture default.
  SetKey(*m.source, "skipkv.rope_layout", GgufValue::Str("rotate_half"));
  c = ModelConfigFromSource(*m.source);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->rope.style, kernels::RopeStyle::kRotateHalf);
  SetKey(*m.source, "skipkv.rope_layout", GgufValue::Str("sideways"));
  EXPECT_TRUE(FailsWith(ModelConfigFromSource(*m.source).status(), StatusCode::kInvalidArgument, "sideways"));
}

TEST(ModelConfig, RopeScalingKeys) {
  TinySpec s = LlamaSpec();
  s.llama3_factor = 8.f;
  s.llama3_low = 1.5f;
  s.llama3_high = 3.f;
  s.llama3_orig_ctx = 128;
  auto m = MakeTinyModel(s);
  auto c = ModelConfigFromSource(*m.source);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FLOAT_EQ(c->rope.llama3_factor, 8.f);
  EXPECT_FLOAT_EQ(c->rope.llama3_low_freq_factor, 1.5f);
  EXPECT_FLOAT_EQ(c->rope.llama3_high_freq_factor, 3.f);
  EXPECT_EQ(c->rope.llama3_original_context, 128);

  SetKey(*m.source, "llama.rope.scaling.type", GgufValue::Str("linear"));
  SetKey(*m.source, "llama.rope.scaling.factor", GgufValue::F32(4.f));
  c = ModelConfigFromSource(*m.source);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FLOAT_EQ(c->rope.linear_scale, 4.f);
  EXPECT_EQ(c->rope.llama3_factor, 0.f);

  SetKey(*m.source, "llama.rope.scaling.type", GgufValue::Str("yarn"));
  EXPECT_TRUE(FailsWith(ModelConfigFromSource(*m.source).status(), StatusCode::kUnsupported, "yarn"));
}

// llama.cpp stores Llama-3 scaling as the tensor rope_freqs.weight (one
// divisor per frequency). The exact llama3 divisors are accepted; others refused.
TEST(ModelConfig, RopeFreqsTensorMustBeLlama3) {
  TinySpec s = LlamaSpec();
  s.theta = 500000.f;
  s.d_model = 256;
  s.n_heads = 2;
  s.n_kv_heads = 1;
  s.head_dim = 128;
  auto m = MakeTinyModel(s);
  std::vector<float> div(64);
  for (int i = 0; i < 64; ++i) {  // HF Llama 3.1 defaults: factor 8, low 1, high 4, original context 8192
    const double freq = std::pow(500000.0, -2.0 * i / 128), wl = 2 * std::numbers::pi / freq;
    if (wl < 8192 / 4.0) {
      div[i] = 1.f;
    } else if (wl > 8192 / 1.0) {
      div[i] = 8.f;
    } else {
      const double sm = (8192 / wl - 1) / 3;
      div[i] = static_cast<float>(1 / ((1 - sm) / 8 + sm));
    }
  }
  testing::internal::AddTensor(*m.source, "rope_freqs.weight", DType::kF32, {64}, div);
  auto c = ModelConfigFromSource(*m.source);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FLOAT_EQ(c->rope.llama3_factor, 8.f);
  EXPECT_EQ(c->rope.llama3_original_context, 8192);

  const_cast<float*>(reinterpret_cast<const float*>(Tensor(*m.source, "rope_freqs.weight")->data))[40] *=
      1.5f;
  EXPECT_TRUE(
      FailsWith(ModelConfigFromSource(*m.source).status(), StatusCode::kUnsupported, "rope_freqs.weight"));
}

TEST(ModelConfig, BadKeysNameTheKey) {
  auto check = [](const std::string& key, GgufValue v, StatusCode code, const std::string& needle) {
    auto m = MakeTinyModel(TinySpec{});
    SetKey(*m.source, key, std::move(v));
    return FailsWith(LoadStatus(m.source), code, needle);
  };
  EXPECT_TRUE(check("general.architecture", GgufValue::Str("gpt2"), StatusCode::kUnsupported, "gpt2"));
  EXPECT_TRUE(check("qwen2.attention.head_count_kv", GgufValue::U32(4), StatusCode::kInvalidArgument,
                    "qwen2.attention.head_count_kv"));
  EXPECT_TRUE(
      check("qwen2.block_count", GgufValue::I32(0), StatusCode::kInvalidArgument, "qwen2.block_count"));
  EXPECT_TRUE(check("qwen2.attention.layer_norm_rms_epsilon", GgufValue::F32(-1.f),
                    StatusCode::kInvalidArgument, "layer_norm_rms_epsilon"));
  EXPECT_TRUE(check("qwen2.rope.dimension_count", GgufValue::U32(9), StatusCode::kInvalidArgument,
                    "rope.dimension_count"));
  EXPECT_TRUE(
      check("qwen2.vocab_size", GgufValue::U32(1000), StatusCode::kInvalidArgument, "qwen2.vocab_size"));
  EXPECT_TRUE(check("qwen2.embedding_length", GgufValue::Str("big"), StatusCode::kCorruptData,
                    "qwen2.embedding_length"));

  auto m = MakeTinyModel(TinySpec{});
  RemoveTensor(*m.source, "output.weight");
  SetKey(*m.source, "skipkv.tie_word_embeddings", GgufValue::Bool(false));
  EXPECT_TRUE(FailsWith(LoadStatus(m.source), StatusCode::kNotFound, "output.weight"));
}

TEST(ModelConfig, MissingRequiredKey) {
  auto m = MakeTinyModel(TinySpec{});
  GgufMetadata md;
  for (const auto& [k, v] : m.source->metadata.entries()) {
    if (k != "qwen2.feed_forward_length") md.Set(k, v);
  }
  m.source->metadata = md;
  EXPECT_TRUE(FailsWith(LoadStatus(m.source), StatusCode::kNotFound, "qwen2.feed_forward_length"));
}

// ---- Weight binding ------------------------------------------------------------------

TEST(ModelWeights, MissingTensorIsNamed) {
  auto m = MakeTinyModel(TinySpec{});
  RemoveTensor(*m.source, "blk.1.ffn_up.weight");
  EXPECT_TRUE(FailsWith(LoadStatus(m.source), StatusCode::kNotFound, "blk.1.ffn_up.weight"));

  m = MakeTinyModel(TinySpec{});
  RemoveTensor(*m.source, "blk.2.attn_k.bias");  // qwen2 needs its biases
  EXPECT_TRUE(FailsWith(LoadStatus(m.source), StatusCode::kNotFound, "blk.2.attn_k.bias"));

  m = MakeTinyModel(TinySpec{});
  RemoveTensor(*m.source, "token_embd.weight");
  EXPECT_TRUE(FailsWith(LoadStatus(m.source), StatusCode::kNotFound, "token_embd.weight"));
}

TEST(ModelWeights, WrongShapeNamesExpectedAndActual) {
  auto m = MakeTinyModel(TinySpec{});
  Tensor(*m.source, "blk.0.attn_k.weight")->ne = {48, 24, 1, 1};  // expected {48, 16}
  const Status st = LoadStatus(m.source);
  EXPECT_TRUE(FailsWith(st, StatusCode::kInvalidArgument, "blk.0.attn_k.weight"));
  EXPECT_NE(st.message().find("[48, 24]"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("[48, 16]"), std::string::npos) << st.message();

  m = MakeTinyModel(TinySpec{});
  Tensor(*m.source, "output_norm.weight")->ne = {47, 1, 1, 1};
  EXPECT_TRUE(FailsWith(LoadStatus(m.source), StatusCode::kInvalidArgument, "output_norm.weight"));

  m = MakeTinyModel(TinySpec{});
  Tensor(*m.source, "blk.2.ffn_norm.weight")->type = DType::kI32;
  EXPECT_TRUE(FailsWith(LoadStatus(m.source), StatusCode::kUnsupported, "blk.2.ffn_norm.weight"));
}

// ---- Forward input checks ----------------------------------------------------------

class ForwardErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    tiny_ = MakeTinyModel(TinySpec{});
    auto m = Model::Load(tiny_.source);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value();
    pass_ = std::make_unique<ForwardPass>(*model_);
    cache_ =
        std::make_unique<SequenceKvCache>(model_->KvShape(KvDType::kF16), 8, SequenceKvCache::kUnbounded);
  }

  Status Run(std::vector<int32_t> tok, std::vector<int32_t> pos, std::vector<int32_t> gen_pos = {},
             SequenceKvCache* cache = nullptr) {
    tok_ = std::move(tok);
    pos_ = std::move(pos);
    gp_ = std::move(gen_pos);
    SequenceInput in;
    in.cache = cache ? cache : cache_.get();
    in.tokens = tok_;
    in.pos = pos_;
    in.gen_pos = gp_;
    ForwardBatch b;
    b.seqs = std::span<const SequenceInput>(&in, 1);
    return pass_->Run(b, pool_).status();
  }

  testing::TinyModel tiny_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<ForwardPass> pass_;
  std::unique_ptr<SequenceKvCache> cache_;
  std::vector<int32_t> tok_, pos_, gp_;
  ThreadPool pool_{1};
};

TEST_F(ForwardErrors, BadInputsAreRejectedWithoutSideEffects) {
  ASSERT_TRUE(Run({1, 2, 3}, {0, 1, 2}).ok());
  EXPECT_TRUE(FailsWith(Run({5, 97}, {3, 4}), StatusCode::kInvalidArgument, "token id 97 at index 1"));
  EXPECT_TRUE(FailsWith(Run({-1}, {3}), StatusCode::kInvalidArgument, "token id -1"));
  EXPECT_TRUE(FailsWith(Run({5}, {256}), StatusCode::kOutOfRange, "context length 256"));
  EXPECT_TRUE(FailsWith(Run({5, 6}, {3}), StatusCode::kInvalidArgument, "pos has 1 entries for 2 tokens"));
  EXPECT_TRUE(FailsWith(Run({5}, {3}, {2}), StatusCode::kInvalidArgument, "gen_pos 2"));  // slot 2 exists
  EXPECT_TRUE(FailsWith(Run({5, 6}, {3, 4}, {5, 5}), StatusCode::kInvalidArgument, "gen_pos 5 at index 1"));
  EXPECT_TRUE(FailsWith(Run({}, {}), StatusCode::kInvalidArgument, "no tokens"));
  for (int l = 0; l < 3; ++l) EXPECT_EQ(cache_->size(l), 3) << "a failed call must not append";
  EXPECT_TRUE(Run({5}, {3}).ok());

  // A cache of another shape, and a full bounded cache.
  KvCacheShape other = model_->KvShape();
  other.n_kv_heads = 3;
  other.n_heads = 6;
  SequenceKvCache wrong(other, 4, SequenceKvCache::kUnbounded);
  EXPECT_TRUE(FailsWith(Run({1}, {0}, {}, &wrong), StatusCode::kInvalidArgument, "does not match the model"));
  SequenceKvCache bounded(model_->KvShape(), 4, 4);
  EXPECT_TRUE(Run({1, 2, 3}, {0, 1, 2}, {}, &bounded).ok());
  EXPECT_TRUE(FailsWith(Run({4, 5}, {3, 4}, {}, &bounded), StatusCode::kOutOfRange, "capacity 4"));
  EXPECT_EQ(bounded.size(0), 3);
}

TEST_F(ForwardErrors, SameCacheTwiceAndMixedDtypesAreRejected) {
  std::vector<int32_t> tok = {1}, pos = {0};
  SequenceInput in[2];
  in[0] = {cache_.get(), tok, pos, {}, {}, LogitsMode::kLast};
  in[1] = in[0];
  ForwardBatch b;
  b.seqs = in;
  EXPECT_TRUE(FailsWith(pass_->Run(b, pool_).status(), StatusCode::kInvalidArgument, "already used"));
  SequenceKvCache f32(model_->KvShape(KvDType::kF32), 4, SequenceKvCache::kUnbounded);
  in[1].cache = &f32;
  EXPECT_TRUE(FailsWith(pass_->Run(b, pool_).status(), StatusCode::kInvalidArgument, "dtype"));
  EXPECT_EQ(cache_->size(0), 0);
  ForwardBatch empty;
  EXPECT_TRUE(FailsWith(pass_->Run(empty, pool_).status(), StatusCode::kInvalidArgument, "no sequences"));
}

}  // namespace
}  // namespace skipkv
