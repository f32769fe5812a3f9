// Parsing and validation of OpenAI-style request bodies (POST
// /v1/chat/completions and /v1/completions), which are untrusted input.
// Depends on nlohmann::json and util/status only (the libFuzzer target
// tests/fuzz/fuzz_serve_request.cpp builds this file alone); turning the
// result into an engine Request (chat template, method presets, limits that
// need the model) is api_convert.h's job.
//
// Accepted fields (others are ignored, as OpenAI's own server does for
// unknown ones, except those listed as refused):
//   model            string (echoed; any name is accepted)
//   messages         chat: non-empty array of {role: "system"|"user"|"assistant"|"developer",
//                    content: string | array of {type: "text", text: string}}
//   prompt           completions: string, array of one string, or non-empty array of token ids
//   max_tokens / max_completion_tokens   integer >= 1
//   temperature      number in [0, 2]          (default 1, OpenAI's)
//   top_p            number in (0, 1]          (default 1)
//   seed             integer >= 0              (default: a per-request value)
//   stop             string or array of at most 4 non-empty strings
//   stream           boolean; stream_options: {include_usage: boolean}
//   n                1 only
//   presence_penalty, frequency_penalty   0 only (not implemented)
//   logprobs, echo, tools, suffix, best_of > 1   refused (not implemented)
//   kv               the extension: {"policy": PRESET, "budget": integer,
//                    FIELD: number|boolean ...} where PRESET is a method
//                    preset of src/eval/presets.h (fullkv, streaming, h2o,
//                    snapkv, rkv, rkv+sentence, skipkv; "full" = fullkv) and
//                    FIELD one of its override fields (window, interval, ...,
//                    steer_layer, steer_coef, steer_alpha0, ...); and
//                    "steer_vector": NAME, a steering vector the server was
//                    started with (a name, never a path).
// Every error names the field (as OpenAI's error "param") and the value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skipkv::serve {

enum class Endpoint { kChat, kCompletions };

// An error in OpenAI's shape: HTTP status, error.type, error.param,
// error.code (may be empty) and error.message.
struct ApiError {
  int http_status = 400;
  std::string type = "invalid_request_error";
  std::string param;
  std::string code;
  std::string message;
};

// The body as OpenAI's error JSON: {"error": {"message", "type", "param", "code"}}
// (param and code null when empty).
std::string ErrorJson(const ApiError& e);

// The per-request method extension ("kv").
struct KvSpec {
  std::string preset;                  // a preset name ("full" normalised to "fullkv")
  int64_t budget = 0;                  // 0 when absent
  std::vector<std::string> overrides;  // "FIELD=VALUE" in the object's order
  std::string steer_vector;            // kv.steer_vector: a vector name ("" = the server's default)
};

struct ParsedRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;
  std::vector<std::pair<std::string, std::string>> messages;  // chat: (role, content)
  std::string prompt;                  // completions: the text (when prompt_tokens is empty)
  std::vector<int32_t> prompt_tokens;  // completions: token ids given directly
  std::optional<int64_t> max_tokens;
  double temperature = 1.0;
  double top_p = 1.0;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  std::optional<KvSpec> kv;
};

// Parses `body` for `endpoint`. Either the request or an ApiError (400, or
// 413 for a body over max_body_bytes). A body nesting deeper than
// kMaxJsonDepth (util/json_depth.h) is a 400 whose param is the top-level
// member it lies in, refused before a document is built.
struct ParseOutcome {
  std::optional<ParsedRequest> request;
  ApiError error;
  bool ok() const { return request.has_value(); }
};
ParseOutcome ParseRequest(std::string_view body, Endpoint endpoint, size_t max_body_bytes = 8u << 20);

}  // namespace skipkv::serve
