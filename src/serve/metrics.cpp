// Prometheus text rendering; see metrics.h.
#include "serve/metrics.h"

#include <cstdio>

namespace skipkv::serve {
namespace {

void Line(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void Value(std::string& out, const std::string& series, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, " %.17g\n", v);
  out += series + buf;
}

void Scalar(std::string& out, const char* name, const char* type, const char* help, double v) {
  Line(out, name, type, help);
  Value(out, name, v);
}

}  // namespace

void Metrics::CountRequest(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++http_[{endpoint, status}];
}

void Metrics::ObserveTtft(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < kTtftBuckets.size(); ++i) {
    if (seconds <= kTtftBuckets[i]) {
      ++ttft_counts_[i];
      break;
    }
  }
  ++ttft_count_;
  ttft_sum_ += seconds;
}

void Metrics::CountRejected() {
  std::lock_guard<std::mutex> lock(mu_);
  ++rejected_;
}

std::string Metrics::Render(const ServingStats& s, int64_t inbox) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  Line(out, "skipkv_http_requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
  for (const auto& [key, n] : http_) {
    Value(out,
          "skipkv_http_requests_total{endpoint=\"" + key.first + "\",code=\"" + std::to_string(key.second) +
              "\"}",
          static_cast<double>(n));
  }
  Scalar(out, "skipkv_requests_submitted_total", "counter", "Generation requests accepted by the engine.",
         static_cast<double>(s.submitted));
  Scalar(out, "skipkv_requests_completed_total", "counter", "Generation requests that finished normally.",
         static_cast<double>(s.completed));
  Scalar(out, "skipkv_requests_cancelled_total", "counter",
         "Generation requests cancelled (client gone, shutdown).", static_cast<double>(s.cancelled));
  Scalar(out, "skipkv_requests_failed_total", "counter", "Generation requests that failed alone.",
         static_cast<double>(s.failed));
  Scalar(out, "skipkv_rejected_total", "counter", "Requests refused with 503 because the queue was full.",
         static_cast<double>(rejected_));
  Scalar(out, "skipkv_prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
         static_cast<double>(s.prompt_tokens));
  Scalar(out, "skipkv_generated_tokens_total", "counter", "Tokens generated.",
         static_cast<double>(s.generated_tokens));
  Scalar(out, "skipkv_kv_compressions_total", "counter", "KV cache compressions (all requests).",
         static_cast<double>(s.compressions));
  Scalar(out, "skipkv_kv_allocated_bytes", "gauge", "K/V bytes allocated by active requests.",
         static_cast<double>(s.kv_allocated_bytes));
  Scalar(out, "skipkv_kv_live_bytes", "gauge", "K/V bytes in live cache slots.",
         static_cast<double>(s.kv_live_bytes));
  Scalar(out, "skipkv_kv_reserved_bytes", "gauge", "Worst-case K/V bytes reserved by active requests.",
         static_cast<double>(s.kv_reserved_bytes));
  Scalar(out, "skipkv_kv_peak_allocated_bytes", "gauge", "Largest K/V allocation seen since start.",
         static_cast<double>(s.kv_peak_allocated_bytes));
  Scalar(out, "skipkv_kv_limit_bytes", "gauge", "The configured KV memory limit (0 = none).",
         static_cast<double>(s.kv_memory_bytes));
  Scalar(out, "skipkv_requests_waiting", "gauge", "Requests queued in the engine, not yet started.",
         static_cast<double>(s.waiting));
  Scalar(out, "skipkv_requests_active", "gauge", "Requests prefilling or decoding.",
         static_cast<double>(s.active));
  Scalar(out, "skipkv_queue_length", "gauge", "Requests waiting to start (engine queue plus hand-over).",
         static_cast<double>(s.waiting + inbox));
  Line(out, "skipkv_ttft_seconds", "histogram", "Time from request arrival to its first generated token.");
  int64_t cumulative = 0;
  for (size_t i = 0; i < kTtftBuckets.size(); ++i) {
    cumulative += ttft_counts_[i];
    char le[32];
    std::snprintf(le, sizeof le, "%g", kTtftBuckets[i]);
    Value(out, std::string("skipkv_ttft_seconds_bucket{le=\"") + le + "\"}", static_cast<double>(cumulative));
  }
  Value(out, "skipkv_ttft_seconds_bucket{le=\"+Inf\"}", static_cast<double>(ttft_count_));
  Value(out, "skipkv_ttft_seconds_sum", ttft_sum_);
  Value(out, "skipkv_ttft_seconds_count", static_cast<double>(ttft_count_));
  return out;
}

}  // namespace skipkv::serve
