// The HTTP server; see server.h.
#include "serve/server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "serve/api_convert.h"
#include "serve/api_request.h"
#include "serve/api_response.h"
#include "serve/http_limits.h"
#include "serve/metrics.h"
#include "serve/peer_watch.h"
#include "util/logging.h"

namespace skipkv::serve {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

// One generation request, shared by its HTTP handler and the engine thread.
struct Job {
  Request request;
  std::string preset;  // the "kv" preset name, for the response's extension
  ResponseInfo info;
  bool stream = false, include_usage = false;
  Clock::time_point arrival;

  std::mutex mu;
  std::condition_variable cv;
  // Guarded by mu:
  bool accepted = false;  // the engine took it (Submit succeeded)
  bool done = false;      // finished, failed or refused
  std::optional<ApiError> error;
  std::string pending;  // text produced and not yet sent
  bool first_token = false;
  std::optional<GenerationResult> result;

  std::atomic<bool> cancel{false};  // the client went away
  RequestId id = 0;                 // engine thread only
};

void SendError(httplib::Response& res, const ApiError& e) {
  res.status = e.http_status;
  res.set_content(ErrorJson(e), "application/json");
}

}  // namespace

class Server::Impl {
 public:
  Impl(std::unique_ptr<ServingEngine> engine, const ServerOptions& options)
      : serving_(std::move(engine)), opts_(options) {
    if (opts_.model_id.empty()) opts_.model_id = serving_->engine().info().name;
    seed_base_ = std::random_device{}();
    stats_ = serving_->stats();
  }

  Status Run(const std::function<void(int)>& on_listening);
  void Shutdown() {
    std::lock_guard<std::mutex> lock(shutdown_mu_);
    shutdown_requested_ = true;
    shutdown_cv_.notify_all();
  }

 private:
  void Routes();
  bool Authorized(const httplib::Request& req, httplib::Response& res);
  void HandleGenerate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  void EngineLoop();
  void AcceptJob(const std::shared_ptr<Job>& job);
  void FinishJob(Job& job, std::optional<ApiError> error, std::optional<GenerationResult> result);
  void JobReleased() {
    std::lock_guard<std::mutex> lock(shutdown_mu_);
    --in_flight_;
    shutdown_cv_.notify_all();
  }

  std::unique_ptr<ServingEngine> serving_;
  ServerOptions opts_;
  httplib::Server http_;
  Metrics metrics_;
  uint64_t seed_base_ = 0;
  std::atomic<uint64_t> next_seq_{1};

  // Hand-over queue to the engine thread.
  std::mutex inbox_mu_;
  std::condition_variable inbox_cv_;
  std::deque<std::shared_ptr<Job>> inbox_;
  int64_t engine_waiting_ = 0;  // last published ServingStats::waiting (guarded by inbox_mu_)
  bool stop_engine_ = false;    // guarded by inbox_mu_

  // Published by the engine thread after every turn, for /metrics.
  std::mutex stats_mu_;
  ServingStats stats_;

  // Shutdown.
  std::mutex shutdown_mu_;
  std::condition_variable shutdown_cv_;
  bool shutdown_requested_ = false;
  int64_t in_flight_ = 0;  // jobs whose handler has not finished writing
  std::atomic<bool> draining_{false};
  Status fatal_;
};

bool Server::Impl::Authorized(const httplib::Request& req, httplib::Response& res) {
  if (opts_.api_key.empty()) return true;
  if (req.get_header_value("Authorization") == "Bearer " + opts_.api_key) return true;
  ApiError e;
  e.http_status = 401;
  e.code = "invalid_api_key";
  e.message = req.has_header("Authorization") ? "Incorrect API key provided"
                                              : "Missing API key: send 'Authorization: Bearer <key>'";
  SendError(res, e);
  return false;
}

