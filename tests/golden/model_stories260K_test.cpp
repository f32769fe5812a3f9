// Golden test: the real tiny model stories260K (llama2.c "tinyllamas", GQA
// 8/4, shared classifier), loaded through the project's real loader
// (OpenModel -> llama2.c importer), must reproduce llama2.c run.c exactly:
// the greedy tokens and text, the logits at positions 0-3 within 1e-4, and
// the per-position max logit / argmax of every dumped position.
// References: tests/data/stories260K/*.dump (one line per position:
// pos, input token, argmax, max logit, sum of logits, [512 logits for 0-3]).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "io/embedded/embedded_model.h"
#include "io/model_source.h"
#include "model/forward.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace skipkv {
namespace {

const std::string kModelPath = std::string(SKIPKV_DATA_DIR) + "/models/stories260K/stories260K.bin";
const std::string kRefDir = std::string(SKIPKV_TEST_DATA_DIR) + "/stories260K/";

struct DumpLine {
  int pos = 0, in = 0, argmax = 0;
  double max_logit = 0, sum_logits = 0;
  std::vector<float> logits;  // all 512 for positions 0-3, else empty
};

std::vector<DumpLine> ReadDump(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot open " << path;
  std::vector<DumpLine> out;
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream s(line);
    DumpLine d;
    std::string k_pos, k_in, k_arg, k_max, k_sum, k_logits;
    s >> k_pos >> d.pos >> k_in >> d.in >> k_arg >> d.argmax >> k_max >> d.max_logit >> k_sum >> d.sum_logits;
    EXPECT_EQ(k_pos + k_in + k_arg + k_max + k_sum, "posinargmaxmaxlogitsumlogits") << path << ": " << line;
    if (s >> k_logits) {
      EXPECT_EQ(k_logits, "logits");
      float v;
      while (s >> v) d.logits.push_back(v);
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "cannot open " << path;
  return std::string(std::istreambuf_iterator<char>(f), {});
}

int Argmax(const float* x, int n) { return static_cast<int>(std::max_element(x, x + n) - x); }

class Stories260K : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto src = OpenModel(kModelPath);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    source_ = std::shared_ptr<const ModelSource>(std::move(src).value());
    auto m = Model::Load(source_);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value().release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
    source_.reset();
  }

  // run.c's greedy loop: feed `forced` tokens (the prompt) one by one, then
  // the argmax; `steps` forwards in all. Returns the tokens fed at positions
  // 0..steps-1 followed by the last argmax, and records each position's logits.
  std::vector<int32_t> Greedy(KvDType dtype, const std::vector<int32_t>& forced, int steps,
                              std::vector<std::vector<float>>* logits_per_pos) {
    ForwardPass pass(*model_);
    SequenceKvCache cache(model_->KvShape(dtype), 64, SequenceKvCache::kUnbounded);
    std::vector<int32_t> seq = {forced.at(0)};
    for (int pos = 0; pos < steps; ++pos) {
      const int32_t tok = seq.back(), p = pos;
      SequenceInput in;
      in.cache = &cache;
      in.tokens = std::span<const int32_t>(&tok, 1);
      in.pos = std::span<const int32_t>(&p, 1);
      ForwardBatch b;
      b.seqs = std::span<const SequenceInput>(&in, 1);
      auto out = pass.Run(b, pool_);
      EXPECT_TRUE(out.ok()) << out.status().ToString();
      if (!out.ok()) break;
      const float* row = out->LastRow(0);
      if (logits_per_pos) logits_per_pos->emplace_back(row, row + out->vocab);
      seq.push_back(pos + 1 < static_cast<int>(forced.size()) ? forced[pos + 1] : Argmax(row, out->vocab));
    }
    return seq;
  }

  static std::shared_ptr<const ModelSource> source_;
  static Model* model_;
  ThreadPool pool_{2};
};

std::shared_ptr<const ModelSource> Stories260K::source_;
Model* Stories260K::model_ = nullptr;

TEST_F(Stories260K, ConfigFromTheLlama2cImport) {
  const ModelConfig& c = model_->config();
  EXPECT_EQ(c.arch, Architecture::kLlama);
  EXPECT_EQ(c.d_model, 64);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.context_length, 512);
  EXPECT_EQ(c.rope.style, kernels::RopeStyle::kAdjacentPairs);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_FALSE(c.qkv_bias);
}

// Logits, max logit and argmax per position against run.c's dumps (f32 KV).
void CheckAgainstDump(const std::vector<DumpLine>& dump, const std::vector<int32_t>& fed,
                      const std::vector<std::vector<float>>& logits, const char* name) {
  ASSERT_GE(logits.size(), dump.size());
  double worst_logit = 0, worst_max = 0;
  for (const DumpLine& d : dump) {
    const std::vector<float>& row = logits[d.pos];
    EXPECT_EQ(fed[d.pos], d.in) << name << " pos " << d.pos;
    EXPECT_EQ(Argmax(row.data(), 512), d.argmax) << name << " pos " << d.pos;
    const double mx = *std::max_element(row.begin(), row.end());
    worst_max = std::max(worst_max, std::fabs(mx - d.max_logit));
    double sum = 0;
    for (float v : row) sum += v;
    EXPECT_NEAR(sum, d.sum_logits, 5e-3) << name << " pos " << d.pos;  // 512 values printed with %.6f
    if (!d.logits.empty()) {
      ASSERT_EQ(d.logits.size(), 512u);
      for (int i = 0; i < 512; ++i)
        worst_logit = std::max(worst_logit, std::fabs(double{row[i]} - d.logits[i]));
    }
  }
  EXPECT_LE(worst_logit, 1e-4) << name;
  EXPECT_LE(worst_max, 1e-4) << name;
  std::printf("[ %s ] %zu positions: max |logit error| (pos 0-3) %.3g, max |max-logit error| %.3g\n", name,
              dump.size(), worst_logit, worst_max);
}

