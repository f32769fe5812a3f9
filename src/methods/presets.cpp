// The method registry (skipkv/presets.h): one table line per method, and the
// FIELD=VALUE overrides (--set, serve's "kv" fields).
#include "skipkv/presets.h"

#include <cctype>
#include <cstdlib>

#include "skipkv/method_args.h"

namespace skipkv {
namespace {

// How a preset steers (docs/spec.md §4.2 SEAL, §6.9 SkipKV).
enum class Steer {
  kNone,      // never, even when --steer is given
  kFixed,     // SEAL: α = coef; needs a vector
  kAdaptive,  // SkipKV: α = α0 + γ·N_o; needs a vector
  kIfGiven,   // SkipKV: adaptive when a vector is given, otherwise no steering
};

struct PresetDef {
  const char* name;
  const char* policy;
  bool sentence_scoring;
  bool grouping;
  Steer steer;
  // FIELD=VALUE settings applied before the user's --set (the *-authors presets).
  std::span<const char* const> settings = {};
  bool authors_table = false;  // τ and the steering strength from AuthorsRuns()
  bool authors_lengths = false;  // max_length = their dataset's total (AuthorsMaxLength)
};

// ---- The SkipKV authors' runs (issue 38) as data ---------------------------
// Where their code differs from the project's defaults; the row numbers are
// issue 38's table (docs/kv-policies.md, "Parity with the authors' code").
constexpr const char* kAuthorsFullkv[] = {
    "grouping=true",                  // row 8: run_math.py sorts prompts by length for every method
    "prompt=raw",                     // row 2: run_task, R-KV's prompt_template without a chat template
    "max_length_counts_prompt=true",  // row 3: generate(max_length=...)
};
constexpr const char* kAuthorsRkv[] = {
    "grouping=true",                  // row 8
    "prompt=raw",                     // row 2
    "max_length_counts_prompt=true",  // row 3
    "pad_mask_seen_tokens=true",      // row 11: the layer mask, not the slots' pad flags
};
constexpr const char* kAuthorsSkipkv[] = {
    "grouping=true",                                                      // row 8
    "prompt=seal-chat",                                                   // row 2: run_seal, --use_chat_format
    "max_length_counts_prompt=true",                                      // row 3
    "pad_mask_seen_tokens=true",                                          // row 11
    "sim_threshold=0.95",                                                 // row 1: run_math.py's default S_threshold
    "pss_include_prompt=true",                                            // row 7
    "min_sentence_tokens=1",                                              // consecutive delimiters are sentences
    "sentence_delimiters=\\n,.\\n,)\\n,\\n\\n,.\\n\\n,)\\n\\n,?\\n\\n",  // row 6
    "nonexec_keywords=Alternatively,Wait,again",                          // row 4
    "range_min_slots=2",                                                  // row 9
    "pss_lambda_last=true",                                               // row 10
    "steer_alpha0=1.25",                                                  // row 5: coef -1.25 on H_O - H_E
    "steer_gamma=0.02",                                                   // row 5
};

// The control for claim 1 (issue 39): R-KV that never evicts the prompt.
constexpr const char* kRkvPinned[] = {"pin_prompt=true"};

// scripts/run.sh at 4492840: every run_seal line (S_threshold, coef, layer).
constexpr AuthorsRun kAuthorsRuns[] = {
    {"DeepSeek-R1-Distill-Qwen-7B", "math", 768, 0.96f, -1.25f, 20},
    {"DeepSeek-R1-Distill-Qwen-7B", "math", 1024, 0.99f, -1.25f, 20},
    {"DeepSeek-R1-Distill-Qwen-7B", "math", 1260, 0.99f, -1.25f, 20},
    {"DeepSeek-R1-Distill-Qwen-7B", "math", 1536, 0.95f, -1.25f, 20},
    {"DeepSeek-R1-Distill-Qwen-7B", "aime24", 1536, 0.98f, -1.25f, 20},
    {"DeepSeek-R1-Distill-Qwen-7B", "aime24", 2220, 0.98f, -1.25f, 20},
    {"DeepSeek-R1-Distill-Qwen-7B", "aime24", 3072, 0.98f, -1.25f, 20},
    {"DeepSeek-R1-Distill-Qwen-7B", "aime24", 4096, 0.99f, -1.25f, 20},
    {"DeepSeek-R1-Distill-Qwen-7B", "gsm8k", 512, 0.95f, -1.25f, 20},
    {"DeepSeek-R1-Distill-Qwen-14B", "math", 768, 0.98f, -1.0f, 35},
    {"DeepSeek-R1-Distill-Qwen-14B", "math", 1024, 0.97f, -1.0f, 35},
    {"DeepSeek-R1-Distill-Qwen-14B", "math", 1536, 0.98f, -1.0f, 35},
    {"DeepSeek-R1-Distill-Qwen-14B", "math", 2048, 0.98f, -1.0f, 35},
    {"DeepSeek-R1-Distill-Qwen-14B", "aime24", 1024, 0.96f, -1.25f, 35},
    {"DeepSeek-R1-Distill-Qwen-14B", "aime24", 1536, 0.96f, -1.25f, 35},
    {"DeepSeek-R1-Distill-Qwen-14B", "aime24", 3072, 0.97f, -1.25f, 35},
    {"DeepSeek-R1-Distill-Qwen-14B", "aime24", 4096, 0.96f, -1.25f, 35},
    {"DeepSeek-R1-Distill-Llama-8B", "math", 768, 0.95f, -1.25f, 20},
    {"DeepSeek-R1-Distill-Llama-8B", "math", 1024, 0.97f, -1.25f, 20},
    {"DeepSeek-R1-Distill-Llama-8B", "math", 1536, 0.96f, -1.25f, 20},
    {"DeepSeek-R1-Distill-Llama-8B", "math", 2048, 0.99f, -1.25f, 20},
    {"DeepSeek-R1-Distill-Llama-8B", "aime24", 2048, 0.95f, -1.0f, 20},
    {"DeepSeek-R1-Distill-Llama-8B", "aime24", 2700, 0.97f, -1.0f, 20},
    {"DeepSeek-R1-Distill-Llama-8B", "aime24", 3072, 0.99f, -1.0f, 20},
    {"DeepSeek-R1-Distill-Llama-8B", "aime24", 4096, 0.99f, -1.0f, 20},
    {"Qwen3-8B", "aime24", 1536, 0.95f, -1.0f, 25},
    {"Qwen3-8B", "aime24", 2220, 0.95f, -1.0f, 25},
    {"Qwen3-8B", "aime24", 3072, 0.95f, -1.0f, 25},
    {"Qwen3-8B", "aime24", 4096, 0.95f, -1.0f, 25},
};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Table 2 of the paper is cumulative: rkv -> rkv+sentence ->
// rkv+sentence+steering -> skipkv (+grouping).
constexpr PresetDef kPresets[] = {
    {"fullkv", "full", false, false, Steer::kNone},
    {"streaming", "streaming", false, false, Steer::kNone},
    {"h2o", "h2o", false, false, Steer::kNone},
    {"snapkv", "snapkv", false, false, Steer::kNone},
    {"rkv", "rkv", false, false, Steer::kNone},
    {"rkv+pinned", "rkv", false, false, Steer::kNone, kRkvPinned},
    {"rkv+sentence", "skipkv", true, false, Steer::kNone},
    {"rkv+sentence+steering", "skipkv", true, false, Steer::kAdaptive},
    {"skipkv", "skipkv", true, true, Steer::kIfGiven},
    {"seal", "full", false, false, Steer::kFixed},
    {"fullkv-authors", "full", false, true, Steer::kNone, kAuthorsFullkv, /*authors_table=*/false,
     /*authors_lengths=*/true},
    {"rkv-authors", "rkv", false, true, Steer::kNone, kAuthorsRkv, /*authors_table=*/false,
     /*authors_lengths=*/true},
    {"skipkv-authors", "skipkv", true, true, Steer::kIfGiven, kAuthorsSkipkv, /*authors_table=*/true,
     /*authors_lengths=*/true},
};

// Other names of presets: "full" is the policy's name for the FullKV method.
constexpr std::pair<const char*, const char*> kAliases[] = {{"full", "fullkv"}};

// Applies FIELD=VALUE to the preset; `scoped` is true when the override names
// this method explicitly (then a field its method does not use is an error;
// shared, it is skipped). The fields are the declared method parameters with
// kArgSet (skipkv/method_args.h) plus the preset's own `grouping`.
Status Apply(MethodPreset& p, const std::string& field, const std::string& value, bool scoped) {
  if (field == "grouping") {
    return ParseArgValue(p.grouping, ArgInfo{"grouping", "", "", kArgSet, ArgScope::kAny}, value);
  }
  if (field == "max_length") {
    SKIPKV_RETURN_IF_ERROR(
        ParseArgValue(p.max_length, ArgInfo{"max_length", "", "", kArgSet, ArgScope::kAny}, value));
    if (p.max_length < 0)
      return InvalidField(field, "max_length=" + value + ": must be >= 0 (0 = the sweep's --max-gen)");
    return Status::Ok();
  }
  if (field == "max_length_counts_prompt") {
    return ParseArgValue(p.max_length_counts_prompt,
                         ArgInfo{"max_length_counts_prompt", "", "", kArgSet, ArgScope::kAny}, value);
  }
  if (field == "prompt") {
    StatusOr<PromptStyle> style = ParsePromptStyle(value);
    if (!style.ok()) return InvalidField(field, field + "=" + value + ": " + style.status().message());
    p.prompt = *style;
    return Status::Ok();
  }
  bool found = false;
  Status result = Status::Ok();
  std::string known;
  ForEachMethodArg(p.method, [&](auto& target, const ArgInfo& info) {
    if (!(info.where & kArgSet)) return;
    known += (known.empty() ? "" : ", ") + std::string(info.key);
    if (field != info.key) return;
    found = true;
    if (!MethodUsesArg(info.scope, p.method)) {
      if (!scoped) return;
      const SteeringConfig& st = p.method.steer;
      const std::string who = p.method.name + "." + field + ": method '" + p.method.name + "' ";
      if (field.rfind("steer_", 0) == 0) {
        result = InvalidField(field, who + "(preset " + p.preset + ") " +
                                 (!st.enabled   ? "does not steer"
                                  : st.adaptive ? "steers with the adaptive strength (steer_alpha0, steer_gamma, "
                                                  "steer_alpha_max)"
                                                : "steers with a fixed strength (steer_coef)"));
      } else {
        result = InvalidField(field, who + "(policy " + p.method.kv.policy + ") has no field '" + field + "'");
      }
      return;
    }
    result = ParseArgValue(target, info, value);  // its errors name the field
  });
  if (!found)
    return InvalidField(field, "unknown field '" + field + "' (known: " + known +
                                   ", grouping, prompt, max_length, max_length_counts_prompt)");
  return result;
}

// FIELD=VALUE or LABEL.FIELD=VALUE applied to `p` (see MakePreset).
Status ApplyOverride(MethodPreset& p, const std::string& o) {
  const size_t eq = o.find('=');
  if (eq == std::string::npos || eq == 0)
    return InvalidArgument("override '" + o + "' must be FIELD=VALUE or METHOD.FIELD=VALUE");
  std::string field = o.substr(0, eq);
  const std::string value = o.substr(eq + 1);
  bool scoped = false;
  if (const size_t dot = field.rfind('.'); dot != std::string::npos) {
    if (field.substr(0, dot) != p.method.name) return Status::Ok();  // another method's override
    field = field.substr(dot + 1);
    scoped = true;
  }
  return Apply(p, field, value, scoped);
}

}  // namespace

StatusOr<PromptStyle> ParsePromptStyle(const std::string& s) {
  if (s == "chat") return PromptStyle::kChat;
  if (s == "raw") return PromptStyle::kRaw;
  if (s == "plain") return PromptStyle::kPlain;
  if (s == "seal-chat") return PromptStyle::kSealChat;
  return InvalidArgument("prompt style '" + s + "' is not one of: chat, raw, plain, seal-chat");
}

const char* PromptStyleName(PromptStyle s) {
  switch (s) {
    case PromptStyle::kChat: return "chat";
    case PromptStyle::kRaw: return "raw";
    case PromptStyle::kPlain: return "plain";
    case PromptStyle::kSealChat: return "seal-chat";
  }
  return "chat";
}

std::span<const AuthorsRun> AuthorsRuns() { return kAuthorsRuns; }

const AuthorsRun* FindAuthorsRun(const std::string& model, const std::string& dataset, int64_t budget) {
  const std::string m = Lower(model);
  const std::string d = Lower(dataset) == "math500" ? "math" : Lower(dataset);
  const AuthorsRun* best = nullptr;
  for (const AuthorsRun& r : kAuthorsRuns) {
    if (r.budget != budget || d != r.dataset || m.find(Lower(r.model)) == std::string::npos) continue;
    if (best == nullptr || std::string(r.model).size() > std::string(best->model).size()) best = &r;
  }
  return best;
}

int64_t AuthorsMaxLength(const std::string& dataset) {
  // run_math.py's dataset2max_length.
  const std::string d = Lower(dataset);
  if (d == "math500" || d == "math" || d == "gsm8k") return 8192;
  if (d == "aime24") return 16384;
  return 0;
}

std::string CanonicalPresetName(const std::string& name) {
  for (const auto& [alias, preset] : kAliases)
    if (name == alias) return preset;
  return name;
}

std::vector<std::string> KnownPresets() {
  std::vector<std::string> v;
  for (const auto& p : kPresets) v.emplace_back(p.name);
  return v;
}

namespace {

const PresetDef* FindDef(const std::string& name) {
  for (const auto& p : kPresets)
    if (name == p.name) return &p;
  return nullptr;
}

const PresetFileEntry* FindFileEntry(const std::string& name, std::span<const PresetFileEntry> file_presets) {
  for (const auto& e : file_presets)
    if (name == e.name) return &e;
  return nullptr;
}

// A preset file's settings: scoped (a field the base method does not use is
// an error, so a typo or a τ on a policy without sentences is refused),
// except the steering strength, which is skipped when the method runs
// without a vector (skipkv steers only when one is given).
Status ApplyFileSetting(MethodPreset& p, const PresetFileEntry& e, const std::string& setting) {
  const size_t eq = setting.find('=');
  if (eq == std::string::npos || eq == 0 || setting.find('.') < eq) {
    return InvalidField("settings", e.source + ": preset '" + e.name + "': setting '" + setting +
                                        "' must be FIELD=VALUE (no METHOD. scope)");
  }
  const std::string field = setting.substr(0, eq);
  const bool shared = field.rfind("steer_", 0) == 0 && !p.method.steer.enabled;
  Status st = Apply(p, field, setting.substr(eq + 1), /*scoped=*/!shared);
  if (!st.ok()) return InvalidField(st.field(), e.source + ": preset '" + e.name + "': " + st.message());
  return st;
}

// `def` (a built-in preset, or a file preset's base) under `label`, with the
// file preset's settings when `file` is set; see MakePreset.
StatusOr<MethodPreset> Build(const PresetDef& def, const PresetFileEntry* file, const std::string& label,
                             int64_t budget, const std::vector<std::string>& overrides,
                             const SteeringConfig& vector, const PresetContext& context) {
  if (vector.enabled && vector.file.empty())
    return InvalidField("steer_file", "steering vector: enabled without a file");
  const std::string name = file != nullptr ? file->name : def.name;
  MethodPreset p;
  p.preset = name;
  if (file != nullptr) {
    p.base = def.name;
    p.preset_file = file->source;
  }
  p.method.name = label;
  p.method.kv.policy = def.policy;
  p.grouping = def.grouping;
  p.authors_table = def.authors_table;
  p.steers_if_given = def.steer == Steer::kIfGiven;
  const MethodTraits traits = TraitsOf(p.method.kv);
  if (traits.evicts) p.method.kv.budget = budget;
  if (traits.uses_sentences) p.method.kv.skipkv.sentence_scoring = def.sentence_scoring;
  if (def.steer == Steer::kFixed || def.steer == Steer::kAdaptive) {
    if (!vector.enabled) {
      return InvalidField(
          "steer_file", "method '" + label + "' (preset " + name +
          ") steers: give a steering vector with --steer FILE (a control-vector GGUF, e.g. "
          "from skipkv steer-extract, or a directory with SEAL's category files) and "
          "--steer-layer L");
    }
  }
  if (def.steer != Steer::kNone && vector.enabled) {
    p.method.steer = vector;
    p.method.steer.adaptive = def.steer != Steer::kFixed;
  }
  // The preset's own settings (shared: a field the method does not use, e.g.
  // the steering strength without a vector, is skipped), then its table,
  // then a file preset's settings, then the user's overrides.
  for (const char* s : def.settings) SKIPKV_RETURN_IF_ERROR(ApplyOverride(p, s));
  if (def.authors_table) {
    if (const AuthorsRun* r = FindAuthorsRun(context.model, context.dataset, budget)) {
      p.authors_run = std::string(r->model) + "/" + r->dataset + "/" + std::to_string(r->budget);
      SKIPKV_RETURN_IF_ERROR(ApplyOverride(p, "sim_threshold=" + std::to_string(r->tau)));
      SKIPKV_RETURN_IF_ERROR(ApplyOverride(p, "steer_alpha0=" + std::to_string(-r->coef)));
    }
  }
  if (def.authors_lengths) p.max_length = AuthorsMaxLength(context.dataset);
  if (file != nullptr)
    for (const std::string& s : file->settings) SKIPKV_RETURN_IF_ERROR(ApplyFileSetting(p, *file, s));
  for (const std::string& o : overrides) SKIPKV_RETURN_IF_ERROR(ApplyOverride(p, o));
  SKIPKV_RETURN_IF_ERROR(ValidateMethod(p.method));
  return p;
}

}  // namespace

Status ValidatePresetFileEntry(const PresetFileEntry& e) {
  const PresetDef* def = FindDef(CanonicalPresetName(e.base));
  if (def == nullptr) {
    std::string known;
    for (const auto& n : KnownPresets()) known += (known.empty() ? "" : ", ") + n;
    return InvalidField("base", e.source + ": preset '" + e.name + "': unknown base '" + e.base +
                                    "' (a built-in preset: " + known + ")");
  }
  // With a placeholder vector, so that steering fields are checked too
  // (the vector file itself is loaded only when a run uses it).
  SteeringConfig vector;
  vector.enabled = true;
  vector.file = "(preset file check)";
  return Build(*def, &e, e.name, /*budget=*/1024, {}, vector, PresetContext{}).status();
}

StatusOr<MethodPreset> MakePreset(const std::string& spec, int64_t budget,
                                  const std::vector<std::string>& overrides, const SteeringConfig& vector,
                                  const PresetContext& context) {
  std::string label = spec, preset = CanonicalPresetName(spec);
  if (const size_t eq = spec.find('='); eq != std::string::npos) {
    label = spec.substr(0, eq);
    preset = CanonicalPresetName(spec.substr(eq + 1));
    if (label.empty() || label.find_first_of(".,= ") != std::string::npos)
      return InvalidField("method", "method '" + spec +
                                        "': the label before '=' must be non-empty without . , = or spaces");
  }
  if (const PresetDef* def = FindDef(preset)) return Build(*def, nullptr, label, budget, overrides, vector, context);
  if (const PresetFileEntry* e = FindFileEntry(preset, context.file_presets)) {
    const PresetDef* base = FindDef(CanonicalPresetName(e->base));
    if (base == nullptr) return ValidatePresetFileEntry(*e);  // names the unknown base
    return Build(*base, e, label, budget, overrides, vector, context);
  }
  std::string known;
  for (const auto& n : KnownPresets()) known += (known.empty() ? "" : ", ") + n;
  for (const auto& e : context.file_presets) known += ", " + e.name + " (" + e.source + ")";
  const bool steering = preset == "+steering" || preset == "rkv+steering" || preset == "steering";
  return InvalidField("method", "unknown method '" + preset + "' (known: " + known + ")" +
                                    (steering ? "; Table 2's +steering row is rkv+sentence+steering" : ""));
}

std::string PresetJson(const MethodPreset& p) {
  std::string m = MethodJson(p.method);  // "{...}"
  m.pop_back();
  m += ",\"preset\":\"" + p.preset + "\",\"grouping\":" + (p.grouping ? "true" : "false");
  // Only when set, so that rows written before these fields keep their configuration.
  if (p.prompt) m += ",\"prompt\":\"" + std::string(PromptStyleName(*p.prompt)) + "\"";
  if (p.max_length > 0) m += ",\"max_length\":" + std::to_string(p.max_length);
  if (p.max_length_counts_prompt) m += ",\"max_length_counts_prompt\":true";
  if (!p.authors_run.empty()) m += ",\"authors_run\":\"" + p.authors_run + "\"";
  if (!p.base.empty()) m += ",\"base\":" + ArgValueJson(p.base) + ",\"preset_file\":" + ArgValueJson(p.preset_file);
  return m + "}";
}

}  // namespace skipkv
