// OpenAI-style request parsing; see api_request.h.
#include "serve/api_request.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "util/json_depth.h"

namespace skipkv::serve {
namespace {

using json = nlohmann::json;

ApiError Bad(std::string param, std::string message) {
  ApiError e;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

// A short rendering of a value for messages (long values are cut).
std::string Show(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

const char* TypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::string:
      return "string";
    case json::value_t::array:
      return "array";
    case json::value_t::object:
      return "object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    case json::value_t::number_float:
      return "number";
    default:
      return "value";
  }
}

ApiError WrongType(const std::string& param, const json& v, const char* expected) {
  return Bad(param, "'" + param + "' must be " + expected + ", got " + TypeName(v) + " " + Show(v));
}

std::optional<ApiError> GetInt(const json& v, const std::string& param, int64_t lo, int64_t hi,
                               int64_t* out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) {
      return Bad(param, "'" + param + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                            "], got " + Show(v));
    }
    *out = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    *out = v.get<int64_t>();
  } else {
    return WrongType(param, v, "an integer");
  }
  if (*out < lo || *out > hi) {
    return Bad(param, "'" + param + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                          "], got " + Show(v));
  }
  return std::nullopt;
}

std::optional<ApiError> GetNumber(const json& v, const std::string& param, double* out) {
  if (!v.is_number()) return WrongType(param, v, "a number");
  *out = v.get<double>();
  if (!std::isfinite(*out)) return Bad(param, "'" + param + "' must be finite");
  return std::nullopt;
}

