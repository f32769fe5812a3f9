// `--presets FILE`: the presets of a preset file (skipkv/presets.h,
// PresetFileEntry; written by `skipkv calibrate`, format in
// docs/calibration.md) for the commands that name methods (eval, demo, run,
// serve). Add() before parsing, Load() after; context() then carries them
// into MakePreset.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "skipkv/presets.h"

namespace skipkv::cli {

class PresetFileFlag {
 public:
  // `extra` ends the help text (a command's default, e.g. demo's).
  void Add(CLI::App& app, const std::string& extra = "") {
    app.add_option("--presets", path_,
                   "Preset file (JSON, e.g. from `skipkv calibrate`): its presets become method names, each a "
                   "built-in preset plus its settings (docs/calibration.md); none: no file" +
                       extra);
  }
  // Sets the file when --presets was not given (a command's default).
  void SetDefault(std::string path) {
    if (path_.empty()) path_ = std::move(path);
  }
  // Reads the file when one was given; its errors name the file and field.
  Status Load() {
    if (path_.empty() || path_ == "none") return Status::Ok();
    auto entries = LoadPresetFile(path_);
    if (!entries.ok()) return entries.status();
    entries_ = std::move(entries).value();
    return Status::Ok();
  }
  // A context for MakePreset with the file's presets (valid while *this lives).
  PresetContext context(std::string model = "", std::string dataset = "") const {
    return PresetContext{std::move(model), std::move(dataset), entries_};
  }
  const std::string& path() const { return path_; }
  const std::vector<PresetFileEntry>& entries() const { return entries_; }

 private:
  std::string path_;
  std::vector<PresetFileEntry> entries_;
};

}  // namespace skipkv::cli
