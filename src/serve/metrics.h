// Server metrics in the Prometheus text exposition format (version 0.0.4):
// request and token counters, KV gauges from ServingStats, the queue, and a
// time-to-first-token histogram. Thread-safe: HTTP threads record, /metrics
// renders.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "skipkv/server_engine.h"

namespace skipkv::serve {

class Metrics {
 public:
  // Upper bounds (seconds) of the TTFT histogram buckets; +Inf is implicit.
  static constexpr std::array<double, 12> kTtftBuckets = {0.005, 0.01, 0.025, 0.05, 0.1,  0.25,
                                                          0.5,   1.0,  2.5,   5.0,  10.0, 30.0};

  // One finished HTTP request: endpoint path and status code.
  void CountRequest(const std::string& endpoint, int status);
  // Time from a request's arrival to its first generated token.
  void ObserveTtft(double seconds);
  // Requests refused because the queue was full (also counted by CountRequest as 503).
  void CountRejected();

  // The exposition text: skipkv_http_requests_total{endpoint,code},
  // skipkv_requests_{submitted,completed,cancelled,failed}_total,
  // skipkv_rejected_total, skipkv_{prompt,generated}_tokens_total,
  // skipkv_kv_compressions_total, skipkv_kv_{allocated,live,reserved,peak_allocated,limit}_bytes,
  // skipkv_requests_{waiting,active}, skipkv_queue_length (waiting + not yet
  // handed to the engine: `inbox`), skipkv_ttft_seconds (histogram).
  std::string Render(const ServingStats& stats, int64_t inbox) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> http_;
  std::array<int64_t, kTtftBuckets.size()> ttft_counts_{};  // non-cumulative per bucket
  int64_t ttft_count_ = 0;
  double ttft_sum_ = 0;
  int64_t rejected_ = 0;
};

}  // namespace skipkv::serve
