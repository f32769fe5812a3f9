// Methods per request on the embedded stories260K model: a batch mixing full,
// rkv and skipkv rows gives every row exactly what it gives alone (ragged),
// or in a batch of its own method with the same pads (padded); skipkv
// installs its own sentence hooks and reports them; with sentence scoring
// off it is rkv token for token; results name the method that ran; bad
// methods are refused before any work, naming the request and the field.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "skipkv/engine.h"
#include "skipkv/method.h"

namespace skipkv {
namespace {

std::unique_ptr<Engine> MakeEngine(EngineOptions o = {}) {
  o.threads = 2;
  auto e = Engine::Create(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

MethodConfig Method(const std::string& policy, const std::string& name = "") {
  MethodConfig m;
  m.name = name;
  m.kv.policy = policy;
  m.kv.budget = 24;
  m.kv.window = 4;
  m.kv.interval = 8;
  // stories260K writes short sentences on one line: split at ".".
  m.kv.skipkv.delimiters = {"."};
  return m;
}

Request Greedy(const std::string& prompt, int n, std::optional<MethodConfig> method) {
  Request r;
  r.prompt = prompt;
  r.max_new_tokens = n;
  r.method = std::move(method);
  return r;
}

std::vector<GenerationResult> Generate(Engine& e, const std::vector<Request>& reqs) {
  auto res = e.Generate(reqs);
  EXPECT_TRUE(res.ok()) << res.status().ToString();
  return res.ok() ? std::move(res).value() : std::vector<GenerationResult>{};
}

double Diag(const GenerationResult& r, const std::string& key) {
  for (const auto& [k, v] : r.diagnostics)
    if (k == key) return v;
  ADD_FAILURE() << "no diagnostic " << key;
  return -1;
}

// Diagnostics without wall-clock timings (keys ending in "_ms").
std::vector<std::pair<std::string, double>> Counters(const GenerationResult& r) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [k, v] : r.diagnostics)
    if (k.size() < 3 || k.compare(k.size() - 3, 3, "_ms") != 0) out.push_back({k, v});
  return out;
}

void ExpectSameRun(const GenerationResult& a, const GenerationResult& b, const std::string& what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  EXPECT_EQ(a.kv.compressions, b.kv.compressions) << what;
  EXPECT_EQ(a.kv.slots_evicted, b.kv.slots_evicted) << what;
  EXPECT_EQ(a.kv.peak_slots, b.kv.peak_slots) << what;
  EXPECT_EQ(a.kv.penalized_evicted_per_compression, b.kv.penalized_evicted_per_compression) << what;
  EXPECT_EQ(Counters(a), Counters(b)) << what;
  EXPECT_EQ(MethodJson(a.method), MethodJson(b.method)) << what;
}

const std::vector<std::string> kPrompts = {"Once upon a time", "Lily and Tom were", "The big dog",
                                           "One day, a little bird flew", "Tim had a box"};

std::vector<Request> MixedBatch() {
  const std::vector<std::optional<MethodConfig>> methods = {
      std::nullopt, Method("full"), Method("rkv"), Method("skipkv"), Method("skipkv", "skipkv-tau0.5")};
  std::vector<Request> reqs;
  for (size_t i = 0; i < kPrompts.size(); ++i) reqs.push_back(Greedy(kPrompts[i], 120, methods[i]));
  reqs[4].method->kv.skipkv.sim_threshold = 0.5f;  // plenty of redundant sentences
  return reqs;
}

TEST(EngineMethodsTest, MixedBatchEqualsEachRowAlone) {
  EngineOptions o;  // the engine's method: snapkv
  o.kv.policy = "snapkv";
  o.kv.budget = 32;
  o.kv.window = 4;
  o.kv.interval = 8;
  o.n_ubatch = 3;
  auto e = MakeEngine(o);
  ASSERT_TRUE(e);
  const auto reqs = MixedBatch();
  const auto together = Generate(*e, reqs);
  ASSERT_EQ(together.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto alone = Generate(*e, {reqs[i]});
    ASSERT_EQ(alone.size(), 1u);
    ExpectSameRun(together[i], alone[0], "request " + std::to_string(i));
  }
  EXPECT_EQ(together[0].method.kv.policy, "snapkv");
  EXPECT_EQ(together[0].method.name, "snapkv");
  EXPECT_EQ(together[1].method.kv.policy, "full");
  EXPECT_EQ(together[1].kv.compressions, 0);
  EXPECT_EQ(together[3].method.name, "skipkv");
  EXPECT_EQ(together[4].method.name, "skipkv-tau0.5");
  for (size_t i : {0, 2, 3, 4}) EXPECT_GT(together[i].kv.compressions, 5) << i;
  // Only skipkv rows carry the sentence hooks and the penalty report.
  for (size_t i : {0, 1, 2}) {
    EXPECT_TRUE(together[i].diagnostics.empty()) << i;
    EXPECT_TRUE(together[i].kv.penalized_evicted_per_compression.empty()) << i;
  }
  for (size_t i : {3, 4}) {
    EXPECT_GT(Diag(together[i], "skipkv.sentences"), 3) << i;
    EXPECT_EQ(together[i].kv.penalized_evicted_per_compression.size(),
              static_cast<size_t>(together[i].kv.compressions))
        << i;
  }
  // τ = 0.5 marks sentences redundant, and their slots are evicted.
  EXPECT_GT(Diag(together[4], "skipkv.redundant_sentences"), 0);
  EXPECT_GT(together[4].kv.penalized_evicted, 0);
  EXPECT_NE(together[4].tokens, Generate(*e, {Greedy(kPrompts[4], 120, Method("rkv"))})[0].tokens)
      << "evicting redundant sentences changes what the model sees";
}

TEST(EngineMethodsTest, PaddedMixedBatchEqualsABatchOfEachMethod) {
  EngineOptions o;
  o.kv.pad_policy = PadPolicy::kPadded;
  auto e = MakeEngine(o);
  ASSERT_TRUE(e);
  const auto reqs = MixedBatch();
  const auto mixed = Generate(*e, reqs);
  ASSERT_EQ(mixed.size(), reqs.size());
  int64_t pads = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    // The same prompts (so the same pads) all run with request i's method.
    std::vector<Request> uniform = reqs;
    for (auto& r : uniform) r.method = reqs[i].method;
    const auto same = Generate(*e, uniform);
    ASSERT_EQ(same.size(), reqs.size());
    ExpectSameRun(mixed[i], same[i], "request " + std::to_string(i));
    EXPECT_EQ(mixed[i].method.kv.pad_policy, PadPolicy::kPadded) << "the pad policy is the engine's";
    pads += mixed[i].kv.pad_len;
  }
  EXPECT_GT(pads, 0);
}

TEST(EngineMethodsTest, NoSentenceScoringIsRkvTokenForToken) {
  auto e = MakeEngine();
  ASSERT_TRUE(e);
  MethodConfig ablation = Method("skipkv");
  ablation.kv.skipkv.sentence_scoring = false;
  ablation.kv.skipkv.sim_threshold = 0.5f;  // T fills up, but is not applied
  std::vector<Request> reqs;
  for (const auto& p : kPrompts) reqs.push_back(Greedy(p, 120, ablation));
  for (const auto& p : kPrompts) reqs.push_back(Greedy(p, 120, Method("rkv")));
  const auto res = Generate(*e, reqs);
  ASSERT_EQ(res.size(), 2 * kPrompts.size());
  double redundant = 0;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    EXPECT_EQ(res[i].tokens, res[kPrompts.size() + i].tokens) << kPrompts[i];
    EXPECT_EQ(res[i].kv.slots_evicted, res[kPrompts.size() + i].kv.slots_evicted);
    EXPECT_TRUE(res[i].kv.penalized_evicted_per_compression.empty());
    redundant += Diag(res[i], "skipkv.redundant_sentences");
  }
  EXPECT_GT(redundant, 0) << "the tracker still computes T for the diagnostics";
}