void Server::Impl::HandleGenerate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  if (!Authorized(req, res)) return;
  if (draining_) {
    ApiError e;
    e.http_status = 503;
    e.type = "server_error";
    e.message = "the server is shutting down";
    SendError(res, e);
    return;
  }
  ParseOutcome parsed = ParseRequest(req.body, endpoint, opts_.max_body_bytes);
  if (!parsed.ok()) return SendError(res, parsed.error);
  ConvertLimits limits;
  limits.n_ctx = serving_->engine().info().context_length;
  limits.default_max_tokens = opts_.default_max_tokens;
  const uint64_t seq = next_seq_++;
  limits.default_seed = seed_base_ + seq;
  limits.steer_vectors = &opts_.steer_vectors;
  limits.file_presets = opts_.file_presets;
  ConvertOutcome conv = ToEngineRequest(*parsed.request, limits);
  if (!conv.ok()) return SendError(res, conv.error);

  auto job = std::make_shared<Job>();
  job->request = std::move(*conv.request);
  if (conv.preset) job->preset = conv.preset->preset;
  job->stream = parsed.request->stream;
  job->include_usage = parsed.request->include_usage;
  job->arrival = Clock::now();
  job->info.endpoint = endpoint;
  job->info.id = (endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-") + std::to_string(seq);
  job->info.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  job->info.model = opts_.model_id;
  job->info.steer_vector = conv.steer_vector;
  job->info.not_applied = conv.not_applied;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    if (static_cast<int64_t>(inbox_.size()) + engine_waiting_ >= opts_.max_queue) {
      metrics_.CountRejected();
      ApiError e;
      e.http_status = 503;
      e.type = "server_error";
      e.code = "queue_full";
      e.message = "the request queue is full (" + std::to_string(opts_.max_queue) + " waiting); retry later";
      res.set_header("Retry-After", std::to_string(opts_.retry_after_s));
      return SendError(res, e);
    }
    {
      std::lock_guard<std::mutex> s(shutdown_mu_);
      ++in_flight_;
    }
    inbox_.push_back(job);
    inbox_cv_.notify_all();
  }
  // Wait for the engine to accept or refuse it (validation happens there).
  // A plain request's client is watched while it waits: if it goes away,
  // the request is cancelled (the engine loop frees its KV at its next turn).
  const int conn =
      job->stream ? -1
                  : FindConnectionSocket(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
  {
    std::unique_lock<std::mutex> lock(job->mu);
    job->cv.wait(lock, [&] { return job->accepted || job->done; });
    if (!job->stream || job->error) {
      while (!job->cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return job->done; })) {
        if (conn >= 0 && !job->cancel && PeerClosed(conn)) job->cancel = true;
      }
      if (job->error) {
        SendError(res, *job->error);
      } else {
        res.set_content(CompletionJson(job->info, *job->result, job->preset), "application/json");
      }
      lock.unlock();
      JobReleased();
      return;
    }
  }
  // Streaming: server-sent events as the engine produces text.
  auto first = std::make_shared<bool>(true);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, first](size_t, httplib::DataSink& sink) -> bool {
        try {
          auto send = [&](const std::string& s) {
            if (sink.write(s.data(), s.size())) return true;
            job->cancel = true;  // the client is gone
            return false;
          };
          if (*first && job->info.endpoint == Endpoint::kChat) {
            if (!send(SseEvent(ChunkJson(job->info, "", true, nullptr, job->include_usage)))) return false;
            *first = false;
          }
          std::unique_lock<std::mutex> lock(job->mu);
          job->cv.wait_for(lock, std::chrono::milliseconds(200),
                           [&] { return !job->pending.empty() || job->done; });
          std::string text = std::exchange(job->pending, {});
          const bool done = job->done;
          lock.unlock();
          if (!text.empty()) {
            if (!send(SseEvent(ChunkJson(job->info, text, *first, nullptr, job->include_usage))))
              return false;
            *first = false;
          }
          if (!done) return true;
          std::string tail;
          if (job->error) {
            tail = SseEvent(ErrorJson(*job->error));
          } else {
            tail = SseEvent(
                ChunkJson(job->info, "", false, OpenAiFinishReason(job->result->finish), job->include_usage));
            if (job->include_usage) tail += SseEvent(UsageChunkJson(job->info, *job->result, job->preset));
          }
          tail += "data: [DONE]\n\n";
          if (!send(tail)) return false;
          sink.done();
          return true;
        } catch (...) {  // this stream alone ends (the engine cancels its request)
          job->cancel = true;
          return false;
        }
      },
      [this, job](bool success) {
        if (!success) job->cancel = true;
        JobReleased();
      });
}

void Server::Impl::FinishJob(Job& job, std::optional<ApiError> error,
                             std::optional<GenerationResult> result) {
  std::lock_guard<std::mutex> lock(job.mu);
  job.error = std::move(error);
  job.result = std::move(result);
  job.done = true;
  job.cv.notify_all();
}

