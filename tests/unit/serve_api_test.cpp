// The server's request parsing and validation (untrusted JSON), the
// conversion to engine requests (method presets from the "kv" extension),
// OpenAI-shaped errors and responses, Prometheus rendering and memory sizes.
// No model and no sockets.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "serve/api_convert.h"
#include "serve/api_request.h"
#include "serve/api_response.h"
#include "serve/metrics.h"
#include "serve/server.h"

namespace skipkv::serve {
namespace {

using json = nlohmann::json;

ParsedRequest MustParse(const std::string& body, Endpoint ep = Endpoint::kChat) {
  ParseOutcome o = ParseRequest(body, ep);
  EXPECT_TRUE(o.ok()) << o.error.message;
  return o.ok() ? *o.request : ParsedRequest{};
}

// The error of a body that must fail, with its param checked.
ApiError MustFail(const std::string& body, const std::string& param, Endpoint ep = Endpoint::kChat) {
  ParseOutcome o = ParseRequest(body, ep);
  EXPECT_FALSE(o.ok()) << body;
  EXPECT_EQ(o.error.param, param) << body << " -> " << o.error.message;
  EXPECT_EQ(o.error.http_status, 400) << body;
  return o.error;
}

TEST(ServeParseTest, ChatFieldsAreRead) {
  ParsedRequest p = MustParse(R"({"model":"m","messages":[{"role":"system","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"Hi "},{"type":"text","text":"there"}]}],
      "max_tokens":12,"temperature":0,"top_p":0.5,"seed":7,"stop":["\n","END"],"stream":true,
      "stream_options":{"include_usage":true},"kv":{"policy":"rkv","budget":64,"window":8,"sim_threshold":0.9,
      "pss_include_prompt":true},"unknown_field":[1,2]})");
  EXPECT_EQ(p.model, "m");
  ASSERT_EQ(p.messages.size(), 2u);
  EXPECT_EQ(p.messages[0], (std::pair<std::string, std::string>{"system", "be brief"}));
  EXPECT_EQ(p.messages[1].second, "Hi there");
  EXPECT_EQ(p.max_tokens, 12);
  EXPECT_EQ(p.temperature, 0.0);
  EXPECT_EQ(p.top_p, 0.5);
  EXPECT_EQ(p.seed, 7u);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_TRUE(p.stream);
  EXPECT_TRUE(p.include_usage);
  ASSERT_TRUE(p.kv.has_value());
  EXPECT_EQ(p.kv->preset, "rkv");
  EXPECT_EQ(p.kv->budget, 64);
  EXPECT_EQ(p.kv->overrides,
            (std::vector<std::string>{"pss_include_prompt=true", "sim_threshold=0.9", "window=8"}));
}

TEST(ServeParseTest, CompletionPromptForms) {
  EXPECT_EQ(MustParse(R"({"prompt":"abc"})", Endpoint::kCompletions).prompt, "abc");
  EXPECT_EQ(MustParse(R"({"prompt":["abc"]})", Endpoint::kCompletions).prompt, "abc");
  EXPECT_EQ(MustParse(R"({"prompt":[1,2,3]})", Endpoint::kCompletions).prompt_tokens,
            (std::vector<int32_t>{1, 2, 3}));
  MustFail(R"({"prompt":["a","b"]})", "prompt", Endpoint::kCompletions);
  MustFail(R"({"prompt":[1,-2]})", "prompt[1]", Endpoint::kCompletions);
  MustFail(R"({"prompt":[]})", "prompt", Endpoint::kCompletions);
  MustFail(R"({"max_tokens":3})", "prompt", Endpoint::kCompletions);
  // Defaults: OpenAI's temperature 1, no stream.
  ParsedRequest p = MustParse(R"({"prompt":"x"})", Endpoint::kCompletions);
  EXPECT_EQ(p.temperature, 1.0);
  EXPECT_FALSE(p.stream);
  EXPECT_FALSE(p.max_tokens.has_value());
}

