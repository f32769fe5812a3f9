// The steering hook on a random qwen2 model with the real Qwen byte-level BPE
// tokenizer: it fires exactly on the SPLIT tokens inside <think> (the last
// prompt position included, nothing after </think>), adds exactly α·V at the
// input of layer direction + 1 (checked against the naive reference forward
// steered at the oracle's positions), and α follows α0 + γ·N_o at the chosen
// cadence.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "model/forward.h"
#include "skipkv/kv_config.h"
#include "steer/steering_hooks.h"
#include "steer/steering_vector.h"
#include "sentence/token_sets.h"
#include "unit/model_test_util.h"
#include "unit/tokenizer_test_util.h"
#include "util/thread_pool.h"

namespace skipkv {
namespace {

using testing::RefForward;
using testing::RefToken;
using testing::RelErr;
using testing::NpmTokenizer;

// Text with paragraph breaks before, inside and after the thought. The prompt
// is everything up to and including the "\n\n" after "Wait, check it.".
constexpr const char* kPrompt = "Add 1 and 1.\n\nThink first.<think>\nFirst, 1 + 1 = 2.\n\nWait, check it.\n\n";
constexpr const char* kGenerated =
    "Alternatively, count.\n\nSo 2.\n\n</think>\n\nThe answer is 2.\n\nDone.";

struct Fixture {
  const Tokenizer* tok = nullptr;
  std::vector<int32_t> ids;
  size_t n_prompt = 0;
  testing::TinyModel tiny;
  std::unique_ptr<Model> model;
  std::shared_ptr<const SkipkvTokenSets> sets;
};

// In-think SPLIT positions among [from, n), by the text rule of spec §4.2
// applied token by token (the oracle: it reads token bytes, not the sets).
std::vector<int32_t> OraclePositions(const Tokenizer& tok, const std::vector<int32_t>& ids, size_t from,
                                     bool assume_think) {
  const int32_t start = tok.PieceToId("<think>"), end = tok.PieceToId("</think>");
  bool in = assume_think;
  std::vector<int32_t> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == start) in = true;
    if (ids[i] == end) in = false;
    const bool split = std::string(tok.TokenBytes(ids[i])).find("\n\n") != std::string::npos;
    if (i + 1 >= from && in && split) out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

TEST(SteerHooks, FiresOnSplitTokensInsideThinkAndAddsAlphaVAtTheLayer) {
  SKIPKV_NPM_TOKENIZER_OR_SKIP(tok, "tokenizer-qwen3");
  EncodeOptions eo;
  eo.add_special = false;
  eo.parse_special = true;
  std::vector<int32_t> ids = tok->Encode(kPrompt, eo);
  const size_t n_prompt = ids.size();
  for (int32_t t : tok->Encode(kGenerated, eo)) ids.push_back(t);
  const int32_t think_end = tok->PieceToId("</think>");
  ASSERT_NE(std::find(ids.begin(), ids.end(), think_end), ids.end());

  auto sets_or = BuildSkipkvTokenSets(*tok, DefaultSentenceDelimiters());
  ASSERT_TRUE(sets_or.ok()) << sets_or.status().ToString();
  auto sets = std::make_shared<const SkipkvTokenSets>(std::move(sets_or).value());

  testing::TinySpec spec;
  spec.n_layers = 4;
  spec.d_model = 32;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.head_dim = 8;
  spec.ffn_dim = 48;
  spec.vocab = tok->vocab_size();
  const testing::TinyModel tiny = testing::MakeTinyModel(spec);
  auto model = Model::Load(tiny.source);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ForwardPass pass(**model);
  ThreadPool pool(2);

  const int direction = 1, D = spec.d_model;
  testing::Rng rng(5);
  auto v = std::make_shared<std::vector<float>>(D);
  for (float& x : *v) x = rng.Uniform(-1.f, 1.f);
  SteeringConfig cfg;
  cfg.enabled = true;
  cfg.coef = 0.75f;
  SteeringHooks hooks(cfg, v, EngineLayerForDirection(direction), sets);

  SequenceStart start;
  start.prompt = std::span<const int32_t>(ids.data(), n_prompt);
  start.d_model = D;
  hooks.OnStart(start);

  auto cache = std::make_unique<SequenceKvCache>((*model)->KvShape(KvDType::kF32, 8), 16,
                                                 SequenceKvCache::kUnbounded);
  std::vector<std::vector<float>> logits;  // the sampled row of every forward: positions n_prompt-1 ..
  auto feed = [&](size_t b, size_t e, ForwardKind kind) {
    SequenceStep step;
    step.l_before = static_cast<int64_t>(b);
    step.l_after = static_cast<int64_t>(e);
    step.kind = kind;
    hooks.BeforeForward(step);
    std::vector<int32_t> tk(ids.begin() + b, ids.begin() + e), pos;
    for (size_t i = b; i < e; ++i) pos.push_back(static_cast<int32_t>(i));
    SequenceInput in;
    in.cache = cache.get();
    in.tokens = tk;
    in.pos = pos;
    in.logits = LogitsMode::kLast;
    ForwardBatch batch;
    batch.seqs = std::span<const SequenceInput>(&in, 1);
    batch.residual_hook = [&](int layer, std::span<const BatchToken> rows, float* hidden) {
      if (hooks.WantsResidual(layer)) hooks.OnResidual(layer, rows, hidden);
    };
    auto out = pass.Run(batch, pool);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    if (kind != ForwardKind::kPrefillPartial) logits.emplace_back(out->Row(0), out->Row(0) + out->vocab);
  };
  // The prompt in two chunks (the first must not steer its last row), then decode.
  feed(0, 5, ForwardKind::kPrefillPartial);
  feed(5, n_prompt, ForwardKind::kPrefill);
  for (size_t i = n_prompt; i < ids.size(); ++i) feed(i, i + 1, ForwardKind::kDecode);

  const std::vector<int32_t> want = OraclePositions(*tok, ids, n_prompt, /*assume_think=*/true);
  EXPECT_EQ(hooks.steered_positions(), want);
  // The test text really exercises every case: the last prompt token is a
  // steered SPLIT, there are steered decode SPLITs, a SPLIT in the prompt
  // before it (not steered: only the last prompt position is) and SPLITs
  // after </think> (not steered).
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(want.front(), static_cast<int32_t>(n_prompt - 1));
  EXPECT_GE(want.size(), 3u);
  const auto all = OraclePositions(*tok, ids, 0, true);
  EXPECT_LT(all.front(), static_cast<int32_t>(n_prompt - 1));
  const int32_t end_pos = static_cast<int32_t>(std::find(ids.begin(), ids.end(), think_end) - ids.begin());
  bool split_after_end = false;
  for (size_t i = end_pos + 1; i < ids.size(); ++i) {
    split_after_end |= std::string(tok->TokenBytes(ids[i])).find("\n\n") != std::string::npos;
  }
  EXPECT_TRUE(split_after_end);
  EXPECT_LT(want.back(), end_pos);
  EXPECT_EQ(hooks.events(), static_cast<int64_t>(want.size()));

  // Reference: α·V added at the input of layer direction + 1 at exactly the
  // oracle positions; every sampled row agrees.
  std::vector<RefToken> seq;
  for (size_t i = 0; i < ids.size(); ++i) seq.push_back({ids[i], static_cast<int>(i), true});
  auto steer = [&](int layer, int t, std::vector<float>& x) {
    if (layer != direction + 1 || std::find(want.begin(), want.end(), t) == want.end()) return;
    for (int i = 0; i < D; ++i) x[i] += cfg.coef * (*v)[i];
  };
  const auto ref = RefForward(tiny, seq, steer);
  const auto plain = RefForward(tiny, seq);
  ASSERT_EQ(logits.size(), ids.size() - n_prompt + 1);
  for (size_t k = 0; k < logits.size(); ++k) {
    const size_t t = n_prompt - 1 + k;
    EXPECT_LE(RelErr(logits[k].data(), ref.logits[t]), 1e-4) << "position " << t;
  }
  // ... and the steering really changed the output at a steered position.
  EXPECT_GT(RelErr(logits[0].data(), plain.logits[n_prompt - 1]), 1e-3);
}

TEST(SteerHooks, NoThinkInPromptFollowsAssumeThink) {
  SKIPKV_NPM_TOKENIZER_OR_SKIP(tok, "tokenizer-qwen3");
  auto sets_or = BuildSkipkvTokenSets(*tok, DefaultSentenceDelimiters());
  ASSERT_TRUE(sets_or.ok());
  auto sets = std::make_shared<const SkipkvTokenSets>(std::move(sets_or).value());
  const std::vector<int32_t> prompt = tok->Encode("Hello.\n\n", {false, true});
  ASSERT_TRUE(sets->IsSplit(prompt.back()));
  auto v = std::make_shared<std::vector<float>>(4, 1.f);
  for (bool assume : {true, false}) {
    SteeringConfig cfg;
    cfg.enabled = true;
    cfg.assume_think = assume;
    SteeringHooks h(cfg, v, 1, sets);
    SequenceStart s;
    s.prompt = prompt;
    s.d_model = 4;
    h.OnStart(s);
    SequenceStep step;
    step.kind = ForwardKind::kPrefill;
    h.BeforeForward(step);
    BatchToken row;
    row.token = prompt.back();
    row.last = true;
    std::vector<float> hidden(4, 0.f);
    h.OnResidual(1, std::span<const BatchToken>(&row, 1), hidden.data());
    EXPECT_EQ(h.events(), assume ? 1 : 0) << assume;
    EXPECT_EQ(hidden[0], assume ? 1.f : 0.f);
  }
}

// α = min(α0 + γ·N_o, α_max), read before compressing forwards only (default
// cadence) or before every forward; the added row is exactly α·V.
TEST(SteerHooks, AdaptiveAlphaFollowsNonExecCount) {
  SKIPKV_NPM_TOKENIZER_OR_SKIP(tok, "tokenizer-qwen3");
  auto sets_or = BuildSkipkvTokenSets(*tok, DefaultSentenceDelimiters());
  ASSERT_TRUE(sets_or.ok());
  auto sets = std::make_shared<const SkipkvTokenSets>(std::move(sets_or).value());
  const int32_t split = tok->Encode("\n\n", {false, false}).back();
  ASSERT_TRUE(sets->IsSplit(split));
  auto v = std::make_shared<std::vector<float>>(std::vector<float>{1.f, -2.f, 0.5f});
  for (SteerCadence cadence : {SteerCadence::kCompression, SteerCadence::kSentenceClose}) {
    int64_t n_o = 0;
    SteeringConfig cfg;
    cfg.enabled = true;
    cfg.adaptive = true;
    cfg.alpha0 = 1.f;
    cfg.gamma = 0.02f;
    cfg.alpha_max = 1.1f;
    cfg.cadence = cadence;
    SteeringHooks h(cfg, v, 3, sets, [&] { return n_o; });
    SequenceStart s;
    s.d_model = 3;
    h.OnStart(s);
    EXPECT_FLOAT_EQ(h.alpha(), 1.f);
    float expect = 1.f;
    for (int step_i = 0; step_i < 12; ++step_i) {
      n_o = step_i / 2;  // a non-execution sentence closes every other step
      SequenceStep step;
      step.kind = ForwardKind::kDecode;
      step.compresses = step_i % 4 == 3;
      h.BeforeForward(step);
      if (cadence == SteerCadence::kSentenceClose || step.compresses) {
        expect = std::min(1.f + 0.02f * static_cast<float>(n_o), 1.1f);
      }
      EXPECT_FLOAT_EQ(h.alpha(), expect) << "step " << step_i;
      BatchToken row;
      row.token = split;
      row.last = true;
      std::vector<float> hidden(3, 0.f);
      h.OnResidual(3, std::span<const BatchToken>(&row, 1), hidden.data());
      for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(hidden[i], expect * (*v)[i]);
    }
    EXPECT_FLOAT_EQ(h.alpha(), 1.1f);  // 1 + 0.02 * 5 clamped by alpha_max
  }
}

}  // namespace
}  // namespace skipkv