std::optional<ApiError> ParseContent(const json& c, const std::string& param, std::string* out) {
  if (c.is_string()) {
    *out = c.get<std::string>();
    return std::nullopt;
  }
  if (!c.is_array()) return WrongType(param, c, "a string or an array of text parts");
  out->clear();
  for (size_t i = 0; i < c.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    const json& part = c[i];
    if (!part.is_object()) return WrongType(p, part, "an object");
    auto type = part.find("type");
    if (type == part.end() || !type->is_string() || *type != "text") {
      return Bad(p + ".type", "'" + p + ".type' must be \"text\" (only text content is supported)");
    }
    auto text = part.find("text");
    if (text == part.end() || !text->is_string())
      return Bad(p + ".text", "'" + p + ".text' must be a string");
    *out += text->get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> ParseMessages(const json& m, ParsedRequest* r) {
  if (!m.is_array()) return WrongType("messages", m, "an array");
  if (m.empty()) return Bad("messages", "'messages' must not be empty");
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string p = "messages[" + std::to_string(i) + "]";
    const json& msg = m[i];
    if (!msg.is_object()) return WrongType(p, msg, "an object");
    auto role = msg.find("role");
    if (role == msg.end()) return Bad(p + ".role", "'" + p + ".role' is required");
    if (!role->is_string()) return WrongType(p + ".role", *role, "a string");
    std::string r_name = role->get<std::string>();
    if (r_name == "developer") r_name = "system";  // OpenAI's newer name for the system role
    if (r_name != "system" && r_name != "user" && r_name != "assistant") {
      return Bad(p + ".role",
                 "'" + p + ".role' must be system, developer, user or assistant, got " + Show(*role));
    }
    auto content = msg.find("content");
    if (content == msg.end()) return Bad(p + ".content", "'" + p + ".content' is required");
    std::string text;
    if (auto e = ParseContent(*content, p + ".content", &text)) return e;
    r->messages.emplace_back(std::move(r_name), std::move(text));
  }
  return std::nullopt;
}

std::optional<ApiError> ParsePrompt(const json& p, ParsedRequest* r) {
  if (p.is_string()) {
    r->prompt = p.get<std::string>();
    return std::nullopt;
  }
  if (!p.is_array() || p.empty())
    return WrongType("prompt", p, "a string, or a non-empty array of token ids");
  if (p.size() == 1 && p[0].is_string()) {
    r->prompt = p[0].get<std::string>();
    return std::nullopt;
  }
  for (size_t i = 0; i < p.size(); ++i) {
    int64_t id = 0;
    if (p[i].is_string()) return Bad("prompt", "'prompt' holds several strings; one prompt per request only");
    if (auto e = GetInt(p[i], "prompt[" + std::to_string(i) + "]", 0, INT32_MAX, &id)) return e;
    r->prompt_tokens.push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

std::optional<ApiError> ParseStop(const json& s, ParsedRequest* r) {
  if (s.is_null()) return std::nullopt;
  if (s.is_string()) {
    if (s.get<std::string>().empty()) return Bad("stop", "'stop' strings must be non-empty");
    r->stop.push_back(s.get<std::string>());
    return std::nullopt;
  }
  if (!s.is_array()) return WrongType("stop", s, "a string or an array of strings");
  if (s.size() > 4) return Bad("stop", "'stop' holds at most 4 strings, got " + std::to_string(s.size()));
  for (size_t i = 0; i < s.size(); ++i) {
    const std::string p = "stop[" + std::to_string(i) + "]";
    if (!s[i].is_string()) return WrongType(p, s[i], "a string");
    if (s[i].get<std::string>().empty()) return Bad(p, "'" + p + "' must be non-empty");
    r->stop.push_back(s[i].get<std::string>());
  }
  return std::nullopt;
}

std::optional<ApiError> ParseKv(const json& kv, ParsedRequest* r) {
  if (!kv.is_object()) return WrongType("kv", kv, "an object");
  KvSpec spec;
  auto policy = kv.find("policy");
  if (policy == kv.end()) return Bad("kv.policy", "'kv.policy' is required (a method preset, e.g. \"rkv\")");
  if (!policy->is_string()) return WrongType("kv.policy", *policy, "a string");
  spec.preset = policy->get<std::string>();
  for (auto it = kv.begin(); it != kv.end(); ++it) {
    const std::string& key = it.key();
    const std::string p = "kv." + key;
    if (key == "policy") continue;
    if (key == "budget") {
      if (auto e = GetInt(*it, p, 1, INT32_MAX, &spec.budget)) return e;
      continue;
    }
    if (key == "steer_vector") {
      // A name the server maps to a file it was started with; never a path.
      if (!it->is_string()) return WrongType(p, *it, "a string (a steering vector name)");
      spec.steer_vector = it->get<std::string>();
      if (spec.steer_vector.empty() || spec.steer_vector.size() > 64 ||
          spec.steer_vector.find_first_not_of(
              "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != std::string::npos) {
        return Bad(p, "'" + p +
                          "' must be the name of a steering vector the server was started with "
                          "(letters, digits, '_' and '-'; not a path), got " +
                          Show(*it));
      }
      continue;
    }
    // The preset's override fields; their names and ranges are checked when
    // the preset is applied (MakePreset).
    if (key.empty() || key.find_first_of("=.") != std::string::npos) {
      return Bad(p, "'kv' has a field with an invalid name " + Show(json(key)));
    }
    std::string value;
    if (it->is_boolean()) {
      value = it->get<bool>() ? "true" : "false";
    } else if (it->is_number()) {
      double d = it->get<double>();
      if (!std::isfinite(d)) return Bad(p, "'" + p + "' must be finite");
      value = it->dump();
    } else {
      return WrongType(p, *it, "a number or a boolean");
    }
    spec.overrides.push_back(key + "=" + value);
  }
  r->kv = std::move(spec);
  return std::nullopt;
}

std::optional<ApiError> ParseObject(const json& body, Endpoint endpoint, ParsedRequest* r) {
  r->endpoint = endpoint;
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return WrongType("model", *it, "a string");
    r->model = it->get<std::string>();
  }
  if (endpoint == Endpoint::kChat) {
    auto m = body.find("messages");
    if (m == body.end()) return Bad("messages", "'messages' is required");
    if (auto e = ParseMessages(*m, r)) return e;
  } else {
    auto p = body.find("prompt");
    if (p == body.end()) return Bad("prompt", "'prompt' is required");
    if (auto e = ParsePrompt(*p, r)) return e;
  }
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) continue;
    int64_t v = 0;
    if (auto e = GetInt(*it, name, 1, INT32_MAX, &v)) return e;
    r->max_tokens = v;
  }
  if (auto it = body.find("temperature"); it != body.end() && !it->is_null()) {
    if (auto e = GetNumber(*it, "temperature", &r->temperature)) return e;
    if (r->temperature < 0 || r->temperature > 2) {
      return Bad("temperature", "'temperature' must be in [0, 2], got " + Show(*it));
    }
  }
  if (auto it = body.find("top_p"); it != body.end() && !it->is_null()) {
    if (auto e = GetNumber(*it, "top_p", &r->top_p)) return e;
    if (!(r->top_p > 0 && r->top_p <= 1)) return Bad("top_p", "'top_p' must be in (0, 1], got " + Show(*it));
  }
  if (auto it = body.find("seed"); it != body.end() && !it->is_null()) {
    int64_t v = 0;
    if (auto e = GetInt(*it, "seed", 0, INT64_MAX, &v)) return e;
    r->seed = static_cast<uint64_t>(v);
  }
  if (auto it = body.find("stop"); it != body.end()) {
    if (auto e = ParseStop(*it, r)) return e;
  }
  if (auto it = body.find("stream"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return WrongType("stream", *it, "a boolean");
    r->stream = it->get<bool>();
  }
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return WrongType("stream_options", *it, "an object");
    if (!r->stream) return Bad("stream_options", "'stream_options' is only allowed with \"stream\": true");
    if (auto u = it->find("include_usage"); u != it->end() && !u->is_null()) {
      if (!u->is_boolean()) return WrongType("stream_options.include_usage", *u, "a boolean");
      r->include_usage = u->get<bool>();
    }
  }
  if (auto it = body.find("n"); it != body.end() && !it->is_null()) {
    int64_t n = 0;
    if (auto e = GetInt(*it, "n", 1, 1, &n)) return e;
  }
  for (const char* name : {"presence_penalty", "frequency_penalty"}) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) continue;
    double v = 0;
    if (auto e = GetNumber(*it, name, &v)) return e;
    if (v != 0) return Bad(name, std::string("'") + name + "' is not supported (only 0)");
  }
  for (const char* name : {"logprobs", "top_logprobs", "echo", "tools", "tool_choice", "suffix", "logit_bias",
                           "response_format"}) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null() || (it->is_boolean() && !it->get<bool>())) continue;
    return Bad(name, std::string("'") + name + "' is not supported by this server");
  }
  if (auto it = body.find("best_of"); it != body.end() && !it->is_null()) {
    int64_t n = 0;
    if (auto e = GetInt(*it, "best_of", 1, 1, &n)) return e;
  }
  if (auto it = body.find("kv"); it != body.end() && !it->is_null()) {
    if (auto e = ParseKv(*it, r)) return e;
  }
  return std::nullopt;
}

}  // namespace

