// OpenAI-shaped response bodies; see api_response.h.
#include "serve/api_response.h"

namespace skipkv::serve {
namespace {

using json = nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json Base(const ResponseInfo& info, bool chunk) {
  const bool chat = info.endpoint == Endpoint::kChat;
  return {{"id", info.id},
          {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", info.created},
          {"model", info.model}};
}

}  // namespace

const char* OpenAiFinishReason(FinishReason r) {
  switch (r) {
    case FinishReason::kLength:
    case FinishReason::kContext:
      return "length";
    default:
      return "stop";
  }
}

json UsageJson(const GenerationResult& r) {
  const int64_t p = static_cast<int64_t>(r.prompt_tokens.size()), c = static_cast<int64_t>(r.tokens.size());
  return {{"prompt_tokens", p}, {"completion_tokens", c}, {"total_tokens", p + c}};
}

json KvExtensionJson(const GenerationResult& r, const std::string& preset, const std::string& steer_vector,
                     const std::vector<std::string>& not_applied) {
  json method = json::parse(MethodJson(r.method));
  if (method.contains("steer.file")) {
    method.erase("steer.file");
    method["steer.vector"] = steer_vector;
  }
  json diagnostics = json::object();
  for (const auto& [name, value] : r.diagnostics) diagnostics[name] = value;
  json j = {{"method", method},
            {"peak_live_bytes", r.kv.peak_live_bytes},
            {"allocated_bytes", r.kv.allocated_bytes},
            {"peak_slots", r.kv.peak_slots},
            {"final_slots", r.kv.final_slots},
            {"compressions", r.kv.compressions},
            {"slots_evicted", r.kv.slots_evicted},
            {"effective_budget", r.kv.effective_budget},
            {"penalized_evicted", r.kv.penalized_evicted},
            {"queue_ms", r.timings.queue_ms},
            {"prefill_ms", r.timings.prefill_ms},
            {"decode_ms", r.timings.decode_ms},
            {"diagnostics", diagnostics}};
  if (!preset.empty()) j["preset"] = preset;
  if (!not_applied.empty()) j["not_applied"] = not_applied;
  return j;
}

std::string CompletionJson(const ResponseInfo& info, const GenerationResult& r, const std::string& preset) {
  json j = Base(info, false);
  json choice;
  if (info.endpoint == Endpoint::kChat) {
    choice = {{"index", 0},
              {"message", {{"role", "assistant"}, {"content", r.text}}},
              {"logprobs", nullptr},
              {"finish_reason", OpenAiFinishReason(r.finish)}};
  } else {
    choice = {{"index", 0},
              {"text", r.text},
              {"logprobs", nullptr},
              {"finish_reason", OpenAiFinishReason(r.finish)}};
  }
  j["choices"] = json::array({choice});
  j["usage"] = UsageJson(r);
  j["kv"] = KvExtensionJson(r, preset, info.steer_vector, info.not_applied);
  return Dump(j);
}

std::string ChunkJson(const ResponseInfo& info, std::string_view text, bool first, const char* finish,
                      bool usage_null) {
  json j = Base(info, true);
  json choice = {
      {"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish ? json(finish) : json(nullptr)}};
  if (info.endpoint == Endpoint::kChat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!finish) delta["content"] = std::string(text);
    choice["delta"] = delta;
  } else {
    choice["text"] = std::string(text);
  }
  j["choices"] = json::array({choice});
  if (usage_null) j["usage"] = nullptr;
  return Dump(j);
}

std::string UsageChunkJson(const ResponseInfo& info, const GenerationResult& r, const std::string& preset) {
  json j = Base(info, true);
  j["choices"] = json::array();
  j["usage"] = UsageJson(r);
  j["kv"] = KvExtensionJson(r, preset, info.steer_vector, info.not_applied);
  return Dump(j);
}

std::string SseEvent(std::string_view json_text) {
  std::string s = "data: ";
  s += json_text;
  s += "\n\n";
  return s;
}

}  // namespace skipkv::serve
