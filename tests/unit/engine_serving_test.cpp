// ServingEngine on the embedded stories260K model: requests submitted while
// others decode (mixed prefill + decode steps) give the tokens each request
// gives alone; admission by KV memory keeps the allocated K/V under the
// limit; Cancel frees a request's cache at once; refused requests name why.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "skipkv/server_engine.h"

namespace skipkv {
namespace {

std::unique_ptr<Engine> MakeEngine(int n_ubatch = 512) {
  EngineOptions o;
  o.threads = 2;
  o.n_ubatch = n_ubatch;
  auto e = Engine::Create(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

std::unique_ptr<ServingEngine> MakeServing(const ServingOptions& so, int n_ubatch = 512) {
  auto s = ServingEngine::Create(MakeEngine(n_ubatch), so);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

MethodConfig Method(const std::string& policy, int64_t budget) {
  MethodConfig m;
  m.kv.policy = policy;
  if (policy != "full") {
    m.kv.budget = budget;
    m.kv.window = 4;
    m.kv.interval = 8;
  }
  return m;
}

std::vector<Request> MixedRequests() {
  const char* prompts[] = {
      "Once upon a time",       "The cat sat", "Lily and Ben went to the park", "One day",
      "Tom had a big red ball", "The sun"};
  const char* policies[] = {"full", "rkv", "streaming", "snapkv", "h2o", "skipkv"};
  std::vector<Request> out;
  for (int i = 0; i < 6; ++i) {
    Request r;
    r.prompt = prompts[i];
    r.max_new_tokens = 40 + 7 * i;
    r.ignore_eos = true;
    r.method = Method(policies[i], 12 + 2 * i);
    out.push_back(r);
  }
  return out;
}

TEST(ServingEngineTest, StaggeredMixedMethodsEqualEachRequestAlone) {
  const std::vector<Request> reqs = MixedRequests();
  // The oracle: each request generated alone by Engine::Generate.
  auto alone_engine = MakeEngine();
  std::vector<std::vector<int32_t>> alone;
  for (const Request& r : reqs) {
    auto res = alone_engine->Generate(std::span<const Request>(&r, 1));
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    alone.push_back((*res)[0].tokens);
  }
  // Served: small prefill chunks so prompts are fed across several mixed
  // steps; a new request arrives every 5 steps while others decode.
  ServingOptions so;
  auto s = MakeServing(so, /*n_ubatch=*/3);
  std::map<RequestId, GenerationResult> results;
  std::map<RequestId, std::string> streamed;
  std::map<RequestId, size_t> index_of;
  size_t next = 0;
  for (int step = 0; step < 100000; ++step) {
    if (step % 5 == 0 && next < reqs.size()) {
      RequestCallbacks cb;
      cb.on_token = [&streamed](const TokenEvent& ev) {
        streamed[ev.index] += std::string(ev.text);
        return true;
      };
      cb.on_done = [&results](const Status& st, GenerationResult&& r) {
        EXPECT_TRUE(st.ok()) << st.ToString();
        results[r.index] = std::move(r);
      };
      auto id = s->Submit(reqs[next], cb);
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      index_of[*id] = next++;
    }
    auto ran = s->Step();
    ASSERT_TRUE(ran.ok()) << ran.status().ToString();
    if (!*ran && next == reqs.size()) break;
  }
  ASSERT_EQ(results.size(), reqs.size());
  int compressing = 0;
  for (const auto& [id, r] : results) {
    const size_t i = index_of[id];
    EXPECT_EQ(r.tokens, alone[i]) << "request " << i << " (" << MethodLabel(r.method) << ")";
    EXPECT_EQ(streamed[id], r.text) << "request " << i;
    if (r.kv.compressions > 0) ++compressing;
  }
  EXPECT_GE(compressing, 4);  // the evicting methods really evicted
  const ServingStats st = s->stats();
  EXPECT_EQ(st.submitted, 6);
  EXPECT_EQ(st.completed, 6);
  EXPECT_EQ(st.active, 0);
  EXPECT_EQ(st.kv_allocated_bytes, 0u);
  EXPECT_GT(st.compressions, 0);
}

TEST(ServingEngineTest, KvMemoryLimitBoundsTheAllocationAndEveryRequestFinishes) {
  const std::vector<Request> reqs = MixedRequests();
  // The limit: the two largest worst cases, so at most a few run at once.
  auto probe = MakeServing({});
  std::vector<size_t> worst;
  for (const Request& r : reqs) {
    auto w = probe->WorstCaseKvBytes(r);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    worst.push_back(*w);
  }
  std::vector<size_t> sorted = worst;
  std::sort(sorted.rbegin(), sorted.rend());
  ServingOptions so;
  so.kv_memory_bytes = sorted[0] + sorted[1];
  auto s = MakeServing(so);
  std::map<RequestId, GenerationResult> results;
  size_t max_active = 0;
  for (const Request& r : reqs) {
    RequestCallbacks cb;
    cb.on_done = [&results](const Status& st, GenerationResult&& g) { results[g.index] = std::move(g); };
    ASSERT_TRUE(s->Submit(r, cb).ok());
  }
  for (int guard = 0; guard < 100000; ++guard) {
    auto ran = s->Step();
    ASSERT_TRUE(ran.ok());
    const ServingStats st = s->stats();
    EXPECT_LE(st.kv_reserved_bytes, so.kv_memory_bytes);
    EXPECT_LE(st.kv_allocated_bytes, st.kv_reserved_bytes);  // caches never outgrow their reservation
    max_active = std::max<size_t>(max_active, st.active);
    if (!*ran) break;
  }
  EXPECT_EQ(results.size(), reqs.size());
  const ServingStats st = s->stats();
  EXPECT_LE(st.kv_peak_allocated_bytes, so.kv_memory_bytes);
  EXPECT_GT(st.kv_peak_allocated_bytes, 0u);
  EXPECT_LT(max_active, reqs.size());  // the limit really held some back
  EXPECT_GE(max_active, 2u);
}

TEST(ServingEngineTest, CancelFreesTheCacheAtOnce) {
  auto s = MakeServing({});
  Request r;
  r.prompt = "Once upon a time";
  r.max_new_tokens = 400;
  r.ignore_eos = true;
  bool done = false;
  FinishReason why = FinishReason::kLength;
  RequestCallbacks cb;
  cb.on_done = [&](const Status& st, GenerationResult&& g) {
    done = true;
    why = g.finish;
  };
  auto id = s->Submit(r, cb);
  ASSERT_TRUE(id.ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s->Step().ok());
  EXPECT_GT(s->stats().kv_allocated_bytes, 0u);
  EXPECT_EQ(s->stats().active, 1);
  EXPECT_TRUE(s->Cancel(*id));
  EXPECT_TRUE(done);
  EXPECT_EQ(why, FinishReason::kCancelled);
  EXPECT_EQ(s->stats().kv_allocated_bytes, 0u);
  EXPECT_EQ(s->stats().active, 0);
  EXPECT_EQ(s->stats().cancelled, 1);
  EXPECT_FALSE(s->Cancel(*id));  // already done
  // A callback returning false cancels too.
  RequestCallbacks stop_cb;
  int tokens = 0;
  stop_cb.on_token = [&](const TokenEvent&) { return ++tokens < 3; };
  stop_cb.on_done = [&](const Status&, GenerationResult&& g) { why = g.finish; };
  ASSERT_TRUE(s->Submit(r, stop_cb).ok());
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(s->Step().ok());
  EXPECT_EQ(tokens, 3);
  EXPECT_EQ(why, FinishReason::kCancelled);
}

TEST(ServingEngineTest, RefusedRequestsNameTheProblemAndQueueNothing) {
  Request ok;
  ok.prompt = "Once upon a time";
  ok.max_new_tokens = 100;
  auto probe = MakeServing({});
  auto w = probe->WorstCaseKvBytes(ok);
  ASSERT_TRUE(w.ok());
  ServingOptions so;
  so.kv_memory_bytes = *w - 1;  // one byte short
  auto s = MakeServing(so);
  auto id = s->Submit(ok, {});
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(id.status().message().find("KV memory limit"), std::string::npos) << id.status().message();
  EXPECT_NE(id.status().message().find("max_tokens <= 99 would fit"), std::string::npos)
      << id.status().message();
  Request bad = ok;
  bad.max_new_tokens = 0;
  EXPECT_EQ(s->Submit(bad, {}).status().code(), StatusCode::kInvalidArgument);
  bad = ok;
  bad.method = Method("rkv", 2);  // budget below the window
  EXPECT_EQ(s->Submit(bad, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->stats().submitted, 0);
  EXPECT_EQ(s->stats().waiting, 0);
  // The FullKV worst case is prompt + max_new_tokens slots.
  Request longer = ok;
  longer.max_new_tokens = 200;
  auto w2 = probe->WorstCaseKvBytes(longer);
  ASSERT_TRUE(w2.ok());
  const ModelInfo& info = probe->engine().info();
  const size_t per_slot =
      static_cast<size_t>(info.n_layers) * info.n_kv_heads * info.head_dim * 2 * 2;  // K+V, f16
  EXPECT_EQ(*w2 - *w, 100 * per_slot);
}

}  // namespace
}  // namespace skipkv