std::string ErrorJson(const ApiError& e) {
  json err = {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.code.empty() ? json(nullptr) : json(e.code)}};
  return json{{"error", err}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

ParseOutcome ParseRequest(std::string_view body, Endpoint endpoint, size_t max_body_bytes) {
  ParseOutcome out;
  if (body.size() > max_body_bytes) {
    out.error = Bad("", "request body of " + std::to_string(body.size()) + " bytes exceeds the limit of " +
                            std::to_string(max_body_bytes));
    out.error.http_status = 413;
    return out;
  }
  // Depth first: nlohmann builds and dumps documents recursively (issue 43).
  if (const auto deep = FindJsonDepthExcess(body)) {
    out.error = Bad(deep->top_key, "the request body nests JSON deeper than " + std::to_string(deep->max_depth) +
                                       " levels" + (deep->top_key.empty() ? "" : " in '" + deep->top_key + "'") +
                                       " (at byte " + std::to_string(deep->offset) + ")");
    return out;
  }
  json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    out.error = Bad("", "the request body is not valid JSON");
    return out;
  }
  if (!doc.is_object()) {
    out.error = Bad("", std::string("the request body must be a JSON object, got ") + TypeName(doc));
    return out;
  }
  ParsedRequest r;
  try {
    if (auto e = ParseObject(doc, endpoint, &r)) {
      out.error = *e;
      return out;
    }
  } catch (const json::exception& ex) {  // a type check above missed a case: still a clean 400
    out.error = Bad("", std::string("malformed request: ") + ex.what());
    return out;
  }
  out.request = std::move(r);
  return out;
}

}  // namespace skipkv::serve
