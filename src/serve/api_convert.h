// A parsed OpenAI request (api_request.h) -> an engine Request: chat
// messages through the engine's chat template, sampling fields, the method
// from the "kv" extension (src/eval/presets.h), and the limits that need the
// model (max_tokens against the context).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "skipkv/presets.h"
#include "serve/api_request.h"
#include "serve/steer_vectors.h"
#include "skipkv/engine.h"

namespace skipkv::serve {

struct ConvertLimits {
  int64_t n_ctx = 0;               // the engine's context (ModelInfo::context_length)
  int64_t default_max_tokens = 0;  // when the request gives none (0 = n_ctx: until the context ends)
  uint64_t default_seed = 0;       // when the request gives none
  const SteerVectors* steer_vectors = nullptr;  // the server's vectors (null or empty: none)
  std::span<const PresetFileEntry> file_presets;  // --presets FILE: more names for kv.policy
};

struct ConvertOutcome {
  std::optional<Request> request;
  std::optional<MethodPreset> preset;  // set when the request carried "kv"
  std::string steer_vector;                  // the vector's name when the method steers
  // The preset's eval-only settings this request does not use (its prompt
  // style, its max_length), one line each; the response's "kv" lists them.
  std::vector<std::string> not_applied;
  ApiError error;
  bool ok() const { return request.has_value(); }
};

// max_tokens above n_ctx is a 400 (param max_tokens); a bad "kv" (unknown
// preset or field, bad value, budget <= window, ...) is a 400 naming
// kv.<field> with MakePreset's message. Steering: a preset that steers
// (seal, rkv+sentence+steering; skipkv when a vector is there) takes
// kv.steer_vector's vector, else the server's default (--steer); an unknown
// name, a name for a preset that does not steer, a steer_layer the file has
// no direction for, or a steering preset on a server without vectors is a
// 400 naming the field.
ConvertOutcome ToEngineRequest(const ParsedRequest& p, const ConvertLimits& limits);

// The HTTP error for a Status from Engine validation / ServingEngine::Submit:
// InvalidArgument and OutOfRange are 400s (a prompt that does not fit the
// context gets code "context_length_exceeded"), anything else a 500.
ApiError ErrorFromStatus(const Status& st);

}  // namespace skipkv::serve
