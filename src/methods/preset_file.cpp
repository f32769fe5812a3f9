// Preset files (skipkv/presets.h, PresetFileEntry; format in
// docs/calibration.md): named presets that extend a built-in one with
// FIELD=VALUE settings, as `skipkv calibrate` writes them.
#include <nlohmann/json.hpp>

#include "skipkv/presets.h"
#include "util/json_depth.h"
#include "util/mapped_file.h"

namespace skipkv {
namespace {

using json = nlohmann::json;

constexpr const char* kFormat = "skipkv-presets/1";

Status Bad(const std::string& source, const std::string& field, const std::string& message) {
  return InvalidField(field, source + ": field '" + field + "': " + message);
}

bool ValidName(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool IsBuiltIn(const std::string& name) {
  if (CanonicalPresetName(name) != name) return true;  // an alias
  for (const std::string& k : KnownPresets())
    if (k == name) return true;
  return false;
}

// Reads presets[i] (`at` = "presets[i]") into `e`.
Status ReadEntry(const json& j, const std::string& at, const std::string& source, PresetFileEntry* e) {
  if (!j.is_object()) return Bad(source, at, "must be an object, got " + std::string(j.type_name()));
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k != "name" && k != "base" && k != "settings" && k != "description" && k != "provenance")
      return Bad(source, at + "." + k, "unknown field (known: name, base, settings, description, provenance)");
  }
  auto str = [&](const char* key, bool required, std::string* out) -> Status {
    const auto it = j.find(key);
    if (it == j.end()) return required ? Bad(source, at + "." + key, "is required") : Status::Ok();
    if (!it->is_string()) return Bad(source, at + "." + key, "must be a string");
    *out = it->get<std::string>();
    return Status::Ok();
  };
  SKIPKV_RETURN_IF_ERROR(str("name", true, &e->name));
  SKIPKV_RETURN_IF_ERROR(str("base", true, &e->base));
  SKIPKV_RETURN_IF_ERROR(str("description", false, &e->description));
  if (!ValidName(e->name))
    return Bad(source, at + ".name", "'" + e->name + "' must be 1-64 characters of A-Z a-z 0-9 + _ -");
  if (IsBuiltIn(e->name))
    return Bad(source, at + ".name", "'" + e->name + "' is a built-in preset; give the file's preset its own name");
  if (const auto s = j.find("settings"); s != j.end()) {
    if (!s->is_array()) return Bad(source, at + ".settings", "must be an array of \"FIELD=VALUE\" strings");
    for (size_t i = 0; i < s->size(); ++i) {
      if (!(*s)[i].is_string())
        return Bad(source, at + ".settings[" + std::to_string(i) + "]", "must be a \"FIELD=VALUE\" string");
      e->settings.push_back((*s)[i].get<std::string>());
    }
  }
  e->provenance_json = "{}";
  if (const auto p = j.find("provenance"); p != j.end()) {
    if (!p->is_object()) return Bad(source, at + ".provenance", "must be an object");
    e->provenance_json = p->dump();
  }
  e->source = source;
  Status st = ValidatePresetFileEntry(*e);
  if (!st.ok()) return InvalidField(at + "." + (st.field().empty() ? "settings" : st.field()), st.message());
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<PresetFileEntry>> ParsePresetFile(const std::string& text, const std::string& source) {
  SKIPKV_RETURN_IF_ERROR(CheckJsonDepth(text, source));
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument(source + ": not valid JSON (a preset file, format " + kFormat + ")");
  if (!doc.is_object()) return Bad(source, "(top level)", "must be an object with \"format\" and \"presets\"");
  const auto f = doc.find("format");
  if (f == doc.end() || !f->is_string() || f->get<std::string>() != kFormat)
    return Bad(source, "format", std::string("must be \"") + kFormat + "\"");
  const auto ps = doc.find("presets");
  if (ps == doc.end() || !ps->is_array() || ps->empty())
    return Bad(source, "presets", "must be a non-empty array of presets");
  std::vector<PresetFileEntry> out;
  for (size_t i = 0; i < ps->size(); ++i) {
    const std::string at = "presets[" + std::to_string(i) + "]";
    PresetFileEntry e;
    SKIPKV_RETURN_IF_ERROR(ReadEntry((*ps)[i], at, source, &e));
    for (const PresetFileEntry& prev : out)
      if (prev.name == e.name) return Bad(source, at + ".name", "'" + e.name + "' is defined twice");
    out.push_back(std::move(e));
  }
  return out;
}

StatusOr<std::vector<PresetFileEntry>> LoadPresetFile(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status().WithContext("preset file");
  return ParsePresetFile(*text, path);
}

std::string PresetFileJson(std::span<const PresetFileEntry> entries) {
  json doc = {{"format", kFormat}, {"presets", json::array()}};
  for (const PresetFileEntry& e : entries) {
    json j = {{"name", e.name}, {"base", e.base}, {"settings", e.settings}};
    if (!e.description.empty()) j["description"] = e.description;
    j["provenance"] = e.provenance_json.empty() ? json::object() : json::parse(e.provenance_json);
    doc["presets"].push_back(std::move(j));
  }
  return doc.dump(2) + "\n";
}

}  // namespace skipkv