TEST(ServeParseTest, BadBodiesAndWrongTypesNameTheField) {
  EXPECT_NE(MustFail("{not json", "").message.find("not valid JSON"), std::string::npos);
  EXPECT_NE(MustFail("[1,2]", "").message.find("must be a JSON object"), std::string::npos);
  MustFail("", "");
  MustFail(R"({"messages":"hi"})", "messages");
  MustFail(R"({"messages":[]})", "messages");
  MustFail(R"({})", "messages");
  MustFail(R"({"messages":[{"role":"user"}]})", "messages[0].content");
  MustFail(R"({"messages":[{"role":"robot","content":"x"}]})", "messages[0].role");
  MustFail(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})",
           "messages[0].content[0].type");
  const std::string m = R"("messages":[{"role":"user","content":"x"}])";
  EXPECT_NE(MustFail("{" + m + R"(,"max_tokens":"12"})", "max_tokens")
                .message.find("must be an integer, got string"),
            std::string::npos);
  MustFail("{" + m + R"(,"max_tokens":0})", "max_tokens");
  MustFail("{" + m + R"(,"max_tokens":1.5})", "max_tokens");
  MustFail("{" + m + R"(,"max_tokens":99999999999})", "max_tokens");
  MustFail("{" + m + R"(,"temperature":"hot"})", "temperature");
  MustFail("{" + m + R"(,"temperature":2.5})", "temperature");
  MustFail("{" + m + R"(,"top_p":0})", "top_p");
  MustFail("{" + m + R"(,"seed":-1})", "seed");
  MustFail("{" + m + R"(,"stop":["a","b","c","d","e"]})", "stop");
  MustFail("{" + m + R"(,"stop":[""]})", "stop[0]");
  MustFail("{" + m + R"(,"stop":5})", "stop");
  MustFail("{" + m + R"(,"stream":"yes"})", "stream");
  MustFail("{" + m + R"(,"stream_options":{"include_usage":true}})", "stream_options");
  MustFail("{" + m + R"(,"n":2})", "n");
  MustFail("{" + m + R"(,"logprobs":true})", "logprobs");
  MustFail("{" + m + R"(,"presence_penalty":0.5})", "presence_penalty");
  MustFail("{" + m + R"(,"model":5})", "model");
  MustFail("{" + m + R"(,"kv":"rkv"})", "kv");
  MustFail("{" + m + R"(,"kv":{"budget":64}})", "kv.policy");
  MustFail("{" + m + R"(,"kv":{"policy":"rkv","budget":"64"}})", "kv.budget");
  MustFail("{" + m + R"(,"kv":{"policy":"rkv","budget":0}})", "kv.budget");
  MustFail("{" + m + R"(,"kv":{"policy":"rkv","budget":64,"window":"8"}})", "kv.window");
  // Accepted: explicit nulls and false for refused features.
  MustParse("{" + m + R"(,"logprobs":false,"stop":null,"max_tokens":null,"n":1})");
  // Over the size limit: 413.
  ParseOutcome big = ParseRequest(std::string(100, ' '), Endpoint::kChat, 50);
  EXPECT_EQ(big.error.http_status, 413);
}