TEST_F(Stories260K, BosGreedyMatchesRunC) {
  const auto dump = ReadDump(kRefDir + "stories260K_bos_greedy.dump");
  ASSERT_EQ(dump.size(), 64u);
  std::vector<std::vector<float>> logits;
  const auto fed = Greedy(KvDType::kF32, {1}, static_cast<int>(dump.size()), &logits);
  CheckAgainstDump(dump, fed, logits, "bos_greedy f32 KV");
  // The argmax file lists the same positions: fed token and its argmax.
  const auto argmax = ReadDump(kRefDir + "stories260K_bos_greedy.argmax.txt");
  ASSERT_EQ(argmax.size(), 64u);
  for (const DumpLine& d : argmax) {
    EXPECT_EQ(fed[d.pos], d.in) << d.pos;
    EXPECT_EQ(fed[d.pos + 1], d.argmax) << d.pos;
  }
}

TEST_F(Stories260K, PromptGreedyMatchesRunC) {
  const auto dump = ReadDump(kRefDir + "stories260K_prompt_once_greedy.dump");
  ASSERT_EQ(dump.size(), 64u);
  // "Once upon a time" with BOS encodes to 1 403 407 261 378 (README).
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  std::vector<std::vector<float>> logits;
  const auto fed = Greedy(KvDType::kF32, prompt, static_cast<int>(dump.size()), &logits);
  CheckAgainstDump(dump, fed, logits, "prompt_once f32 KV");

  // The same prompt as one prefill chunk (all logits) in a batch with a
  // second sequence gives the same first positions.
  ForwardPass pass(*model_);
  SequenceKvCache c1(model_->KvShape(KvDType::kF32), 8, SequenceKvCache::kUnbounded);
  SequenceKvCache c2(model_->KvShape(KvDType::kF32), 8, SequenceKvCache::kUnbounded);
  const std::vector<int32_t> pos = {0, 1, 2, 3, 4}, other = {1, 403}, other_pos = {0, 1};
  SequenceInput in[2];
  in[0] = {&c1, prompt, pos, {}, {}, LogitsMode::kAll};
  in[1] = {&c2, other, other_pos, {}, {}, LogitsMode::kLast};
  ForwardBatch b;
  b.seqs = in;
  auto out = pass.Run(b, pool_);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  double worst = 0;
  for (int p = 0; p < 4; ++p) {
    for (int i = 0; i < 512; ++i)
      worst = std::max(worst, std::fabs(double{out->Row(p)[i]} - dump[p].logits[i]));
  }
  EXPECT_LE(worst, 1e-4);
  EXPECT_EQ(Argmax(out->Row(4), 512), dump[4].argmax);
  EXPECT_EQ(Argmax(out->LastRow(1), 512), dump[1].argmax);
}

// The model compiled into the binary (OpenModel(":default:")) is the same model.
TEST_F(Stories260K, EmbeddedDefaultModelGivesTheSameGreedyTokens) {
  auto src = OpenModel(std::string(kEmbeddedModelPath));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  auto m = Model::Load(std::shared_ptr<const ModelSource>(std::move(src).value()));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const auto dump = ReadDump(kRefDir + "stories260K_bos_greedy.dump");
  ForwardPass pass(**m);
  SequenceKvCache cache((*m)->KvShape(KvDType::kF16), 64, SequenceKvCache::kUnbounded);
  int32_t tok = 1;
  for (const DumpLine& d : dump) {
    const int32_t p = d.pos;
    SequenceInput in;
    in.cache = &cache;
    in.tokens = std::span<const int32_t>(&tok, 1);
    in.pos = std::span<const int32_t>(&p, 1);
    ForwardBatch b;
    b.seqs = std::span<const SequenceInput>(&in, 1);
    auto out = pass.Run(b, pool_);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(tok, d.in) << d.pos;
    tok = Argmax(out->LastRow(0), 512);
    EXPECT_EQ(tok, d.argmax) << d.pos;
  }
}

// 257 greedy steps from BOS, as `run.c -t 0.0 -n 257`: the decoded text is
// run.c's output (which ends with its own newline), with f32 and f16 KV.
TEST_F(Stories260K, Greedy257TextWithF32AndF16Kv) {
  const std::string expected = ReadText(kRefDir + "stories260K_greedy_257.txt");
  ASSERT_FALSE(expected.empty());
  auto tok = Tokenizer::FromModelSource(*source_);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  std::vector<int32_t> f32_tokens;
  for (KvDType dtype : {KvDType::kF32, KvDType::kF16}) {
    const auto seq = Greedy(dtype, {1}, 257, nullptr);
    ASSERT_EQ(seq.size(), 258u);
    // run.c stops at BOS; greedy decoding of this model never emits it.
    EXPECT_EQ(std::count(seq.begin() + 1, seq.end(), 1), 0);
    std::vector<TokenId> ids(seq.begin(), seq.end());
    DecodeOptions opts;
    opts.skip_special = true;
    auto text = (*tok)->Decode(ids, opts);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    EXPECT_EQ(*text + "\n", expected) << (dtype == KvDType::kF16 ? "f16" : "f32") << " KV";
    if (dtype == KvDType::kF32) {
      f32_tokens = seq;
    } else {
      EXPECT_EQ(seq, f32_tokens) << "f16 KV changed the greedy tokens";
    }
  }
}

}  // namespace
}  // namespace skipkv
