// libFuzzer target: preset files (skipkv/presets.h, ParsePresetFile; format in
// docs/calibration.md), the JSON a user names with --presets and the server
// reads at start-up. Invariants:
//  * every input gives entries or a Status, never a crash (the depth check,
//    the structure, then each entry's settings through the method registry);
//  * what parses round-trips: PresetFileJson of the entries reads back to
//    the same names, bases, settings, descriptions and provenance;
//  * every parsed entry is a method name MakePreset knows in a context that
//    holds the file (it may still refuse the budget or want a vector, but
//    never with "unknown method").
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "skipkv/presets.h"

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace skipkv;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = ParsePresetFile(text, "fuzz.json");
  if (!parsed.ok()) {
    Check(!parsed.status().message().empty(), "an error without a message");
    return 0;
  }
  auto again = ParsePresetFile(PresetFileJson(*parsed), "fuzz.json");
  Check(again.ok(), "the written file does not read back");
  Check(again->size() == parsed->size(), "the written file has another number of presets");
  for (size_t i = 0; i < parsed->size(); ++i) {
    const PresetFileEntry &a = (*parsed)[i], &b = (*again)[i];
    Check(a.name == b.name && a.base == b.base && a.settings == b.settings, "an entry changed on the way back");
    Check(a.description == b.description && a.provenance_json == b.provenance_json,
          "a description or provenance changed on the way back");
  }
  const PresetContext context{"", "", *parsed};
  for (const PresetFileEntry& e : *parsed) {
    auto p = MakePreset(e.name, 64, {}, SteeringConfig{}, context);
    Check(p.ok() || p.status().message().find("unknown method") == std::string::npos,
          "a parsed preset is not a method name");
  }
  return 0;
}
