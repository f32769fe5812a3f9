// TEMPORARY (until main's skipkv/presets.h has the preset-file API): the
// entry type and writer of docs/calibration.md's format.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

namespace skipkv {

struct PresetFileEntry {
  std::string name;
  std::string base;
  std::vector<std::string> settings;
  std::string description;
  std::string provenance_json;
  std::string source;
};

inline std::string PresetFileJson(std::span<const PresetFileEntry> entries) {
  nlohmann::json presets = nlohmann::json::array();
  for (const auto& e : entries) {
    presets.push_back({{"name", e.name},
                       {"base", e.base},
                       {"settings", e.settings},
                       {"description", e.description},
                       {"provenance", nlohmann::json::parse(e.provenance_json.empty() ? "{}" : e.provenance_json)}});
  }
  return nlohmann::json{{"format", "skipkv-presets/1"}, {"presets", presets}}.dump(2) + "\n";
}

}  // namespace skipkv
