// End-to-end: `skipkv serve` on a loopback port (--port 0, the port read
// from its "listening on" line), driven by the official `openai` npm client
// (tests/e2e/serve_client.cjs) and by curl for the error cases:
//  * chat, streaming (with the final usage chunk) and completions parse per
//    the OpenAI schema, greedy streams equal plain responses, and a
//    completion equals `skipkv run` of the same prompt;
//  * bad requests get 4xx with OpenAI's error JSON naming the field;
//  * 16 concurrent streams with different methods and budgets under a KV
//    memory limit all finish, each equal to the same request run alone with
//    `skipkv run` (same method fields), with peak KV under the limit;
//  * a client killed mid-stream frees its KV (visible in /metrics), a full
//    queue gives 503 + Retry-After, SIGTERM shuts down cleanly;
//  * steering chosen per request (kv.policy seal / skipkv, kv.steer_vector,
//    kv.steer_coef) with the vectors given on the server's command line
//    equals `skipkv run --method seal` / `--kv-policy skipkv --steer`.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "prereq.h"
#include "steer/steering_vector.h"

namespace {

using json = nlohmann::json;
const std::string kBinary = std::string(SKIPKV_BINARY_DIR) + "/apps/skipkv/skipkv";
const std::string kOpenAi = std::string(SKIPKV_DEPS_DIR) + "/npm/openai";
const std::string kClient = std::string(SKIPKV_TEST_DATA_DIR) + "/../e2e/serve_client.cjs";
const std::string kQwenTok = std::string(SKIPKV_DEPS_DIR) + "/npm/tokenizer-qwen3/models/tokenizer.json";

// Every file a test process writes (logs, bodies, an 86 MB model) lives in one
// directory per process, named at start-up -- before any fork, so a child
// names the parent's files --, made on first use (listing the tests makes
// none) and removed when the process's tests end.
const std::string kTmpDir = ::testing::TempDir() + "/skipkv_serve_" + std::to_string(::getpid());

std::string Tmp(const std::string& name) {
  std::filesystem::create_directories(kTmpDir);
  return kTmpDir + "/" + name;
}

class RemoveTmpDir : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(kTmpDir, ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kRemoveTmpDir = ::testing::AddGlobalTestEnvironment(new RemoveTmpDir);

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Runs a shell command; stdout and exit code (-1 on a signal).
std::pair<int, std::string> Shell(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, ""};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int st = ::pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool HaveNodeClient() {
  return Shell("command -v node >/dev/null 2>&1").first == 0 &&
         std::ifstream(kOpenAi + "/package.json").good();
}

// A `skipkv serve` child process.
class ServerProc {
 public:
  ~ServerProc() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  // Starts `skipkv serve --port 0 ARGS`; false (with the log) if it never listens.
  bool Start(const std::string& args) {
    err_path_ = Tmp("server_" + std::to_string(counter_++) + ".log");
    int fds[2];
    if (::pipe(fds) != 0) return false;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      ::close(fds[0]);
      ::close(fds[1]);
      const int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(err, 2);
      const std::string cmd = "exec " + kBinary + " serve --port 0 -t 2 " + args;
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[1]);
    out_fd_ = fds[0];
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_fd_, POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      char c;
      if (::read(out_fd_, &c, 1) != 1) break;
      if (c != '\n') {
        line += c;
        continue;
      }
      const size_t at = line.rfind(':');
      if (line.find("listening on http://") != std::string::npos && at != std::string::npos) {
        port_ = std::stoi(line.substr(at + 1));
        return true;
      }
      line.clear();
    }
    return false;
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const { return ReadAll(err_path_); }
  // Sends `sig` and waits up to `seconds`; the exit code, or -1.
  int Stop(int sig, int seconds) {
    ::kill(pid_, sig);
    for (int i = 0; i < seconds * 10; ++i) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        ::close(out_fd_);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int port_ = 0;
  std::string err_path_;
  static inline int counter_ = 0;
};

struct Http {
  int status = 0;
  std::string body;
  std::string headers;
};

// curl: method, path, body (JSON text or empty), extra headers.
Http Curl(const std::string& url, const std::string& method, const std::string& body,
          const std::string& headers = "") {
  static int n = 0;
  const std::string bf = Tmp("body_" + std::to_string(n)), of = Tmp("out_" + std::to_string(n)),
                    hf = Tmp("hdr_" + std::to_string(n));
  ++n;
  WriteFile(bf, body);
  std::string cmd =
      "curl -s -m 60 -X " + method + " -o " + of + " -D " + hf + " -w '%{http_code}' " + headers;
  if (!body.empty() || method == "POST") cmd += " -H 'Content-Type: application/json' --data-binary @" + bf;
  cmd += " " + Quote(url);
  auto [rc, code] = Shell(cmd);
  Http h;
  h.status = rc == 0 ? std::atoi(code.c_str()) : -1;
  h.body = ReadAll(of);
  h.headers = ReadAll(hf);
  return h;
}

// A metric's value from /metrics (-1 when absent).
double Metric(const std::string& url, const std::string& series) {
  const Http h = Curl(url + "/metrics", "GET", "");
  std::istringstream in(h.body);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

// Polls until metric == value (or the timeout); returns the last value.
double WaitMetric(const std::string& url, const std::string& series, double value, int seconds = 20) {
  double v = -1;
  for (int i = 0; i < seconds * 10; ++i) {
    v = Metric(url, series);
    if (v == value) return v;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return v;
}

json RunClient(const std::string& url, const std::string& key, const std::string& mode,
               const std::string& arg = "") {
  auto [rc, out] = Shell("node " + Quote(kClient) + " " + Quote(kOpenAi) + " " + Quote(url + "/v1") + " " +
                         Quote(key) + " " + mode + " " + Quote(arg));
  EXPECT_EQ(rc, 0) << "serve_client " << mode << " failed (stderr above)";
  json j = json::parse(out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << out;
  return j;
}

// `skipkv run` of one prompt alone, greedy, as JSON.
json RunAlone(const std::string& prompt, int n, const std::string& kv_args) {
  auto [rc, out] = Shell("exec " + kBinary + " run -q --json -t 2 --temp 0 -n " + std::to_string(n) + " -p " +
                         Quote(prompt) + " " + kv_args);
  EXPECT_EQ(rc, 0) << out;
  return json::parse(out, nullptr, false);
}

TEST(ServeE2ETest, OpenAiClientChatStreamingAndCompletions) {
  if (!HaveNodeClient()) SKIPKV_MISSING_PREREQ("node and the openai npm package (" + kOpenAi + ")");
  ServerProc server;
  ASSERT_TRUE(server.Start("--api-key sk-test --model-id stories")) << server.log();
  const json out = RunClient(server.url(), "sk-test", "basic");
  ASSERT_TRUE(out.is_object());
  EXPECT_EQ(out["model"], "stories");
  // Greedy: the stream carries the same text as the plain response.
  EXPECT_EQ(out["chat_stream"]["text"], out["chat"]["text"]);
  EXPECT_EQ(out["chat_stream"]["usage"], out["chat"]["usage"]);
  EXPECT_EQ(out["chat"]["usage"]["completion_tokens"], 24);
  EXPECT_EQ(out["completion_stream"]["text"], out["completion"]["text"]);
  // The completion equals `skipkv run` of the same prompt.
  const json alone = RunAlone("The cat", 16, "");
  EXPECT_EQ(out["completion"]["text"], alone["text"]);
  EXPECT_GT(out["completion"]["text"].get<std::string>().size(), 10u);
  // The kv extension: the method that ran, and it evicted.
  EXPECT_EQ(out["kv"]["method"]["policy"], "rkv");
  EXPECT_EQ(out["kv"]["method"]["budget"], 24);
  EXPECT_GT(out["kv"]["compressions"].get<int>(), 0);
  // A stop string cuts the text before it.
  const std::string full = out["completion"]["text"], stopped = out["stopped"]["text"];
  EXPECT_EQ(out["stopped"]["finish"], "stop");
  EXPECT_EQ(stopped, full.substr(0, full.find(full.substr(4, 3))));
  EXPECT_EQ(server.Stop(SIGTERM, 30), 0) << server.log();
}

TEST(ServeE2ETest, BadRequestsGetOpenAiErrors) {
  ServerProc server;
  ASSERT_TRUE(server.Start("--api-key sk-test -c 64")) << server.log();
  const std::string auth = "-H 'Authorization: Bearer sk-test'";
  const std::string chat = server.url() + "/v1/chat/completions", comp = server.url() + "/v1/completions";
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  struct Case {
    std::string what, url, body;
    int status;
    std::string param;  // "" = null
    std::string words;  // in the message
  };
  const std::string long_prompt(400, 'a');
  const std::vector<Case> cases = {
      {"bad JSON", chat, "{\"messages\": [", 400, "", "not valid JSON"},
      {"not an object", chat, "[]", 400, "", "JSON object"},
      {"messages wrong type", chat, R"({"messages":"hi"})", 400, "messages", "must be an array"},
      {"max_tokens wrong type", chat, "{" + msgs + R"(,"max_tokens":"5"})", 400, "max_tokens", "integer"},
      {"temperature wrong type", chat, "{" + msgs + R"(,"temperature":[1]})", 400, "temperature", "number"},
      {"stream wrong type", chat, "{" + msgs + R"(,"stream":1})", 400, "stream", "boolean"},
      {"budget < window", chat, "{" + msgs + R"(,"kv":{"policy":"rkv","budget":4,"window":8}})", 400,
       "kv.budget", "budget"},
      {"unknown method", chat, "{" + msgs + R"(,"kv":{"policy":"magic","budget":64}})", 400, "kv.policy",
       "unknown method"},
      {"field of another policy", chat,
       "{" + msgs + R"(,"kv":{"policy":"rkv","budget":32,"sim_threshold":0.9}})", 400, "kv.sim_threshold",
       "sim_threshold"},
      {"prompt too long", comp, R"({"prompt":")" + long_prompt + R"("})", 400, "",
       "does not fit the context"},
      {"max_tokens too large", chat, "{" + msgs + R"(,"max_tokens":100000})", 400, "max_tokens", "exceeds"},
      {"prompt token outside the vocabulary", comp, R"({"prompt":[1,99999]})", 400, "",
       "outside the vocabulary"},
      {"steering preset without a vector", chat, "{" + msgs + R"(,"kv":{"policy":"seal"}})", 400, "kv.policy",
       "without a steering vector"},
  };
  for (const Case& c : cases) {
    const Http h = Curl(c.url, "POST", c.body, auth);
    EXPECT_EQ(h.status, c.status) << c.what << ": " << h.body;
    const json j = json::parse(h.body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << c.what << ": " << h.body;
    ASSERT_TRUE(j.contains("error") && j["error"]["message"].is_string()) << c.what << ": " << h.body;
    EXPECT_EQ(j["error"]["type"], "invalid_request_error") << c.what;
    if (c.param.empty()) {
      EXPECT_TRUE(j["error"]["param"].is_null()) << c.what << ": " << h.body;
    } else {
      EXPECT_EQ(j["error"]["param"], c.param) << c.what << ": " << h.body;
    }
    EXPECT_NE(j["error"]["message"].get<std::string>().find(c.words), std::string::npos)
        << c.what << ": " << h.body;
  }
  EXPECT_EQ(
      json::parse(Curl(comp, "POST", R"({"prompt":")" + long_prompt + R"("})", auth).body)["error"]["code"],
      "context_length_exceeded");
  // Authentication.
  Http h = Curl(chat, "POST", "{" + msgs + "}", "-H 'Authorization: Bearer wrong'");
  EXPECT_EQ(h.status, 401);
  EXPECT_EQ(json::parse(h.body)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(Curl(chat, "POST", "{" + msgs + "}").status, 401);
  EXPECT_EQ(Curl(server.url() + "/v1/models", "GET", "").status, 401);
  EXPECT_EQ(Curl(server.url() + "/v1/models", "GET", "", auth).status, 200);
  // A valid request still works after all that, /health and 404s.
  h = Curl(chat, "POST", "{" + msgs + R"(,"max_tokens":5,"temperature":0})", auth);
  EXPECT_EQ(h.status, 200) << h.body;
  EXPECT_EQ(json::parse(h.body)["usage"]["completion_tokens"].get<int>() <= 5, true);
  EXPECT_EQ(Curl(server.url() + "/health", "GET", "").status, 200);
  h = Curl(server.url() + "/v1/nothing", "GET", "", auth);
  EXPECT_EQ(h.status, 404);
  EXPECT_TRUE(json::parse(h.body, nullptr, false).contains("error")) << h.body;
  // Every refusal was counted.
  EXPECT_EQ(
      Metric(server.url(), "skipkv_http_requests_total{endpoint=\"/v1/chat/completions\",code=\"400\"}"), 11);
  EXPECT_EQ(Metric(server.url(), "skipkv_requests_submitted_total"), 1);
  EXPECT_EQ(server.Stop(SIGTERM, 30), 0) << server.log();
}

TEST(ServeE2ETest, SixteenConcurrentStreamsMixedMethodsEqualRunAloneUnderKvLimit) {
  if (!HaveNodeClient()) SKIPKV_MISSING_PREREQ("node and the openai npm package (" + kOpenAi + ")");
  const std::vector<std::string> prompts = {
      "Once upon a time", "The cat sat on", "Lily and Ben",     "One day, a little",
      "Tom had a big",    "The sun was",    "There was a girl", "A dog named",
      "Mom said",         "The bird flew",  "Sara liked to",    "In the park",
      "The boy",          "Anna and her",   "The little car",   "Once there was"};
  // Methods as the server's presets and as `skipkv run` flags (window 4, interval 8).
  struct M {
    std::string preset;
    std::string run_args;
  };
  std::vector<json> reqs;
  std::vector<std::string> run_args;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int budget = 12 + 4 * static_cast<int>(i % 5);
    const int n = 60 + 9 * static_cast<int>(i);
    json r = {{"prompt", prompts[i]}, {"max_tokens", n}};
    std::string args;
    const std::string b = std::to_string(budget);
    switch (i % 5) {
      case 0:
        r["kv"] = {{"policy", "fullkv"}};
        args = "--kv-policy full";
        break;
      case 1:
        r["kv"] = {{"policy", "rkv"}, {"budget", budget}, {"window", 4}, {"interval", 8}};
        args = "--kv-policy rkv --kv-budget " + b + " --kv-window 4 --kv-interval 8 --mix-lambda 0.1";
        break;
      case 2:
        r["kv"] = {{"policy", "streaming"}, {"budget", budget}, {"window", 4}, {"interval", 8}};
        args = "--kv-policy streaming --kv-budget " + b + " --kv-window 4 --kv-interval 8";
        break;
      case 3:
        r["kv"] = {{"policy", "snapkv"}, {"budget", budget}, {"window", 4}, {"interval", 8}};
        args = "--kv-policy snapkv --kv-budget " + b + " --kv-window 4 --kv-interval 8";
        break;
      default:
        r["kv"] = {{"policy", "rkv+sentence"}, {"budget", budget}, {"window", 4}, {"interval", 8}};
        args = "--kv-policy skipkv --kv-budget " + b + " --kv-window 4 --kv-interval 8 --mix-lambda 0.1";
        break;
    }
    reqs.push_back(r);
    run_args.push_back(args);
  }
  const std::string req_file = Tmp("load.json");
  WriteFile(req_file, json(reqs).dump());
  // stories260K: 5 layers x 4 KV heads x 8 dims x K,V x f16 = 640 bytes a slot;
  // 160 KiB = 256 slots: the largest FullKV request (~200 slots) fits, all 16
  // together (~900 slots) do not, so some queue until others finish.
  const size_t limit = 160 * 1024;
  ServerProc server;
  ASSERT_TRUE(server.Start("--kv-memory 160KiB --max-queue 32 --ubatch 4")) << server.log();
  const json out = RunClient(server.url(), "none", "load", req_file);
  ASSERT_TRUE(out.contains("results") && out["results"].size() == prompts.size()) << out.dump();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const json& got = out["results"][i];
    const json alone = RunAlone(prompts[i], reqs[i]["max_tokens"], run_args[i]);
    ASSERT_TRUE(alone.is_object()) << run_args[i];
    EXPECT_EQ(got["text"], alone["text"]) << "request " << i << " (" << run_args[i] << ")";
    EXPECT_EQ(got["completion_tokens"], alone["generated_tokens"]) << "request " << i;
    EXPECT_EQ(got["policy"], alone["method"]["policy"]) << "request " << i;
    if (i % 5 != 0) {
      EXPECT_GT(got["compressions"].get<int>(), 0) << "request " << i;
    }
  }
  const double peak = Metric(server.url(), "skipkv_kv_peak_allocated_bytes");
  EXPECT_GT(peak, 0);
  EXPECT_LE(peak, static_cast<double>(limit));
  EXPECT_EQ(Metric(server.url(), "skipkv_requests_completed_total"), 16);
  EXPECT_EQ(Metric(server.url(), "skipkv_kv_allocated_bytes"), 0);
  EXPECT_EQ(Metric(server.url(), "skipkv_ttft_seconds_count"), 16);
  EXPECT_GT(Metric(server.url(), "skipkv_kv_compressions_total"), 0);
  std::fprintf(stderr, "16 streams in %.2f s (noisy: shared machine), peak KV %.0f of %zu bytes\n",
               out["seconds"].get<double>(), peak, limit);
  EXPECT_EQ(server.Stop(SIGTERM, 30), 0) << server.log();
}

// A tiny qwen2 with the real 151k vocabulary decodes slowly enough to be
// caught mid-request ("" if make-model failed).
std::string SlowModel() {
  static const std::string path = [] {
    const std::string model = Tmp("qwen.gguf");
    const auto [rc, out] =
        Shell("exec " + kBinary + " make-model --preset tiny-qwen2 --context 4096 -q --tokenizer " +
              Quote(kQwenTok) + " -o " + model + " 2>&1");
    EXPECT_EQ(rc, 0) << out;
    return rc == 0 ? model : std::string();
  }();
  return path;
}

// Runs `cmd` in a child shell (exec'd), returns its pid.
pid_t Spawn(const std::string& cmd) {
  pid_t pid = ::fork();
  if (pid == 0) {
    const std::string c = "exec " + cmd;
    ::execl("/bin/sh", "sh", "-c", c.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

TEST(ServeE2ETest, KilledNonStreamingClientIsCancelledAndFreesKv) {
  if (!std::ifstream(kQwenTok).good()) SKIPKV_MISSING_PREREQ("the Qwen tokenizer file " + kQwenTok);
  const std::string model = SlowModel();
  ASSERT_FALSE(model.empty());
  ServerProc server;
  ASSERT_TRUE(server.Start("-m " + model + " --max-active 1")) << server.log();
  const std::string url = server.url();
  const std::string body_file = Tmp("plain_body.json");
  WriteFile(body_file, R"({"prompt":"Hello","max_tokens":3000,"temperature":0})");
  const std::string curl = "curl -s -o /dev/null -H 'Content-Type: application/json' --data-binary @" +
                           body_file + " " + url + "/v1/completions";
  // A: a plain (non-streaming) request; B queues behind it (--max-active 1).
  const pid_t a = Spawn(curl);
  ASSERT_EQ(WaitMetric(url, "skipkv_requests_active", 1), 1) << server.log();
  const pid_t b = Spawn(curl);
  ASSERT_EQ(WaitMetric(url, "skipkv_requests_waiting", 1), 1) << server.log();
  EXPECT_GT(Metric(url, "skipkv_kv_allocated_bytes"), 0);
  // Kill A's client: A is cancelled and B starts; kill B's while it waits or
  // runs: B is cancelled too, and every KV byte is freed, long before 3000
  // tokens could have been generated.
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(a, SIGKILL);
  ::waitpid(a, nullptr, 0);
  EXPECT_EQ(WaitMetric(url, "skipkv_requests_cancelled_total", 1), 1) << server.log();
  ::kill(b, SIGKILL);
  ::waitpid(b, nullptr, 0);
  EXPECT_EQ(WaitMetric(url, "skipkv_requests_cancelled_total", 2), 2) << server.log();
  EXPECT_EQ(WaitMetric(url, "skipkv_kv_allocated_bytes", 0), 0);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 15);
  EXPECT_EQ(Metric(url, "skipkv_requests_completed_total"), 0);
  EXPECT_EQ(Metric(url, "skipkv_requests_active"), 0);
  EXPECT_EQ(Metric(url, "skipkv_requests_waiting"), 0);
  // The server still answers a plain request to the end.
  const Http h = Curl(url + "/v1/completions", "POST", R"({"prompt":"Hi","max_tokens":3})");
  EXPECT_EQ(h.status, 200) << h.body;
  EXPECT_EQ(Metric(url, "skipkv_requests_completed_total"), 1);
  EXPECT_EQ(server.Stop(SIGTERM, 30), 0) << server.log();
}

TEST(ServeE2ETest, KilledClientFreesKvQueueFullGives503AndSigtermDrains) {
  if (!std::ifstream(kQwenTok).good()) SKIPKV_MISSING_PREREQ("the Qwen tokenizer file " + kQwenTok);
  const std::string model = SlowModel();
  ASSERT_FALSE(model.empty());
  ServerProc server;
  ASSERT_TRUE(server.Start("-m " + model + " --max-active 1 --max-queue 1 --shutdown-timeout 2"))
      << server.log();
  const std::string url = server.url();
  // A: a long stream from curl, killed after its first events.
  const std::string a_out = Tmp("a_stream.txt");
  // Greedy: a sampled stream of the random model can draw its end-of-text
  // token early and finish before it is killed or cut (a flake seen in CI).
  const std::string body = R"({"prompt":"Hello","max_tokens":3000,"stream":true,"temperature":0})";
  const std::string a_body = Tmp("a_body.json");  // named in the parent: Tmp() uses the pid
  WriteFile(a_body, body);
  pid_t a = ::fork();
  if (a == 0) {
    const std::string cmd = "exec curl -s -N -H 'Content-Type: application/json' --data-binary @" + a_body +
                            " " + url + "/v1/completions > " + a_out;
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 300 && ReadAll(a_out).find("data: ", 200) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_NE(ReadAll(a_out).find("data: "), std::string::npos) << server.log();
  EXPECT_EQ(Metric(url, "skipkv_requests_active"), 1);
  EXPECT_GT(Metric(url, "skipkv_kv_allocated_bytes"), 0);
  // B waits (max-active 1) and fills the queue (max-queue 1): C gets 503.
  pid_t b = ::fork();
  if (b == 0) {
    const std::string cmd =
        "exec curl -s -o /dev/null -H 'Content-Type: application/json' --data-binary "
        "'{\"prompt\":\"Hi\",\"max_tokens\":2}' " +
        url + "/v1/completions";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  EXPECT_EQ(WaitMetric(url, "skipkv_queue_length", 1), 1);
  const Http c = Curl(url + "/v1/completions", "POST", R"({"prompt":"Hi","max_tokens":2})");
  EXPECT_EQ(c.status, 503) << c.body;
  EXPECT_NE(c.headers.find("Retry-After: 1"), std::string::npos) << c.headers;
  EXPECT_EQ(json::parse(c.body, nullptr, false)["error"]["code"], "queue_full") << c.body;
  EXPECT_EQ(Metric(url, "skipkv_rejected_total"), 1);
  // Kill A's client: its request is cancelled and B runs and finishes.
  ::kill(a, SIGKILL);
  ::waitpid(a, nullptr, 0);
  EXPECT_EQ(WaitMetric(url, "skipkv_requests_cancelled_total", 1), 1) << server.log();
  int st = 0;
  ::waitpid(b, &st, 0);
  EXPECT_EQ(WaitMetric(url, "skipkv_requests_completed_total", 1), 1);
  EXPECT_EQ(WaitMetric(url, "skipkv_kv_allocated_bytes", 0), 0);
  EXPECT_EQ(Metric(url, "skipkv_requests_active"), 0);
  // The openai client aborting its stream is a disconnect too.
  if (HaveNodeClient()) {
    const json ab = RunClient(url, "none", "abort", "3000");
    EXPECT_EQ(ab["chunks"], 3);
    EXPECT_EQ(WaitMetric(url, "skipkv_requests_cancelled_total", 2), 2) << server.log();
    EXPECT_EQ(WaitMetric(url, "skipkv_kv_allocated_bytes", 0), 0);
  }
  // SIGTERM with a stream in flight: it is cut after the 2 s deadline with an
  // error event, and the server exits 0.
  const std::string d_out = Tmp("d_stream.txt");
  pid_t d = ::fork();
  if (d == 0) {
    const std::string cmd = "exec curl -s -N -H 'Content-Type: application/json' --data-binary @" + a_body +
                            " " + url + "/v1/completions > " + d_out;
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 300 && ReadAll(d_out).find("data: ") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(server.Stop(SIGTERM, 30), 0) << server.log();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 10);
  ::waitpid(d, &st, 0);
  const std::string d_text = ReadAll(d_out);
  EXPECT_NE(d_text.find("shut down before the request finished"), std::string::npos) << d_text.substr(0, 300);
  EXPECT_NE(d_text.find("data: [DONE]"), std::string::npos);
}

// ---- Steering ----------------------------------------------------------------------

// The testbed's tiny qwen2 (2 layers of width 32, its own byte-level BPE whose
// one SPLIT token is ".\n\n") and a vector for its direction.1 (the last
// layer's output) with entries in [-10, 10]; `sign` -1 writes its negation.
const std::string kSteerModel = std::string(SKIPKV_TEST_DATA_DIR) + "/testbed_tiny";

std::string WriteSteerVector(const std::string& name, float sign) {
  const std::string out = Tmp(name);
  skipkv::ControlVector cv;
  cv.width = 32;
  uint64_t x = 99;
  std::vector<float> v(32);
  for (float& f : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    f = sign * static_cast<float>(static_cast<int64_t>(x >> 40) % 2001 - 1000) / 100.0f;
  }
  cv.directions[1] = v;
  const auto st = skipkv::WriteControlVector(out, cv, 2);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

TEST(ServeE2ETest, SteeringByPresetWithTheServersVectorsEqualsRun) {
  const std::string vec = WriteSteerVector("vec.gguf", 1), neg = WriteSteerVector("neg.gguf", -1);
  // A vector the server cannot load stops it before it listens, naming the option.
  {
    ServerProc bad;
    EXPECT_FALSE(bad.Start("-m " + kSteerModel + " --steer " + vec +
                           " --steer-layer 1 --steer-vector neg=" + Tmp("missing.gguf")));
    EXPECT_NE(bad.log().find("--steer-vector neg"), std::string::npos) << bad.log();
  }
  ServerProc server;
  ASSERT_TRUE(server.Start("-m " + kSteerModel + " --steer " + vec +
                           " --steer-layer 1 --steer-coef 40 --steer-vector neg=" + neg))
      << server.log();
  const std::string comp = server.url() + "/v1/completions";
  // The prompt ends with the SPLIT token, so the prefill's last row is steered.
  const std::string prompt = "12 + 30 = 42.\n\n";
  auto complete = [&](const json& kv, int n) {
    json body = {{"prompt", prompt}, {"max_tokens", n}, {"temperature", 0}, {"kv", kv}};
    const Http h = Curl(comp, "POST", body.dump());
    EXPECT_EQ(h.status, 200) << kv.dump() << ": " << h.body;
    json j = json::parse(h.body, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("choices")) << h.body;
    return j;
  };
  auto run = [&](const std::string& args, int n) {
    return RunAlone(prompt, n, "-m " + kSteerModel + " " + args);
  };
  json full = complete({{"policy", "fullkv"}}, 40);
  json seal = complete({{"policy", "seal"}}, 40);
  json& kvx = seal["kv"];
  EXPECT_EQ(kvx["method"]["steer.vector"], "default") << kvx.dump();
  EXPECT_FALSE(kvx["method"].contains("steer.file")) << "the server's path is not echoed";
  EXPECT_EQ(kvx["method"]["steer.coef"], 40);
  EXPECT_EQ(kvx["method"]["policy"], "full");
  ASSERT_GE(kvx["diagnostics"].value("steer.events", 0.0), 1) << kvx.dump();
  // Greedy seal equals `skipkv run --method seal` with the same vector and coefficient.
  json seal_run = run("--method seal --steer " + vec + " --steer-layer 1 --steer-coef 40", 40);
  EXPECT_EQ(seal["choices"][0]["text"], seal_run["text"]);
  EXPECT_EQ(seal["usage"]["completion_tokens"], seal_run["generated_tokens"]);
  EXPECT_EQ(full["choices"][0]["text"], run("--kv-policy full", 40)["text"]);
  EXPECT_NE(seal["choices"][0]["text"], full["choices"][0]["text"]) << "coefficient 40 changed nothing";
  // Per-request coefficients and named vectors: -40 x (-V) adds what 40 x V
  // adds; coefficient 0 adds nothing.
  json neg40 = complete({{"policy", "seal"}, {"steer_vector", "neg"}, {"steer_coef", -40}}, 40);
  EXPECT_EQ(neg40["kv"]["method"]["steer.vector"], "neg");
  EXPECT_EQ(neg40["choices"][0]["text"], seal["choices"][0]["text"]);
  EXPECT_EQ(complete({{"policy", "seal"}, {"steer_coef", 0}}, 40)["choices"][0]["text"],
            full["choices"][0]["text"]);
  // skipkv with the server's vector: SkipKV's adaptive steering, as `run --kv-policy skipkv --steer`.
  json sk = complete(
      {{"policy", "skipkv"}, {"budget", 24}, {"window", 4}, {"interval", 8}, {"steer_gamma", 0.5}}, 60);
  EXPECT_EQ(sk["kv"]["method"]["steer.mode"], "adaptive");
  EXPECT_EQ(sk["choices"][0]["text"],
            run("--kv-policy skipkv --kv-budget 24 --kv-window 4 --kv-interval 8 --mix-lambda 0.1 --steer " +
                    vec + " --steer-layer 1 --steer-gamma 0.5",
                60)["text"]);
  // Bad steering fields: 400s naming the field; the server never opens a path from a request.
  struct Case {
    json kv;
    std::string param, words;
  };
  const std::vector<Case> cases = {
      {{{"policy", "seal"}, {"steer_vector", "pos"}}, "kv.steer_vector", "it has: default, neg"},
      {{{"policy", "seal"}, {"steer_vector", vec}}, "kv.steer_vector", "not a path"},
      {{{"policy", "seal"}, {"steer_layer", 0}}, "kv.steer_layer", "no direction"},
      {{{"policy", "seal"}, {"steer_coef", "high"}}, "kv.steer_coef", "must be a number"},
      {{{"policy", "rkv"}, {"budget", 24}, {"steer_vector", "neg"}}, "kv.steer_vector", "does not steer"},
      {{{"policy", "seal"}, {"steer_gamma", 1}}, "kv.steer_gamma", "fixed strength"},
  };
  for (const Case& c : cases) {
    json body = {{"prompt", prompt}, {"max_tokens", 4}, {"kv", c.kv}};
    const Http h = Curl(comp, "POST", body.dump());
    EXPECT_EQ(h.status, 400) << c.kv.dump() << ": " << h.body;
    const json j = json::parse(h.body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << h.body;
    EXPECT_EQ(j["error"]["param"], c.param) << h.body;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(c.words), std::string::npos) << h.body;
  }
  EXPECT_EQ(server.Stop(SIGTERM, 30), 0) << server.log();
}

}  // namespace
