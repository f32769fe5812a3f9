// ParsedRequest -> engine Request; see api_convert.h.
#include "serve/api_convert.h"

#include <algorithm>
#include <string>

namespace skipkv::serve {
namespace {

ApiError Bad(std::string param, std::string message) {
  ApiError e;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}


}  // namespace

ConvertOutcome ToEngineRequest(const ParsedRequest& p, const ConvertLimits& limits) {
  ConvertOutcome out;
  Request r;
  if (p.endpoint == Endpoint::kChat) {
    r.chat = true;
    for (const auto& [role, content] : p.messages) r.messages.push_back({role, content});
  } else {
    r.prompt = p.prompt;
    r.prompt_tokens = p.prompt_tokens;
  }
  const int64_t max_tokens =
      p.max_tokens.value_or(limits.default_max_tokens > 0 ? limits.default_max_tokens : limits.n_ctx);
  if (max_tokens > limits.n_ctx) {
    out.error = Bad(p.max_tokens ? "max_tokens" : "", "max_tokens " + std::to_string(max_tokens) +
                                                          " exceeds the model's context of " +
                                                          std::to_string(limits.n_ctx) + " tokens");
    return out;
  }
  r.max_new_tokens = static_cast<int>(max_tokens);
  r.sampling.temperature = static_cast<float>(p.temperature);
  r.sampling.top_p = static_cast<float>(p.top_p);
  r.sampling.seed = p.seed.value_or(limits.default_seed);
  r.stop = p.stop;
  if (p.kv) {
    const KvSpec& kv = *p.kv;
    // The request parser (fuzzed without the engine) keeps the name as sent;
    // aliases resolve here ("full" names the fullkv method too).
    const std::string preset_name = CanonicalPresetName(kv.preset);
    if (kv.preset.find_first_of("=.") != std::string::npos) {
      out.error = Bad("kv.policy", "kv.policy must be a method preset name, got '" + kv.preset + "'");
      return out;
    }
    // Scoped overrides ("PRESET.FIELD=VALUE"), so a field the preset's policy
    // does not use is refused rather than ignored.
    std::vector<std::string> overrides;
    for (const std::string& o : kv.overrides) {
      if (o.rfind("grouping=", 0) == 0) {
        out.error =
            Bad("kv.grouping", "kv.grouping sorts a sweep's padded batches; the server runs ragged batches");
        return out;
      }
      for (const char* field : {"max_length", "max_length_counts_prompt"}) {
        if (o.rfind(std::string(field) + "=", 0) == 0) {
          out.error = Bad(std::string("kv.") + field,
                          std::string("kv.") + field + " bounds an eval sweep's rows; give max_tokens");
          return out;
        }
      }
      overrides.push_back(preset_name + "." + o);
    }
    // The vector: the one named, else the server's default (if any).
    const SteerVectors* vecs = limits.steer_vectors;
    const SteerVector* vec = nullptr;
    std::string vec_name;
    if (!kv.steer_vector.empty()) {
      if (vecs == nullptr || vecs->empty()) {
        out.error = Bad("kv.steer_vector",
                        "kv.steer_vector: this server was started without steering vectors "
                        "(serve --steer FILE [--steer-vector NAME=FILE])");
        return out;
      }
      auto it = vecs->by_name.find(kv.steer_vector);
      if (it == vecs->by_name.end()) {
        out.error = Bad("kv.steer_vector",
                        "kv.steer_vector '" + kv.steer_vector +
                            "' is not a steering vector of this server (it has: " + vecs->Names() + ")");
        return out;
      }
      vec = &it->second;
      vec_name = it->first;
    } else if (vecs != nullptr) {
      if (auto it = vecs->by_name.find(SteerVectors::kDefault); it != vecs->by_name.end()) {
        vec = &it->second;
        vec_name = it->first;
      }
    }
    StatusOr<MethodPreset> preset =
        MakePreset(preset_name, kv.budget, overrides, vec ? vec->config : SteeringConfig{},
                   PresetContext{"", "", limits.file_presets});
    if (!preset.ok()) {
      // The registry's errors name the field at fault (Status::field): a
      // method parameter's key, which is also its name in "kv", or "method".
      const Status st = preset.status();
      if (vec == nullptr && st.field() == "steer_file") {
        out.error = Bad("kv.policy", "kv.policy '" + kv.preset +
                                         "' steers, and this server was started without a steering vector "
                                         "(serve --steer FILE)");
        return out;
      }
      const std::string param = st.field() == "method" ? "kv.policy" : st.field().empty() ? "kv" : "kv." + st.field();
      out.error = Bad(param, "kv: " + st.message());
      return out;
    }
    if (!TraitsOf(preset->method).evicts && kv.budget > 0) {
      out.error = Bad("kv.budget", "kv: the fullkv method keeps every slot and takes no budget");
      return out;
    }
    const SteeringConfig& steer = preset->method.steer;
    if (!kv.steer_vector.empty() && !steer.enabled) {
      out.error = Bad("kv.steer_vector", "kv.steer_vector: method preset '" + preset->preset +
                                             "' does not steer (the steering presets: seal, "
                                             "rkv+sentence+steering, skipkv)");
      return out;
    }
    if (steer.enabled) {
      if (!vec->directions.count(steer.layer)) {
        std::string have;
        for (int l : vec->directions) have += (have.empty() ? "" : ", ") + std::to_string(l);
        out.error = Bad("kv.steer_layer",
                        "kv.steer_layer " + std::to_string(steer.layer) + ": steering vector '" + vec_name +
                            "' has no direction for it on this model (it has: " + have + ")");
        return out;
      }
      out.steer_vector = vec_name;
    }
    // A sweep builds the prompt from a problem and bounds prompt + output;
    // a client sends the prompt and max_tokens. Say so rather than ignore it.
    if (preset->prompt)
      out.not_applied.push_back(std::string("prompt: the preset's prompt style '") +
                                PromptStyleName(*preset->prompt) +
                                "' builds eval's prompts; the server uses the request's prompt as sent");
    if (preset->max_length > 0 || preset->max_length_counts_prompt)
      out.not_applied.push_back(
          "max_length: the preset bounds eval's prompt + generated tokens; here max_tokens bounds the "
          "generated tokens");
    if (preset->authors_table && preset->authors_run.empty() &&
        std::find_if(kv.overrides.begin(), kv.overrides.end(), [](const std::string& o) {
          return o.rfind("sim_threshold=", 0) == 0;
        }) == kv.overrides.end())
      out.not_applied.push_back(
          "tau: the authors' table picks tau per (model, dataset, budget); a request has no dataset, so "
          "tau is the preset's own (kv.sim_threshold sets it)");
    r.method = preset->method;
    out.preset = std::move(preset).value();
  }
  out.request = std::move(r);
  return out;
}

ApiError ErrorFromStatus(const Status& st) {
  ApiError e;
  e.message = st.message();
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
      break;
    case StatusCode::kOutOfRange:
      if (st.field() == "prompt") e.code = "context_length_exceeded";
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

}  // namespace skipkv::serve
