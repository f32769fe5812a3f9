// `eval fidelity` on the embedded stories260K model, teacher-forced over a
// story: FullKV agrees with the uncompressed reference 100 % with KL 0; a
// budget the text never reaches never compresses and agrees 100 %; a small
// budget compresses and must lose agreement (top-1 < 100 %, KL > 0). The
// teacher-forced path is checked against the engine's perplexity path (an
// independent forward over the same window): the forced FullKV logits give
// the same mean NLL. LogSoftmax / KL against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "eval/fidelity.h"
#include "skipkv/presets.h"
#include "skipkv/engine.h"

namespace skipkv::eval {
namespace {

std::string Story() {
  std::ifstream in(std::string(SKIPKV_DATA_DIR) + "/text/fidelity_story.txt");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<Engine> MakeEngine() {
  EngineOptions o;
  o.threads = 2;
  auto e = Engine::Create(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

MethodPreset Preset(const std::string& spec, int64_t budget) {
  auto p = MakePreset(spec, budget, {"window=4", "interval=16"});
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return *p;
}

TEST(EvalFidelityTest, LogSoftmaxAndKlByHand) {
  const std::vector<float> logits = {0.0f, std::log(3.0f)};  // p = (1/4, 3/4)
  const std::vector<double> lp = LogSoftmax(logits);
  EXPECT_NEAR(lp[0], std::log(0.25), 1e-7);
  EXPECT_NEAR(lp[1], std::log(0.75), 1e-7);
  const std::vector<double> lq = {std::log(0.5), std::log(0.5)};
  // KL(P || Q) = 1/4 ln(1/2) + 3/4 ln(3/2)
  EXPECT_NEAR(KlDivergence(lp, lq), 0.25 * std::log(0.5) + 0.75 * std::log(1.5), 1e-7);
  EXPECT_EQ(KlDivergence(lp, lp), 0.0);
}

TEST(EvalFidelityTest, FullSelfAgreesUnreachedBudgetAgreesSmallBudgetDiverges) {
  auto engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  FidelityConfig c;
  c.pairs = {Preset("fullkv", 0), Preset("rkv", 2048), Preset("rkv", 32), Preset("streaming", 32)};
  auto res = RunFidelity(*engine, Story(), c);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  ASSERT_EQ(res->rows.size(), 4u);
  EXPECT_GT(res->used_tokens, 200);  // the story is a few hundred tokens
  const int64_t steps = res->used_tokens - 1;
  for (const auto& r : res->rows) EXPECT_EQ(r.steps, steps) << r.method;

  EXPECT_EQ(res->rows[0].top1_agreement, 100.0);
  EXPECT_LT(res->rows[0].kl_mean, 1e-9);
  EXPECT_EQ(res->rows[0].compressions, 0);

  EXPECT_EQ(res->rows[1].budget, 2048);
  EXPECT_EQ(res->rows[1].compressions, 0);
  EXPECT_EQ(res->rows[1].top1_agreement, 100.0);
  EXPECT_LT(res->rows[1].kl_mean, 1e-9);

  for (size_t i : {2u, 3u}) {
    const FidelityRow& r = res->rows[i];
    EXPECT_GT(r.compressions, 5) << r.method;
    EXPECT_LE(r.peak_slots, 32 + 16) << r.method;
    EXPECT_LT(r.top1_agreement, 100.0) << r.method;
    EXPECT_GT(r.top1_agreement, 10.0) << r.method;  // still the same story model
    EXPECT_GT(r.kl_mean, 1e-4) << r.method;
    EXPECT_GE(r.kl_max, r.kl_mean) << r.method;
  }
}

TEST(EvalFidelityTest, ForcedFullKvLogitsMatchThePerplexityPath) {
  auto engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  const std::string text = Story();
  auto ids = engine->Tokenize(text, true);
  ASSERT_TRUE(ids.ok());
  const int64_t n = 128;
  ASSERT_GT(static_cast<int64_t>(ids->size()), n);
  Request r;
  r.prompt_tokens = {(*ids)[0]};
  r.forced_tokens.assign(ids->begin() + 1, ids->begin() + n);
  r.max_new_tokens = 1000;  // the forced tokens end it
  double nll = 0;
  int64_t scored = 0;
  auto res = engine->Generate(std::vector<Request>{r}, nullptr, nullptr, [&](const LogitsEvent& e) {
    const std::vector<double> lp = LogSoftmax(e.logits);
    nll -= lp[r.forced_tokens[e.step]];
    ++scored;
  });
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ((*res)[0].tokens, r.forced_tokens);  // the forced ids, none sampled
  EXPECT_EQ(std::string(FinishReasonName((*res)[0].finish)), "length");
  ASSERT_EQ(scored, n - 1);
  PerplexityOptions po;
  po.ctx = n;
  po.batch = 1;
  po.max_windows = 1;
  auto ppl = engine->Perplexity(text, po);
  ASSERT_TRUE(ppl.ok()) << ppl.status().ToString();
  EXPECT_NEAR(nll / scored, ppl->mean_nll, 1e-3);
}

TEST(EvalFidelityTest, BadInputIsNamed) {
  auto engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  FidelityConfig c;
  auto none = RunFidelity(*engine, Story(), c);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no method"), std::string::npos);
  c.pairs = {Preset("rkv", 32)};
  c.prompt_tokens = 50;  // "Hi" is a few tokens: nothing left to force
  auto shorty = RunFidelity(*engine, "Hi", c);
  ASSERT_FALSE(shorty.ok());
  EXPECT_NE(shorty.status().message().find("leaves none to force"), std::string::npos)
      << shorty.status().message();
  Request bad;
  bad.prompt = "Once";
  bad.forced_tokens = {5, 100000};
  auto g = engine->Generate(std::vector<Request>{bad});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("forced token 1 is 100000"), std::string::npos) << g.status().message();
}

}  // namespace
}  // namespace skipkv::eval