void Server::Impl::AcceptJob(const std::shared_ptr<Job>& job) {
  RequestCallbacks cb;
  Job* j = job.get();
  cb.on_token = [this, j](const TokenEvent& ev) {
    std::lock_guard<std::mutex> lock(j->mu);
    if (ev.token >= 0 && !j->first_token) {
      j->first_token = true;
      metrics_.ObserveTtft(std::chrono::duration<double>(Clock::now() - j->arrival).count());
    }
    j->pending += ev.text;
    j->cv.notify_all();
    return !j->cancel.load();
  };
  // `job` is kept alive by the engine loop's live list until on_done has run.
  cb.on_done = [this, j](const Status& st, GenerationResult&& r) {
    if (!st.ok()) {
      ApiError e = ErrorFromStatus(st);
      e.http_status = 500;
      e.type = "server_error";
      FinishJob(*j, e, std::nullopt);
    } else if (r.finish == FinishReason::kCancelled && !j->cancel) {
      ApiError e;
      e.http_status = 503;
      e.type = "server_error";
      e.message = "the server shut down before the request finished";
      FinishJob(*j, e, std::nullopt);
    } else {
      FinishJob(*j, std::nullopt, std::move(r));
    }
  };
  StatusOr<RequestId> id = serving_->Submit(job->request, std::move(cb));
  if (!id.ok()) {
    FinishJob(*job, ErrorFromStatus(id.status()), std::nullopt);
    return;
  }
  job->id = *id;
  std::lock_guard<std::mutex> lock(job->mu);
  job->accepted = true;
  job->cv.notify_all();
}

void Server::Impl::EngineLoop() {
  std::vector<std::shared_ptr<Job>> live;
  bool busy = false;
  while (true) {
    std::deque<std::shared_ptr<Job>> incoming;
    bool stop = false;
    {
      std::unique_lock<std::mutex> lock(inbox_mu_);
      if (!busy)
        inbox_cv_.wait_for(lock, std::chrono::milliseconds(50),
                           [&] { return !inbox_.empty() || stop_engine_; });
      incoming.swap(inbox_);
      // The moved jobs still wait, now on the engine's side: count them until
      // the stats published after this step replace the figure, or a request
      // arriving in between would find the queue empty (max_queue overrun).
      engine_waiting_ += static_cast<int64_t>(incoming.size());
      stop = stop_engine_;
    }
    for (auto& job : incoming) {
      if (stop) {
        ApiError e;
        e.http_status = 503;
        e.type = "server_error";
        e.message = "the server is shutting down";
        FinishJob(*job, e, std::nullopt);
        continue;
      }
      AcceptJob(job);
      if (job->accepted) live.push_back(job);
    }
    for (auto& job : live) {
      bool done;
      {
        std::lock_guard<std::mutex> lock(job->mu);
        done = job->done;
      }
      if (!done && (job->cancel || stop)) serving_->Cancel(job->id);
    }
    std::erase_if(live, [](const std::shared_ptr<Job>& j) {
      std::lock_guard<std::mutex> lock(j->mu);
      return j->done;
    });
    if (stop && live.empty()) break;
    StatusOr<bool> ran = serving_->Step();
    if (!ran.ok()) {
      SKIPKV_LOG_ERROR("serve: engine step failed: %s", ran.status().ToString().c_str());
      fatal_ = ran.status();
      for (auto& job : live) {
        ApiError e = ErrorFromStatus(ran.status());
        e.http_status = 500;
        e.type = "server_error";
        FinishJob(*job, e, std::nullopt);
      }
      live.clear();
      Shutdown();
      busy = false;
    } else {
      busy = *ran;
    }
    const ServingStats st = serving_->stats();
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      stats_ = st;
    }
    {
      std::lock_guard<std::mutex> lock(inbox_mu_);
      engine_waiting_ = st.waiting;
    }
  }
}