TEST(ServeConvertTest, MethodsFromPresetsAndLimits) {
  ConvertLimits lim;
  lim.n_ctx = 512;
  lim.default_seed = 99;
  ParsedRequest p = MustParse(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":20,"temperature":0,
      "kv":{"policy":"skipkv","budget":64,"window":8,"interval":16,"sim_threshold":0.8}})");
  ConvertOutcome c = ToEngineRequest(p, lim);
  ASSERT_TRUE(c.ok()) << c.error.message;
  EXPECT_TRUE(c.request->chat);
  ASSERT_EQ(c.request->messages.size(), 1u);
  EXPECT_EQ(c.request->max_new_tokens, 20);
  EXPECT_EQ(c.request->sampling.temperature, 0.f);
  EXPECT_EQ(c.request->sampling.seed, 99u);
  ASSERT_TRUE(c.request->method.has_value());
  EXPECT_EQ(c.request->method->kv.policy, "skipkv");
  EXPECT_EQ(c.request->method->kv.budget, 64);
  EXPECT_EQ(c.request->method->kv.window, 8);
  EXPECT_EQ(c.request->method->kv.interval, 16);
  EXPECT_FLOAT_EQ(c.request->method->kv.skipkv.sim_threshold, 0.8f);
  EXPECT_EQ(c.preset->preset, "skipkv");

  auto fails = [&](const std::string& body, const std::string& param, const std::string& words) {
    ConvertOutcome o = ToEngineRequest(MustParse(body), lim);
    ASSERT_FALSE(o.ok()) << body;
    EXPECT_EQ(o.error.param, param) << o.error.message;
    EXPECT_NE(o.error.message.find(words), std::string::npos) << o.error.message;
  };
  const std::string m = R"({"messages":[{"role":"user","content":"x"}])";
  fails(m + R"(,"max_tokens":513})", "max_tokens", "exceeds the model's context of 512");
  fails(m + R"(,"kv":{"policy":"nope","budget":64}})", "kv.policy", "unknown method 'nope'");
  fails(m + R"(,"kv":{"policy":"rkv","budget":8,"window":8}})", "kv.budget", "budget");
  fails(m + R"(,"kv":{"policy":"rkv"}})", "kv.budget", "budget");
  fails(m + R"(,"kv":{"policy":"rkv","budget":64,"sim_threshold":0.5}})", "kv.sim_threshold",
        "sim_threshold");
  fails(m + R"(,"kv":{"policy":"rkv","budget":64,"colour":1}})", "kv.colour", "unknown field 'colour'");
  fails(m + R"(,"kv":{"policy":"full","budget":64}})", "kv.budget", "no budget");
  // The sweep-side fields of the *-authors presets (issue 38 row 3) are eval's.
  fails(m + R"(,"kv":{"policy":"rkv-authors","budget":64,"max_length":8192}})", "kv.max_length",
        "give max_tokens");
  fails(m + R"(,"kv":{"policy":"rkv","budget":64,"max_length_counts_prompt":true}})",
        "kv.max_length_counts_prompt", "give max_tokens");
  // The preset's eval-only settings (its prompt style, prompt + output bound) do not apply to a
  // client's request; the outcome lists them for the response rather than dropping them silently.
  ConvertOutcome authors = ToEngineRequest(MustParse(m + R"(,"kv":{"policy":"rkv-authors","budget":64}})"), lim);
  ASSERT_TRUE(authors.ok()) << authors.error.message;
  ASSERT_EQ(authors.not_applied.size(), 2u);
  EXPECT_NE(authors.not_applied[0].find("prompt style 'raw'"), std::string::npos) << authors.not_applied[0];
  EXPECT_EQ(authors.not_applied[1].rfind("max_length:", 0), 0u) << authors.not_applied[1];
  EXPECT_TRUE(c.not_applied.empty()) << "skipkv has no eval-only settings";
  // skipkv-authors (unsteered without a vector): no dataset, so no row of the authors' τ table either,
  // unless the request sets τ itself.
  ConvertOutcome ska = ToEngineRequest(MustParse(m + R"(,"kv":{"policy":"skipkv-authors","budget":64}})"), lim);
  ASSERT_TRUE(ska.ok()) << ska.error.message;
  ASSERT_EQ(ska.not_applied.size(), 3u);
  EXPECT_EQ(ska.not_applied[2].rfind("tau:", 0), 0u) << ska.not_applied[2];
  ConvertOutcome ska_tau =
      ToEngineRequest(MustParse(m + R"(,"kv":{"policy":"skipkv-authors","budget":64,"sim_threshold":0.97}})"), lim);
  ASSERT_TRUE(ska_tau.ok()) << ska_tau.error.message;
  EXPECT_EQ(ska_tau.not_applied.size(), 2u);
  // "full" is fullkv; no max_tokens: up to the context.
  ConvertOutcome f = ToEngineRequest(MustParse(m + R"(,"kv":{"policy":"full"}})"), lim);
  ASSERT_TRUE(f.ok()) << f.error.message;
  EXPECT_EQ(f.request->method->kv.policy, "full");
  EXPECT_EQ(f.request->max_new_tokens, 512);

  // A preset of the server's --presets file is a kv.policy name like the built-ins.
  const std::vector<PresetFileEntry> file = {
      {"skipkv-cal", "skipkv", {"sim_threshold=0.7"}, "", "{}", "cal.json"}};
  fails(m + R"(,"kv":{"policy":"skipkv-cal","budget":64}})", "kv.policy", "unknown method 'skipkv-cal'");
  lim.file_presets = file;
  ConvertOutcome cal = ToEngineRequest(MustParse(m + R"(,"kv":{"policy":"skipkv-cal","budget":64}})"), lim);
  ASSERT_TRUE(cal.ok()) << cal.error.message;
  EXPECT_EQ(cal.preset->preset, "skipkv-cal");
  EXPECT_FLOAT_EQ(cal.request->method->kv.skipkv.sim_threshold, 0.7f);
  ConvertOutcome over =
      ToEngineRequest(MustParse(m + R"(,"kv":{"policy":"skipkv-cal","budget":64,"sim_threshold":0.8}})"), lim);
  ASSERT_TRUE(over.ok()) << over.error.message;
  EXPECT_FLOAT_EQ(over.request->method->kv.skipkv.sim_threshold, 0.8f);  // the request's field wins
}