TEST(EngineMethodsTest, BadMethodsAreRefusedNamingRequestAndField) {
  auto e = MakeEngine();
  ASSERT_TRUE(e);
  MethodConfig bad_tau = Method("skipkv");
  bad_tau.kv.skipkv.sim_threshold = 1.5f;
  MethodConfig bad_k = Method("skipkv");
  bad_k.kv.skipkv.max_sentences = -1;
  MethodConfig bad_budget = Method("rkv");
  bad_budget.kv.budget = 2;
  for (const auto& [method, field] : std::vector<std::pair<MethodConfig, std::string>>{
           {bad_tau, "sim_threshold"}, {bad_k, "max_sentences (-1)"}, {bad_budget, "budget (2)"}}) {
    const std::vector<Request> reqs = {Greedy("Once", 5, std::nullopt), Greedy("The", 5, method)};
    auto res = e->Generate(reqs);
    ASSERT_FALSE(res.ok()) << field;
    EXPECT_EQ(res.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(res.status().message().find("request 1"), std::string::npos) << res.status().message();
    EXPECT_NE(res.status().message().find(field), std::string::npos) << res.status().message();
    EXPECT_FALSE(e->ValidateRequest(reqs[1]).ok());
  }
  // The engine's own skipkv configuration is checked at creation.
  EngineOptions o;
  o.kv = Method("skipkv").kv;
  o.kv.skipkv.sim_threshold = 0.f;
  EXPECT_EQ(Engine::Create(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(EngineMethodsTest, ProvenanceListsTheMethodFields) {
  MethodConfig m = Method("skipkv", "mine");
  m.kv.skipkv.delimiters = {".\n", "\"q\""};
  const std::string json = MethodJson(m);
  EXPECT_NE(json.find("\"name\":\"mine\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"policy\":\"skipkv\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"budget\":24"), std::string::npos) << json;
  EXPECT_NE(json.find("\"skipkv.sim_threshold\":0.95"), std::string::npos) << json;
  EXPECT_NE(json.find("\"skipkv.delimiters\":[\".\\n\",\"\\\"q\\\"\"]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"skipkv.sentence_scoring\":true"), std::string::npos) << json;
  EXPECT_EQ(MethodLabel(Method("rkv")), "rkv");
  const auto full = MethodFields(Method("full"));
  ASSERT_EQ(full.size(), 3u) << "full has no budget fields";
}

}  // namespace
}  // namespace skipkv
