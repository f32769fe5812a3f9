// Engine: option and request validation, and the generation loop's
// guarantees on the embedded stories260K model (tiny, loads in
// milliseconds): greedy ids match llama2.c's run.c, batching (ragged,
// padded, chunked prefill, limited concurrency) never changes a request's
// tokens, stop strings / callbacks / context limits end requests correctly,
// and bounded policies keep the cache inside budget + interval.
#include "engine/engine_internals.h"
#include "skipkv/engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace skipkv {
namespace {

std::unique_ptr<Engine> MakeEngine(EngineOptions o = {}) {
  if (o.threads == 0) o.threads = 2;
  auto e = Engine::Create(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

Request Greedy(const std::string& prompt, int n) {
  Request r;
  r.prompt = prompt;
  r.max_new_tokens = n;
  return r;
}

std::vector<GenerationResult> GenerateAll(Engine& e, const std::vector<Request>& reqs, const TokenCallback& cb = nullptr) {
  auto res = e.Generate(reqs, cb);
  EXPECT_TRUE(res.ok()) << res.status().ToString();
  return res.ok() ? std::move(res).value() : std::vector<GenerationResult>{};
}

// The greedy ids run.c produced from BOS (tests/data/stories260K, column 6
// of the argmax dump = the argmax at each position).
std::vector<int32_t> ReferenceGreedyIds() {
  std::ifstream in(std::string(SKIPKV_TEST_DATA_DIR) + "/stories260K/stories260K_bos_greedy.argmax.txt");
  std::vector<int32_t> ids;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ss(line);
    std::string w;
    std::vector<std::string> f;
    while (ss >> w) f.push_back(w);
    if (f.size() >= 6 && f[4] == "argmax") ids.push_back(std::stoi(f[5]));
  }
  return ids;
}

const std::vector<std::string> kPrompts = {"Once upon a time", "Lily and Tom were", "The big dog",
                                           "One day, a little bird flew"};

TEST(EngineOptionsTest, BadOptionsFailBeforeLoading) {
  EngineOptions o;
  o.n_ubatch = 0;
  EXPECT_EQ(Engine::Create(o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.n_ubatch = 64;
  o.n_batch = 32;
  EXPECT_EQ(Engine::Create(o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.kv.policy = "nope";
  auto st = Engine::Create(o).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("nope"), std::string::npos);
  o = {};
  o.kv.policy = "rkv";
  o.kv.budget = 8;
  o.kv.window = 8;
  EXPECT_EQ(Engine::Create(o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.model_path = "/no/such/model.gguf";
  st = Engine::Create(o).status();
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("/no/such/model.gguf"), std::string::npos);
  o = {};
  o.n_ctx = 1 << 20;  // beyond stories260K's 512
  EXPECT_EQ(Engine::Create(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(EngineRequestTest, ValidationNamesTheProblem) {
  EngineOptions o;
  o.n_ctx = 16;
  auto e = MakeEngine(o);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->info().name, "stories260K");
  EXPECT_EQ(e->info().context_length, 16);
  EXPECT_TRUE(e->ValidateRequest(Greedy("", 4)).ok());  // BOS alone is a prompt

  Request r = Greedy("hi", 0);
  EXPECT_NE(e->ValidateRequest(r).message().find("max_new_tokens"), std::string::npos);
  r = Greedy("hi", 4);
  r.sampling.temperature = -1;
  EXPECT_NE(e->ValidateRequest(r).message().find("temperature"), std::string::npos);
  r = Greedy("hi", 4);
  r.stop = {""};
  EXPECT_EQ(e->ValidateRequest(r).code(), StatusCode::kInvalidArgument);
  r = Greedy("", 4);
  r.prompt_tokens = {1, 600};
  EXPECT_NE(e->ValidateRequest(r).message().find("600"), std::string::npos);
  r = Greedy("Once upon a time there was a big dog and a little cat who were friends", 4);
  EXPECT_EQ(e->ValidateRequest(r).code(), StatusCode::kOutOfRange);

  // One bad request fails the whole call before any work, naming it.
  std::vector<Request> reqs = {Greedy("a", 4), Greedy("b", 0)};
  auto res = e->Generate(reqs);
  ASSERT_FALSE(res.ok());
  EXPECT_NE(res.status().message().find("request 1"), std::string::npos) << res.status().message();
}

TEST(EngineGenerateTest, GreedyFromBosMatchesLlama2cRunC) {
  auto e = MakeEngine();
  ASSERT_TRUE(e);
  const std::vector<int32_t> ref = ReferenceGreedyIds();
  ASSERT_GE(ref.size(), 60u);
  auto res = GenerateAll(*e, {Greedy("", static_cast<int>(ref.size()))});
  ASSERT_EQ(res.size(), 1u);
  EXPECT_EQ(res[0].prompt_tokens, std::vector<int32_t>{1});
  EXPECT_EQ(res[0].tokens, ref);
  EXPECT_EQ(res[0].finish, FinishReason::kLength);
  EXPECT_EQ(res[0].text.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << res[0].text;
  EXPECT_EQ(res[0].timings.decode_steps, static_cast<int64_t>(ref.size()) - 1);
  EXPECT_GT(res[0].kv.peak_live_bytes, 0u);
}

TEST(EngineGenerateTest, RaggedBatchGivesEachPromptsTokensAlone) {
  auto e = MakeEngine();
  ASSERT_TRUE(e);
  std::vector<Request> reqs;
  for (const auto& p : kPrompts) reqs.push_back(Greedy(p, 40));
  reqs[2].max_new_tokens = 7;  // finishes early while the others continue
  auto together = GenerateAll(*e, reqs);
  ASSERT_EQ(together.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto alone = GenerateAll(*e, {reqs[i]});
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_EQ(together[i].index, i);
    EXPECT_EQ(together[i].tokens, alone[0].tokens) << "request " << i;
    EXPECT_EQ(together[i].text, alone[0].text);
  }
  EXPECT_EQ(together[2].tokens.size(), 7u);
}

TEST(EngineGenerateTest, SeededSamplingIndependentOfBatchAndConcurrency) {
  std::vector<Request> reqs;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    Request r = Greedy(kPrompts[i], 30);
    r.sampling.temperature = 0.9f;
    r.sampling.top_p = 0.95f;
    r.sampling.seed = 100 + i;
    reqs.push_back(r);
  }
  auto all = MakeEngine();
  EngineOptions one;
  one.batch_size = 1;  // one active sequence at a time
  one.n_ubatch = 3;    // prompts prefilled in chunks of 3
  auto serial = MakeEngine(one);
  ASSERT_TRUE(all && serial);
  auto a = GenerateAll(*all, reqs);
  auto b = GenerateAll(*serial, reqs);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].tokens, b[i].tokens) << i;
  EXPECT_NE(a[0].tokens, a[1].tokens);
}

TEST(EngineGenerateTest, PaddedFullEqualsRaggedAndRecordsPads) {
  std::vector<Request> reqs;
  for (const auto& p : kPrompts) reqs.push_back(Greedy(p, 30));
  auto ragged = MakeEngine();
  EngineOptions po;
  po.kv.pad_policy = PadPolicy::kPadded;
  po.batch_size = 3;
  po.n_ubatch = 4;  // chunks cross the pad/prompt boundary
  auto padded = MakeEngine(po);
  ASSERT_TRUE(ragged && padded);
  auto r = GenerateAll(*ragged, reqs);
  auto p = GenerateAll(*padded, reqs);
  ASSERT_EQ(r.size(), p.size());
  int64_t total_pad = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].tokens, p[i].tokens) << i;
    total_pad += p[i].kv.pad_len;
    EXPECT_EQ(r[i].kv.pad_len, 0);
  }
  EXPECT_GT(total_pad, 0);  // prompt lengths differ, so some rows were padded
  // Length-sorted grouping: two batches, the shortest three prompts together.
  int64_t max_batch = 0;
  for (const auto& x : p) max_batch = std::max(max_batch, x.batch);
  EXPECT_EQ(max_batch, 1);
}

TEST(EngineGenerateTest, PaddedRejectsPadsThatFillTheBudget) {
  EngineOptions po;
  po.kv.policy = "rkv";
  po.kv.budget = 16;
  po.kv.window = 8;
  po.kv.interval = 8;
  po.kv.pad_policy = PadPolicy::kPadded;
  auto e = MakeEngine(po);
  ASSERT_TRUE(e);
  std::vector<Request> reqs = {Greedy("", 5),
                               Greedy("Once upon a time there was a big dog and a little cat who", 5)};
  auto res = e->Generate(reqs);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(res.status().message().find("padded batch 0"), std::string::npos) << res.status().message();
}

TEST(EngineGenerateTest, BoundedPolicyKeepsCacheWithinBudgetPlusInterval) {
  for (const char* policy : {"streaming", "h2o", "snapkv", "rkv"}) {
    EngineOptions o;
    o.kv.policy = policy;
    o.kv.budget = 32;
    o.kv.window = 8;
    o.kv.interval = 16;
    auto e = MakeEngine(o);
    ASSERT_TRUE(e);
    auto res = GenerateAll(*e, {Greedy("Once upon a time", 120), Greedy("", 90)});
    ASSERT_EQ(res.size(), 2u);
    for (const auto& r : res) {
      EXPECT_EQ(r.tokens.size(), r.index == 0 ? 120u : 90u) << policy;
      EXPECT_LE(r.kv.peak_slots, 32 + 16) << policy;
      EXPECT_GT(r.kv.compressions, 0) << policy;
      EXPECT_GT(r.kv.slots_evicted, 0) << policy;
      EXPECT_LE(r.kv.final_slots, 32 + 16) << policy;
    }
  }
}

TEST(EngineGenerateTest, StopStringCutsTextAndStreamingMatchesResult) {
  auto e = MakeEngine();
  ASSERT_TRUE(e);
  Request r = Greedy("", 200);
  r.stop = {"park"};
  std::string streamed;
  int events = 0;
  auto res = GenerateAll(*e, {r}, [&](const TokenEvent& ev) {
    streamed += ev.text;
    ++events;
    return true;
  });
  ASSERT_EQ(res.size(), 1u);
  EXPECT_EQ(res[0].finish, FinishReason::kStopString);
  EXPECT_EQ(res[0].stop_string, "park");
  EXPECT_EQ(res[0].text, "Once upon a time, there was a little girl named Lily. She loved to play outside in the ");
  EXPECT_EQ(streamed, res[0].text);
  EXPECT_EQ(events, static_cast<int>(res[0].tokens.size()));
}

TEST(EngineGenerateTest, CallbackCanCancelOneRequest) {
  auto e = MakeEngine();
  ASSERT_TRUE(e);
  std::vector<Request> reqs = {Greedy("Once upon a time", 30), Greedy("The big dog", 30)};
  int seen0 = 0;
  auto res = GenerateAll(*e, reqs, [&](const TokenEvent& ev) { return ev.index != 0 || ++seen0 < 3; });
  ASSERT_EQ(res.size(), 2u);
  EXPECT_EQ(res[0].finish, FinishReason::kCancelled);
  EXPECT_EQ(res[0].tokens.size(), 3u);
  EXPECT_EQ(res[1].finish, FinishReason::kLength);
  EXPECT_EQ(res[1].tokens.size(), 30u);
}

// on_finished fires once per request as soon as it ends — while the longer
// requests of the same call are still generating — with the result Generate
// returns; in ragged and in padded mode (one padded batch of three).
TEST(EngineGenerateTest, FinishedCallbackFiresAsEachRequestEnds) {
  for (const bool padded : {false, true}) {
    SCOPED_TRACE(padded ? "padded" : "ragged");
    EngineOptions o;
    if (padded) {
      o.kv.pad_policy = PadPolicy::kPadded;
      o.batch_size = 3;
    }
    auto e = MakeEngine(o);
    ASSERT_TRUE(e);
    const std::vector<Request> reqs = {Greedy("Once upon a time", 20), Greedy("The big dog", 4),
                                       Greedy("Lily and Tom were", 11)};
    std::vector<size_t> tokens_seen(reqs.size(), 0);
    std::vector<size_t> order;
    std::vector<std::vector<size_t>> seen_at_finish;  // tokens of every request when one finished
    std::vector<GenerationResult> finished(reqs.size());
    auto res = e->Generate(
        reqs,
        [&](const TokenEvent& ev) {
          if (ev.token >= 0) ++tokens_seen[ev.index];
          return true;
        },
        [&](const GenerationResult& g) {
          order.push_back(g.index);
          seen_at_finish.push_back(tokens_seen);
          finished[g.index] = g;
        });
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    ASSERT_EQ(order, (std::vector<size_t>{1, 2, 0}));  // shortest first
    // When request 1 (4 tokens) ended, the others had produced about as many
    // tokens as it, far from their limits.
    EXPECT_EQ(seen_at_finish[0][1], 4u);
    EXPECT_LE(seen_at_finish[0][0], 5u);
    EXPECT_LE(seen_at_finish[0][2], 5u);
    EXPECT_LE(seen_at_finish[1][0], 12u);
    EXPECT_EQ(seen_at_finish[2][0], 20u);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(finished[i].index, i);
      EXPECT_EQ(finished[i].tokens, (*res)[i].tokens);
      EXPECT_EQ(finished[i].text, (*res)[i].text);
      EXPECT_EQ(finished[i].finish, FinishReason::kLength);
      EXPECT_EQ(finished[i].kv.peak_slots, (*res)[i].kv.peak_slots);
    }
  }
}

TEST(EngineGenerateTest, StopsAtTheContextEnd) {
  EngineOptions o;
  o.n_ctx = 20;
  auto e = MakeEngine(o);
  ASSERT_TRUE(e);
  auto res = GenerateAll(*e, {Greedy("Once upon a time", 100)});  // 5 prompt tokens
  ASSERT_EQ(res.size(), 1u);
  EXPECT_EQ(res[0].finish, FinishReason::kContext);
  // Positions 5..19 take 15 fed tokens; the 16th sampled one has no position.
  EXPECT_EQ(res[0].tokens.size(), 16u);
}

TEST(EnginePerplexityTest, OwnGreedyTextIsLikelyAndBatchingDoesNotMatter) {
  auto e = MakeEngine();
  ASSERT_TRUE(e);
  auto story = GenerateAll(*e, {Greedy("", 256)});
  ASSERT_EQ(story.size(), 1u);
  PerplexityOptions po;
  po.ctx = 64;
  po.batch = 1;
  auto a = e->Perplexity(story[0].text, po);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  po.batch = 3;
  int calls = 0;
  auto b = e->Perplexity(story[0].text, po, [&](const PerplexityProgress& p) {
    ++calls;
    EXPECT_LE(p.windows_done, p.windows_total);
  });
  ASSERT_TRUE(b.ok());
  EXPECT_GE(a->windows, 3);
  EXPECT_EQ(a->tokens_scored, a->windows * 63);
  EXPECT_NEAR(a->ppl, b->ppl, 1e-6 * a->ppl);
  EXPECT_EQ(calls, static_cast<int>((b->windows + 2) / 3));
  EXPECT_LT(a->ppl, 6.0);  // the model's own greedy text
  std::string noise_text;
  for (int i = 0; i < 6; ++i) noise_text += "zq xv jj kk qpz wvx zzq jkq xxv qqj vvz kzx qjv xzk zqj vxq jkz qxx zvk ";
  auto noise = e->Perplexity(noise_text, po);
  ASSERT_TRUE(noise.ok());
  EXPECT_GT(noise->ppl, 5 * a->ppl);

  po.ctx = 1;
  EXPECT_EQ(e->Perplexity(story[0].text, po).status().code(), StatusCode::kInvalidArgument);
  po.ctx = 400;
  EXPECT_EQ(e->Perplexity("too short", po).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace skipkv

namespace skipkv {
namespace {

// Records what the loop tells a request's hooks, and optionally steers.
class RecordingHooks : public SequenceHooks {
 public:
  struct Log {
    std::vector<int32_t> hidden_gen_pos;  // gen_pos of every final-hidden row, in order
    std::vector<int32_t> tokens;          // OnToken
    std::string text;                     // OnToken's pieces, concatenated
    int64_t scheduled_compressions = 0;
    int64_t forwards = 0;
    int64_t pad_len = -1;
    int d_model = 0;
    bool rows_finite = true;
  };
  RecordingHooks(Log* log, int steer_layer, float steer_value)
      : log_(log), steer_layer_(steer_layer), steer_value_(steer_value) {}

  void OnStart(const SequenceStart& s) override {
    log_->pad_len = s.pad_len;
    log_->d_model = s.d_model;
    EXPECT_NE(s.compressor, nullptr);
  }
  void BeforeForward(const SequenceStep& step) override {
    ++log_->forwards;
    if (step.kind == ForwardKind::kDecode) log_->scheduled_compressions += step.compresses;
    EXPECT_LT(step.l_before, step.l_after);
  }
  bool WantsResidual(int layer) const override { return layer == steer_layer_; }
  void OnResidual(int layer, std::span<const BatchToken> rows, float* hidden) override {
    for (size_t i = 0; i < rows.size(); ++i) {
      for (int j = 0; j < log_->d_model; ++j) hidden[i * log_->d_model + j] += steer_value_;
    }
  }
  bool WantsFinalHidden() const override { return true; }
  void OnFinalHidden(std::span<const BatchToken> rows, const float* hidden) override {
    for (size_t i = 0; i < rows.size(); ++i) {
      log_->hidden_gen_pos.push_back(rows[i].gen_pos);
      for (int j = 0; j < log_->d_model; ++j) log_->rows_finite &= std::isfinite(hidden[i * log_->d_model + j]);
    }
  }
  void OnToken(int32_t token, std::string_view text) override {
    log_->tokens.push_back(token);
    log_->text += text;
  }
  std::vector<std::pair<std::string, double>> Diagnostics() const override {
    return {{"test.forwards", static_cast<double>(log_->forwards)}};
  }

 private:
  Log* log_;
  int steer_layer_;
  float steer_value_;
};

TEST(EngineHooksTest, HooksSeeEveryRowAndTheCompressionSchedule) {
  EngineOptions o;
  o.kv.policy = "rkv";
  o.kv.budget = 24;
  o.kv.window = 8;
  o.kv.interval = 8;
  o.n_ubatch = 3;  // a chunked prefill
  auto e = MakeEngine(o);
  ASSERT_TRUE(e);
  std::vector<RecordingHooks::Log> logs(2);
  EngineInternals::SetSequenceHooks(*e, [&](size_t index, const Request&) -> std::unique_ptr<SequenceHooks> {
    if (index == 1) return nullptr;  // request 1 runs without hooks
    return std::make_unique<RecordingHooks>(&logs[index], -1, 0.f);
  });
  auto res = GenerateAll(*e, {Greedy("Once upon a time", 60), Greedy("The big dog", 60)});
  ASSERT_EQ(res.size(), 2u);
  const RecordingHooks::Log& log = logs[0];
  EXPECT_EQ(log.pad_len, 0);
  EXPECT_EQ(log.d_model, 64);
  EXPECT_TRUE(log.rows_finite);
  // Every fed token's hidden row once, in gen_pos order: 5 prompt + 59 fed.
  ASSERT_EQ(log.hidden_gen_pos.size(), 5u + 59u);
  for (size_t i = 0; i < log.hidden_gen_pos.size(); ++i) EXPECT_EQ(log.hidden_gen_pos[i], static_cast<int32_t>(i));
  EXPECT_EQ(log.tokens, res[0].tokens);
  EXPECT_EQ(log.text, res[0].text);  // the pieces are the streamed text (no stop strings here)
  EXPECT_EQ(log.forwards, 2 + 59);  // prefill chunks of 3 (3 + 2), then one per fed token
  // Decode forwards start at l0 = 5..63; R-KV schedules those with l0 % 8 == 0
  // (8, 16, ..., 56); the cache reaches B = 24 slots from l0 = 24 on, so
  // five of them compress.
  EXPECT_EQ(log.scheduled_compressions, 7);
  EXPECT_EQ(res[0].kv.compressions, 5);
  ASSERT_EQ(res[0].diagnostics.size(), 1u);
  EXPECT_EQ(res[0].diagnostics[0].second, 61.0);
  EXPECT_TRUE(res[1].diagnostics.empty());
  EXPECT_TRUE(logs[1].hidden_gen_pos.empty());
}

TEST(EngineHooksTest, ResidualSteeringChangesOnlyTheSteeredRequest) {
  auto e = MakeEngine();
  ASSERT_TRUE(e);
  const std::vector<Request> reqs = {Greedy("Once upon a time", 30), Greedy("The big dog", 30)};
  auto base = GenerateAll(*e, reqs);
  std::vector<RecordingHooks::Log> logs(2);
  for (float value : {0.f, 3.f}) {
    EngineInternals::SetSequenceHooks(*e, [&, value](size_t index, const Request&) -> std::unique_ptr<SequenceHooks> {
      return std::make_unique<RecordingHooks>(&logs[index], 2, index == 0 ? value : 0.f);
    });
    auto steered = GenerateAll(*e, reqs);
    ASSERT_EQ(steered.size(), 2u);
    if (value == 0.f) {
      EXPECT_EQ(steered[0].tokens, base[0].tokens);  // a zero vector is a no-op
    } else {
      EXPECT_NE(steered[0].tokens, base[0].tokens);
    }
    EXPECT_EQ(steered[1].tokens, base[1].tokens);
  }
  EngineInternals::SetSequenceHooks(*e, nullptr);
  EXPECT_EQ(GenerateAll(*e, reqs)[0].tokens, base[0].tokens);
}

TEST(EngineHooksTest, PaddedModeReportsPadRowsAndPadLength) {
  EngineOptions o;
  o.kv.pad_policy = PadPolicy::kPadded;
  auto e = MakeEngine(o);
  ASSERT_TRUE(e);
  std::vector<RecordingHooks::Log> logs(2);
  EngineInternals::SetSequenceHooks(*e, [&](size_t index, const Request&) {
    return std::make_unique<RecordingHooks>(&logs[index], -1, 0.f);
  });
  auto res = GenerateAll(*e, {Greedy("Once upon a time", 10), Greedy("The", 10)});
  ASSERT_EQ(res.size(), 2u);
  const int64_t pad = logs[1].pad_len;
  EXPECT_GT(pad, 0);
  EXPECT_EQ(pad, res[1].kv.pad_len);
  EXPECT_EQ(logs[0].pad_len, 0);
  // Pads take gen_pos 0..pad−1, so both rows have the same padded stream.
  EXPECT_EQ(logs[0].hidden_gen_pos, logs[1].hidden_gen_pos);
}

}  // namespace
}  // namespace skipkv