// Steering: the vector comes from the server's set (by name, or its
// default), never from the request; the method's strengths from the preset
// and the request's steer_* fields.
TEST(ServeConvertTest, SteeringPresetsTakeTheServersVectors) {
  SteerVectors vecs;
  SteeringConfig base;
  base.enabled = true;
  base.file = "/srv/vectors/default.gguf";
  base.layer = 1;
  base.coef = 3;
  vecs.by_name["default"] = {base, {1}};
  SteeringConfig other = base;
  other.file = "/srv/vectors/neg.gguf";
  vecs.by_name["neg"] = {other, {0, 1}};
  ConvertLimits lim;
  lim.n_ctx = 512;
  lim.steer_vectors = &vecs;
  const std::string m = R"({"messages":[{"role":"user","content":"x"}])";
  auto ok = [&](const std::string& kv) {
    ConvertOutcome o = ToEngineRequest(MustParse(m + R"(,"kv":)" + kv + "}"), lim);
    EXPECT_TRUE(o.ok()) << kv << ": " << o.error.message;
    return o;
  };
  ConvertOutcome seal = ok(R"({"policy":"seal","steer_coef":2.5})");
  ASSERT_TRUE(seal.ok());
  const SteeringConfig& s = seal.request->method->steer;
  EXPECT_TRUE(s.enabled);
  EXPECT_FALSE(s.adaptive);
  EXPECT_EQ(s.file, base.file);
  EXPECT_FLOAT_EQ(s.coef, 2.5f);
  EXPECT_EQ(seal.request->method->kv.policy, "full");
  EXPECT_EQ(seal.steer_vector, "default");
  ConvertOutcome named = ok(R"({"policy":"seal","steer_vector":"neg","steer_layer":0})");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named.request->method->steer.file, other.file);
  EXPECT_EQ(named.request->method->steer.layer, 0);
  EXPECT_FLOAT_EQ(named.request->method->steer.coef, 3.f);  // the server's --steer-coef
  EXPECT_EQ(named.steer_vector, "neg");
  ConvertOutcome adaptive = ok(R"({"policy":"rkv+sentence+steering","budget":64,"steer_gamma":0.5})");
  ASSERT_TRUE(adaptive.ok());
  EXPECT_TRUE(adaptive.request->method->steer.adaptive);
  EXPECT_FLOAT_EQ(adaptive.request->method->steer.gamma, 0.5f);
  // skipkv steers when the server has a vector; rkv never does.
  EXPECT_TRUE(ok(R"({"policy":"skipkv","budget":64})").request->method->steer.enabled);
  ConvertOutcome rkv = ok(R"({"policy":"rkv","budget":64})");
  EXPECT_FALSE(rkv.request->method->steer.enabled);
  EXPECT_EQ(rkv.steer_vector, "");

  auto fails = [&](const std::string& kv, const std::string& param, const std::string& words,
                   const ConvertLimits& l) {
    const std::string body = m + R"(,"kv":)" + kv + "}";
    ParseOutcome parsed = ParseRequest(body, Endpoint::kChat);
    ApiError e = parsed.error;
    if (parsed.ok()) {
      ConvertOutcome o = ToEngineRequest(*parsed.request, l);
      ASSERT_FALSE(o.ok()) << kv;
      e = o.error;
    }
    EXPECT_EQ(e.http_status, 400) << kv;
    EXPECT_EQ(e.param, param) << kv << ": " << e.message;
    EXPECT_NE(e.message.find(words), std::string::npos) << kv << ": " << e.message;
  };
  fails(R"({"policy":"seal","steer_vector":"pos"})", "kv.steer_vector", "it has: default, neg", lim);
  fails(R"({"policy":"seal","steer_vector":"/etc/passwd"})", "kv.steer_vector", "not a path", lim);
  fails(R"({"policy":"seal","steer_vector":7})", "kv.steer_vector", "must be a string", lim);
  fails(R"({"policy":"rkv","budget":64,"steer_vector":"neg"})", "kv.steer_vector", "does not steer", lim);
  fails(R"({"policy":"seal","steer_layer":0})", "kv.steer_layer", "'default' has no direction", lim);
  fails(R"({"policy":"seal","steer_coef":"big"})", "kv.steer_coef", "must be a number", lim);
  fails(R"({"policy":"seal","steer_alpha0":2})", "kv.steer_alpha0", "fixed strength", lim);
  fails(R"({"policy":"rkv","budget":64,"steer_coef":2})", "kv.steer_coef", "does not steer", lim);
  ConvertLimits none = lim;
  none.steer_vectors = nullptr;
  fails(R"({"policy":"seal"})", "kv.policy", "without a steering vector", none);
  fails(R"({"policy":"rkv+sentence+steering","budget":64})", "kv.policy", "without a steering vector", none);
  fails(R"({"policy":"seal","steer_vector":"neg"})", "kv.steer_vector", "without steering vectors", none);
  // Without vectors, skipkv runs unsteered.
  ConvertOutcome plain = ToEngineRequest(MustParse(m + R"(,"kv":{"policy":"skipkv","budget":64}})"), none);
  ASSERT_TRUE(plain.ok()) << plain.error.message;
  EXPECT_FALSE(plain.request->method->steer.enabled);
}

