// HTTP limits and the handler thread pool; see http_limits.h.
#include "serve/http_limits.h"

#include <httplib.h>
#include <pthread.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "serve/api_request.h"
#include "util/check.h"

namespace skipkv::serve {
namespace {

// httplib::ThreadPool with pthreads of a given stack size (std::thread cannot
// set one: its stacks follow `ulimit -s`, which differs between machines).
class StackThreadPool : public httplib::TaskQueue {
 public:
  StackThreadPool(int n, size_t stack_bytes) {
    pthread_attr_t attr;
    SKIPKV_CHECK(pthread_attr_init(&attr) == 0);
    SKIPKV_CHECK(pthread_attr_setstacksize(&attr, stack_bytes) == 0);
    threads_.resize(static_cast<size_t>(n));
    for (pthread_t& t : threads_) {
      SKIPKV_CHECK(pthread_create(&t, &attr, &StackThreadPool::Main, this) == 0);
    }
    pthread_attr_destroy(&attr);
  }
  ~StackThreadPool() override = default;

  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      shutdown_ = true;
    }
    cv_.notify_all();
    for (pthread_t t : threads_) pthread_join(t, nullptr);
  }

 private:
  static void* Main(void* self) {
    auto* pool = static_cast<StackThreadPool*>(self);
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(pool->mu_);
        pool->cv_.wait(lock, [&] { return !pool->jobs_.empty() || pool->shutdown_; });
        if (pool->shutdown_ && pool->jobs_.empty()) return nullptr;
        fn = std::move(pool->jobs_.front());
        pool->jobs_.pop_front();
      }
      // One connection; httplib turns handler exceptions into responses, and
      // anything escaping that must not end the process.
      try {
        fn();
      } catch (...) {
      }
    }
  }

  std::vector<pthread_t> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool shutdown_ = false;
};

void SendApiError(httplib::Response& res, int status, const char* type, std::string message) {
  ApiError e;
  e.http_status = status;
  e.type = type;
  e.message = std::move(message);
  res.status = status;
  res.set_content(ErrorJson(e), "application/json");
}

}  // namespace

void ApplyHttpLimits(const HttpLimits& limits, httplib::Server& http) {
  http.set_payload_max_length(limits.max_body_bytes);
  http.set_read_timeout(limits.read_timeout_s, 0);
  http.set_write_timeout(limits.write_timeout_s, 0);
  http.set_keep_alive_timeout(limits.keep_alive_timeout_s);
  http.set_keep_alive_max_count(limits.keep_alive_max_count);
  const size_t max_headers = limits.max_header_count;
  http.set_pre_routing_handler([max_headers](const httplib::Request& req, httplib::Response& res) {
    // Runs after the headers, before the body is read.
    if (req.headers.size() > max_headers) {
      SendApiError(res, 431, "invalid_request_error",
                   std::to_string(req.headers.size()) + " header fields exceed the limit of " +
                       std::to_string(max_headers));
      return httplib::Server::HandlerResponse::Handled;
    }
    // cpp-httplib 0.11.4 reads a chunked body whole, ignoring the payload
    // limit (256 MiB sent grew the server by 500 MiB): refused unread.
    if (req.has_header("Transfer-Encoding")) {
      SendApiError(res, 411, "invalid_request_error",
                   "chunked request bodies are not accepted: send Content-Length");
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string message = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      message += std::string(": ") + ex.what();
    } catch (...) {
    }
    SendApiError(res, 500, "server_error", std::move(message));
  });
  const int threads = std::max(4, limits.threads);
  const size_t stack = limits.thread_stack_bytes;
  http.new_task_queue = [threads, stack] { return new StackThreadPool(threads, stack); };
}

size_t CurrentThreadStackBytes() {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
  size_t size = 0;
  pthread_attr_getstacksize(&attr, &size);
  pthread_attr_destroy(&attr);
  return size;
}

}  // namespace skipkv::serve