void Server::Impl::Routes() {
  http_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    HandleGenerate(req, res, Endpoint::kChat);
  });
  http_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    HandleGenerate(req, res, Endpoint::kCompletions);
  });
  http_.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorized(req, res)) return;
    json model = {{"id", opts_.model_id}, {"object", "model"}, {"created", 0}, {"owned_by", "skipkv"}};
    res.set_content(json{{"object", "list"}, {"data", json::array({model})}}.dump(), "application/json");
  });
  http_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (draining_) {
      res.status = 503;
      res.set_content(R"({"status":"draining"})", "application/json");
    } else {
      res.set_content(R"({"status":"ok"})", "application/json");
    }
  });
  http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    ServingStats st;
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      st = stats_;
    }
    int64_t inbox;
    {
      std::lock_guard<std::mutex> lock(inbox_mu_);
      inbox = static_cast<int64_t>(inbox_.size());
    }
    res.set_content(metrics_.Render(st, inbox), "text/plain; version=0.0.4");
  });
  // Unknown paths and wrong methods: OpenAI-shaped 404s.
  http_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e;
    e.http_status = res.status;
    e.message = res.status == 404 ? "unknown endpoint " + req.method + " " + req.path
                                  : "HTTP error " + std::to_string(res.status);
    SendError(res, e);
  });
  http_.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    // Known routes only, so random paths cannot grow the series without bound.
    static const char* const kRoutes[] = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health",
                                          "/metrics"};
    std::string endpoint = "other";
    for (const char* r : kRoutes) {
      if (req.path == r) endpoint = r;
    }
    metrics_.CountRequest(endpoint, res.status);
  });
  // Stack size, body and header limits, timeouts, the 500 exception handler
  // (docs/serving.md, "Hostile clients").
  HttpLimits limits;
  limits.threads = opts_.http_threads;
  limits.max_body_bytes = opts_.max_body_bytes;
  ApplyHttpLimits(limits, http_);
  // A stream is many small writes (one SSE event per token): with Nagle's
  // algorithm each waits for the client's delayed ACK (~40 ms on Linux), a
  // floor under every token's latency whatever the model's speed.
  http_.set_tcp_nodelay(true);
}

Status Server::Impl::Run(const std::function<void(int)>& on_listening) {
  Routes();
  int port = opts_.port;
  if (port == 0) {
    port = http_.bind_to_any_port(opts_.host);
    if (port <= 0) return IoError("cannot bind " + opts_.host + " to any port");
  } else if (!http_.bind_to_port(opts_.host, port)) {
    return IoError("cannot bind " + opts_.host + ":" + std::to_string(port) +
                   " (in use, or not an address here)");
  }
  std::thread engine([this] { EngineLoop(); });
  std::thread listener([this] { http_.listen_after_bind(); });
  if (on_listening) on_listening(port);
  {
    std::unique_lock<std::mutex> lock(shutdown_mu_);
    shutdown_cv_.wait(lock, [&] { return shutdown_requested_; });
  }
  // Drain: refuse new requests, let in-flight ones finish until the deadline.
  draining_ = true;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(opts_.shutdown_timeout_s));
  {
    std::unique_lock<std::mutex> lock(shutdown_mu_);
    shutdown_cv_.wait_until(lock, deadline, [&] { return in_flight_ == 0; });
  }
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    stop_engine_ = true;  // cancels what is left
    inbox_cv_.notify_all();
  }
  engine.join();
  {
    // Handlers write their last bytes (errors for cancelled requests).
    std::unique_lock<std::mutex> lock(shutdown_mu_);
    shutdown_cv_.wait_for(lock, std::chrono::seconds(5), [&] { return in_flight_ == 0; });
  }
  http_.stop();
  listener.join();
  return fatal_;
}

Server::Server(std::unique_ptr<ServingEngine> engine, const ServerOptions& options)
    : impl_(std::make_unique<Impl>(std::move(engine), options)) {}
Server::~Server() = default;
Status Server::Run(const std::function<void(int)>& on_listening) { return impl_->Run(on_listening); }
void Server::Shutdown() { impl_->Shutdown(); }

StatusOr<size_t> ParseByteSize(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string num = text.substr(0, i), unit = text.substr(i);
  auto bad = [&] {
    return InvalidArgument("'" + text + "' is not a memory size (e.g. 2GiB, 512MiB, 1000000)");
  };
  if (num.empty() || num.find('.') != num.rfind('.')) return bad();
  double v = 0;
  try {
    v = std::stod(num);
  } catch (...) {
    return bad();
  }
  double mult = 1;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "K" || unit == "KiB")
    mult = 1024.0;
  else if (unit == "M" || unit == "MiB")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "KB")
    mult = 1e3;
  else if (unit == "MB")
    mult = 1e6;
  else if (unit == "GB")
    mult = 1e9;
  else
    return bad();
  const double bytes = v * mult;
  if (!(bytes >= 1) || bytes > 1e15) {
    return InvalidArgument("memory size '" + text + "' must be between 1 byte and 1e15 bytes");
  }
  return static_cast<size_t>(bytes);
}

}  // namespace skipkv::serve