TEST(ServeConvertTest, StatusMapsToHttpErrors) {
  // The engine's error names the field "prompt" (Engine::ValidateRequest);
  // the code follows the field, not the message's words.
  ApiError e = ErrorFromStatus(
      OutOfRange("prompt of 600 tokens does not fit the context of 512 positions").WithField("prompt"));
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_EQ(ErrorFromStatus(OutOfRange("prompt ... does not fit the context")).code, "");
  EXPECT_EQ(ErrorFromStatus(InvalidArgument("x")).http_status, 400);
  EXPECT_EQ(ErrorFromStatus(Internal("x")).http_status, 500);
}

TEST(ServeResponseTest, ShapesFollowOpenAi) {
  ApiError e;
  e.param = "max_tokens";
  e.message = "bad";
  json err = json::parse(ErrorJson(e));
  EXPECT_EQ(err["error"]["message"], "bad");
  EXPECT_EQ(err["error"]["type"], "invalid_request_error");
  EXPECT_EQ(err["error"]["param"], "max_tokens");
  EXPECT_TRUE(err["error"]["code"].is_null());

  GenerationResult r;
  r.prompt_tokens = {1, 2, 3};
  r.tokens = {4, 5};
  r.text = "hi";
  r.finish = FinishReason::kContext;
  r.method.kv.policy = "rkv";
  r.method.kv.budget = 64;
  r.kv.compressions = 3;
  ResponseInfo info{Endpoint::kChat, "chatcmpl-1", 1700000000, "stories"};
  json c = json::parse(CompletionJson(info, r, "rkv"));
  EXPECT_EQ(c["object"], "chat.completion");
  EXPECT_EQ(c["choices"][0]["message"]["content"], "hi");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(c["usage"]["total_tokens"], 5);
  EXPECT_EQ(c["kv"]["compressions"], 3);
  EXPECT_EQ(c["kv"]["method"]["policy"], "rkv");
  EXPECT_EQ(c["kv"]["preset"], "rkv");
  EXPECT_FALSE(c["kv"].contains("not_applied"));
  info.not_applied = {"prompt: ..."};
  EXPECT_EQ(json::parse(CompletionJson(info, r, "rkv-authors"))["kv"]["not_applied"][0], "prompt: ...");
  info.not_applied.clear();
  json first = json::parse(ChunkJson(info, "", true, nullptr, true));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["usage"].is_null());
  json last = json::parse(ChunkJson(info, "", false, "stop", false));
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(last.contains("usage"));
  json usage = json::parse(UsageChunkJson(info, r, ""));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 2);
  info.endpoint = Endpoint::kCompletions;
  json t = json::parse(ChunkJson(info, "ab", false, nullptr, false));
  EXPECT_EQ(t["object"], "text_completion");
  EXPECT_EQ(t["choices"][0]["text"], "ab");
  EXPECT_EQ(SseEvent("{}"), "data: {}\n\n");
}

