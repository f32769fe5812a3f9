// The OpenAI-compatible HTTP server over one ServingEngine (cpp-httplib).
//
// Threads: httplib's pool runs the handlers; one engine thread owns the
// ServingEngine and loops: take new jobs from the hand-over queue (Submit,
// which validates; a refused request gets its 400 at once), cancel the jobs
// whose client went away, run one Step(). Handlers wait on their job (plain
// responses) or stream its text as server-sent events as the engine thread
// appends it. A client that disconnects cancels its request (its KV is
// freed at the next engine-loop turn): a stream at its next failed write, a
// plain request within 100 ms (its socket is polled, peer_watch.h). The
// queue is bounded: when the requests not yet started (hand-over + engine
// queue) reach max_queue, new ones get 503 with Retry-After. Shutdown(): new requests get 503, in-flight
// ones may finish until the deadline, the rest are cancelled, then the
// listener stops.
//
// Endpoints: POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
// GET /health, GET /metrics (Prometheus). With an API key, /v1/* require
// "Authorization: Bearer KEY" (401 otherwise); /health and /metrics are open.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "serve/steer_vectors.h"
#include "skipkv/presets.h"
#include "skipkv/server_engine.h"
#include "util/status.h"

namespace skipkv::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0 = any free port (reported to on_listening)
  std::string api_key;             // empty = no authentication
  int max_queue = 64;              // requests waiting to start before 503
  int retry_after_s = 1;           // Retry-After of a 503
  std::string model_id;            // the name /v1/models lists and responses carry
  int64_t default_max_tokens = 0;  // max_tokens when a request gives none (0 = the context)
  double shutdown_timeout_s = 30;  // how long in-flight requests may finish after Shutdown()
  int http_threads = 64;           // handler threads (a streaming request holds one)
  size_t max_body_bytes = 8u << 20;
  SteerVectors steer_vectors;  // vectors requests may steer with (LoadSteerVectors; empty = none)
  std::vector<PresetFileEntry> file_presets;  // presets of --presets FILE, by name in kv.policy
};

class Server {
 public:
  Server(std::unique_ptr<ServingEngine> engine, const ServerOptions& options);
  ~Server();

  // Binds, calls on_listening(port) and serves until Shutdown() completes.
  // IoError when the address cannot be bound; Internal for an engine fault.
  Status Run(const std::function<void(int port)>& on_listening);

  // Graceful stop; callable from any thread, once or more (returns at once).
  void Shutdown();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Parses a memory size: "2GiB", "512MiB", "64KiB", "1G", "1000000" (bytes);
// binary and decimal suffixes (KiB/MiB/GiB, KB/MB/GB, K/M/G binary).
// InvalidArgument naming the value otherwise.
StatusOr<size_t> ParseByteSize(const std::string& text);

}  // namespace skipkv::serve
