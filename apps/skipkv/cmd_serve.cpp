// `skipkv serve`: an OpenAI-compatible HTTP server (src/serve/server.h) over
// one model, with per-request KV methods ("kv" extension field) and
// admission by KV memory. Prints "skipkv serve: listening on http://HOST:PORT"
// on stdout once bound (with --port 0, the port the OS chose). SIGTERM or
// SIGINT: graceful shutdown within --shutdown-timeout seconds. Steering
// vectors come only from this command line (--steer, --steer-vector).
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "command_registry.h"
#include "engine_options.h"
#include "serve/server.h"
#include "skipkv/server_engine.h"
#include "method_flags.h"
#include "preset_file_flag.h"

namespace skipkv::cli {
namespace {

struct ServeOptions {
  std::string model;
  std::string tokenizer;
  int threads = 0;
  std::string kv_type = "f16";
  std::string weights = "auto";
  int n_ubatch = 512;
  int64_t n_ctx = 0;
  std::string chat_template = "auto";
  MethodConfig method;  // the default method (requests without "kv"): its kv; and the default vector
  MethodFlags method_flags;  // declared parameters with kArgServe (skipkv/method_args.h)
  PresetFileFlag presets;    // --presets FILE
  std::string kv_memory;
  int max_active = 0;
  bool no_mix = false;
  serve::ServerOptions server;
  std::vector<std::string> steer_vectors;  // --steer-vector NAME=FILE
};

int Fail(const std::string& msg) {
  std::fprintf(stderr, "skipkv serve: %s\n", msg.c_str());
  return 1;
}

int RunServe(ServeOptions& o) {
  if (Status st = o.method_flags.FinishKv(); !st.ok()) return Fail(st.message());
  if (Status st = o.presets.Load(); !st.ok()) return Fail(st.message());
  o.server.file_presets = o.presets.entries();
  auto common = CommonEngineOptions(o.model, o.tokenizer, o.threads, o.kv_type, o.n_ubatch, o.weights);
  if (!common.ok()) return Fail(common.status().message());
  EngineOptions eo = *common;
  eo.kv = o.method.kv;
  eo.n_ctx = o.n_ctx;
  eo.chat_template = o.chat_template;
  ServingOptions so;
  if (!o.kv_memory.empty()) {
    auto bytes = serve::ParseByteSize(o.kv_memory);
    if (!bytes.ok()) return Fail("--kv-memory: " + bytes.status().message());
    so.kv_memory_bytes = *bytes;
  }
  so.max_active = o.max_active;
  so.mix_prefill_decode = !o.no_mix;
  if (o.server.max_queue < 1)
    return Fail("--max-queue must be >= 1, got " + std::to_string(o.server.max_queue));
  if (o.server.port < 0 || o.server.port > 65535) {
    return Fail("--port must be in [0, 65535], got " + std::to_string(o.server.port));
  }
  if (!(o.server.shutdown_timeout_s >= 0)) return Fail("--shutdown-timeout must be >= 0");
  if (o.server.default_max_tokens < 0) return Fail("--default-max-tokens must be >= 0");

  // Signals are taken by a watcher thread: block them before any thread starts.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a vanished client is a failed write, not a signal

  auto engine = Engine::Create(eo);
  if (!engine.ok()) return Fail(engine.status().ToString());
  auto vector = o.method_flags.Vector();
  if (!vector.ok()) return Fail(vector.status().message());
  auto vectors = serve::LoadSteerVectors(*vector, o.steer_vectors, (*engine)->info().n_layers,
                                         (*engine)->info().d_model);
  if (!vectors.ok()) return Fail(vectors.status().ToString());
  o.server.steer_vectors = std::move(vectors).value();
  auto serving = ServingEngine::Create(std::move(engine).value(), so);
  if (!serving.ok()) return Fail(serving.status().ToString());
  serve::Server server(std::move(serving).value(), o.server);

  std::atomic<bool> finished{false};
  std::thread watcher([&] {
    timespec tick{0, 200 * 1000 * 1000};
    while (!finished) {
      if (sigtimedwait(&sigs, nullptr, &tick) > 0) {
        std::fprintf(stderr, "skipkv serve: shutting down (in-flight requests have %.0f s)\n",
                     o.server.shutdown_timeout_s);
        server.Shutdown();
      }
    }
  });
  Status st = server.Run([&](int port) {
    std::printf("skipkv serve: listening on http://%s:%d\n", o.server.host.c_str(), port);
    std::fflush(stdout);
  });
  finished = true;
  watcher.join();
  if (!st.ok()) return Fail(st.ToString());
  std::fprintf(stderr, "skipkv serve: stopped\n");
  return 0;
}

CommandRegistrar reg("serve", "OpenAI-compatible HTTP server with per-request KV methods", [](CLI::App& sub) {
  auto o = std::make_shared<ServeOptions>();
  sub.add_option("-m,--model", o->model,
                 "Model: .gguf file, Hugging Face checkpoint directory or llama2.c .bin "
                 "(default: the embedded stories260K)");
  sub.add_option("--tokenizer", o->tokenizer, "llama2.c models: tokenizer.bin (default: beside the model)");
  sub.add_option("--host", o->server.host, "Address to bind (loopback by default)")->capture_default_str();
  sub.add_option("--port", o->server.port, "Port (0 = any free port, printed when listening)")
      ->capture_default_str();
  sub.add_option("--api-key", o->server.api_key, "Require 'Authorization: Bearer KEY' on /v1/*");
  sub.add_option("--kv-memory", o->kv_memory,
                 "Limit on the worst-case K/V bytes of running requests, e.g. 2GiB (default: none); "
                 "a request starts only when it fits")
      ->capture_default_str();
  sub.add_option("--max-queue", o->server.max_queue, "Requests waiting to start before 503 (>= 1)")
      ->capture_default_str();
  sub.add_option("--max-active", o->max_active, "Requests running at once (0 = as the KV memory allows)")
      ->capture_default_str();
  sub.add_option("--model-id", o->server.model_id,
                 "Model name in /v1/models and responses (default: the model's)");
  sub.add_option("--default-max-tokens", o->server.default_max_tokens,
                 "max_tokens of requests that give none (0 = up to the context)")
      ->capture_default_str();
  sub.add_option("--shutdown-timeout", o->server.shutdown_timeout_s,
                 "Seconds in-flight requests may finish after SIGTERM before they are cancelled")
      ->capture_default_str();
  sub.add_option("--http-threads", o->server.http_threads, "HTTP handler threads (a stream holds one)")
      ->capture_default_str();
  sub.add_flag("--no-mix", o->no_mix,
               "Alternate prefill and decode steps instead of mixing them in one forward");
  sub.add_option("-t,--threads", o->threads, "Worker threads (0 = all cores)")->capture_default_str();
  AddWeightsOption(sub, &o->weights);
  sub.add_option("--kv-type", o->kv_type, "KV cache element type: f16 or f32")->capture_default_str();
  // The default method's --kv-policy, --kv-budget, ... and the default steering vector
  // (--steer, --steer-layer, strengths): requests choose steering by preset (seal, skipkv, ...).
  o->method_flags.Add(sub, &o->method, kArgServe);
  o->presets.Add(sub);
  sub.add_option("--ubatch", o->n_ubatch, "Prefill chunk: most prompt tokens per sequence per forward")
      ->capture_default_str();
  sub.add_option("-c,--ctx", o->n_ctx, "Context length to allow (0 = the model's)")->capture_default_str();
  sub.add_option("--chat-template", o->chat_template, "auto, r1-distill, chatml or raw")
      ->capture_default_str();
  sub.add_option(
      "--steer-vector", o->steer_vectors,
      "NAME=FILE: a further steering vector requests may pick with kv.steer_vector (needs --steer; "
      "shares its --steer-layer and strengths)");
  return [o] { return RunServe(*o); };
});

}  // namespace
}  // namespace skipkv::cli