TEST(ServeMetricsTest, PrometheusTextWithCumulativeHistogram) {
  Metrics m;
  m.ObserveTtft(0.003);
  m.ObserveTtft(0.2);
  m.ObserveTtft(100);
  m.CountRequest("/v1/completions", 200);
  m.CountRequest("/v1/completions", 200);
  m.CountRequest("/v1/completions", 400);
  ServingStats st;
  st.kv_allocated_bytes = 1234;
  st.waiting = 2;
  st.compressions = 9;
  const std::string text = m.Render(st, 3);
  auto has = [&](const std::string& line) {
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << "missing: " << line << "\n" << text;
  };
  has("skipkv_http_requests_total{endpoint=\"/v1/completions\",code=\"200\"} 2");
  has("skipkv_http_requests_total{endpoint=\"/v1/completions\",code=\"400\"} 1");
  has("skipkv_kv_allocated_bytes 1234");
  has("skipkv_kv_compressions_total 9");
  has("skipkv_queue_length 5");
  has("skipkv_ttft_seconds_bucket{le=\"0.005\"} 1");
  has("skipkv_ttft_seconds_bucket{le=\"0.25\"} 2");
  has("skipkv_ttft_seconds_bucket{le=\"30\"} 2");
  has("skipkv_ttft_seconds_bucket{le=\"+Inf\"} 3");
  has("skipkv_ttft_seconds_count 3");
  has("# TYPE skipkv_ttft_seconds histogram");
}

TEST(ServeOptionsTest, ByteSizes) {
  EXPECT_EQ(*ParseByteSize("2GiB"), size_t{2} << 30);
  EXPECT_EQ(*ParseByteSize("512MiB"), size_t{512} << 20);
  EXPECT_EQ(*ParseByteSize("1.5K"), 1536u);
  EXPECT_EQ(*ParseByteSize("1000000"), 1000000u);
  EXPECT_EQ(*ParseByteSize("3MB"), 3000000u);
  for (const char* bad : {"", "GiB", "2 GiB", "2XB", "-1", "1.2.3", "0"}) {
    EXPECT_FALSE(ParseByteSize(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace skipkv::serve
