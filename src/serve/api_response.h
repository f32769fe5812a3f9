// OpenAI-shaped response bodies: chat.completion / text_completion objects,
// their streaming chunks (server-sent events), usage, and the "kv"
// extension field that carries the method that ran and its KV statistics.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "serve/api_request.h"
#include "skipkv/engine.h"

namespace skipkv::serve {

struct ResponseInfo {
  Endpoint endpoint = Endpoint::kChat;
  std::string id;       // "chatcmpl-N" / "cmpl-N"
  int64_t created = 0;  // Unix seconds
  std::string model;
  std::string steer_vector;  // the steering vector's name when the method steered ("" otherwise)
  std::vector<std::string> not_applied;  // the preset's settings the request did not use (ConvertOutcome)
};

// eos and stop strings -> "stop"; max_tokens and the context -> "length";
// a cancelled request (server shutdown) -> "length" is never sent: the
// server reports an error instead, so this returns "stop" for it.
const char* OpenAiFinishReason(FinishReason r);

// {"prompt_tokens", "completion_tokens", "total_tokens"}.
nlohmann::json UsageJson(const GenerationResult& r);
// The extension: {"method": MethodJson, "preset": name (if any), "peak_live_bytes",
// "allocated_bytes", "peak_slots", "final_slots", "compressions", "slots_evicted",
// "effective_budget", "penalized_evicted", "prefill_ms", "decode_ms", "queue_ms",
// "diagnostics": {the method's counters, e.g. "steer.events", "skipkv.sentences"}}.
// A steering method's "steer.file" (a server path) is replaced by
// "steer.vector": `steer_vector`, the name the request can use. With
// `not_applied` non-empty: "not_applied": [one line per preset setting the
// request did not use].
nlohmann::json KvExtensionJson(const GenerationResult& r, const std::string& preset,
                               const std::string& steer_vector = "",
                               const std::vector<std::string>& not_applied = {});

// The whole non-streaming body.
std::string CompletionJson(const ResponseInfo& info, const GenerationResult& r, const std::string& preset);
// One streaming chunk with new text (chat: the first one also carries
// role "assistant"), or the closing chunk when `finish` is non-null.
// `usage_null`: with stream_options.include_usage every chunk has "usage": null.
std::string ChunkJson(const ResponseInfo& info, std::string_view text, bool first, const char* finish,
                      bool usage_null);
// The final usage chunk (choices: [], usage, and the kv extension).
std::string UsageChunkJson(const ResponseInfo& info, const GenerationResult& r, const std::string& preset);
// "data: <json>\n\n".
std::string SseEvent(std::string_view json);

}  // namespace skipkv::serve
