// Preset files (skipkv/presets.h: ParsePresetFile, PresetFileJson,
// MakePreset with PresetContext::file_presets): a file preset is its base
// plus its settings, the user's --set still wins, and every malformed file
// is refused with an error naming the file and the field.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "skipkv/presets.h"

namespace skipkv {
namespace {

const char* kFile = R"({
  "format": "skipkv-presets/1",
  "presets": [
    {"name": "skipkv-cal", "base": "skipkv",
     "settings": ["sim_threshold=0.7", "steer_alpha0=0.25", "steer_gamma=0.005"],
     "description": "calibrated on val", "provenance": {"split": "val", "n": 200}},
    {"name": "rkv+sentence-cal", "base": "rkv+sentence", "settings": ["sim_threshold=0.7"]}
  ]
})";

SteeringConfig Vector() {
  SteeringConfig v;
  v.enabled = true;
  v.file = "/some/vector.gguf";
  v.layer = 2;
  return v;
}

TEST(PresetFileTest, FilePresetIsItsBasePlusItsSettings) {
  auto entries = ParsePresetFile(kFile, "cal.json");
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].provenance_json, R"({"n":200,"split":"val"})");
  const PresetContext ctx{"", "", *entries};

  auto cal = MakePreset("skipkv-cal", 297, {}, Vector(), ctx);
  ASSERT_TRUE(cal.ok()) << cal.status().ToString();
  auto base = MakePreset("skipkv", 297, {}, Vector());
  ASSERT_TRUE(base.ok());
  EXPECT_EQ(cal->preset, "skipkv-cal");
  EXPECT_EQ(cal->base, "skipkv");
  EXPECT_EQ(cal->preset_file, "cal.json");
  EXPECT_EQ(cal->method.name, "skipkv-cal");
  EXPECT_EQ(cal->grouping, base->grouping);
  EXPECT_EQ(cal->method.kv.policy, "skipkv");
  EXPECT_FLOAT_EQ(cal->method.kv.skipkv.sim_threshold, 0.7f);
  EXPECT_FLOAT_EQ(base->method.kv.skipkv.sim_threshold, 0.95f);
  EXPECT_FLOAT_EQ(cal->method.steer.alpha0, 0.25f);
  EXPECT_FLOAT_EQ(cal->method.steer.gamma, 0.005f);
  EXPECT_TRUE(cal->method.steer.adaptive);

  // Without a vector it runs unsteered like skipkv: the steering settings are skipped.
  auto unsteered = MakePreset("skipkv-cal", 297, {}, SteeringConfig{}, ctx);
  ASSERT_TRUE(unsteered.ok()) << unsteered.status().ToString();
  EXPECT_FALSE(unsteered->method.steer.enabled);
  EXPECT_FLOAT_EQ(unsteered->method.kv.skipkv.sim_threshold, 0.7f);

  // The user's --set comes last; a label gives a second configuration.
  auto set = MakePreset("t8=skipkv-cal", 297, {"t8.sim_threshold=0.8"}, SteeringConfig{}, ctx);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->method.name, "t8");
  EXPECT_FLOAT_EQ(set->method.kv.skipkv.sim_threshold, 0.8f);

  // The row's provenance says where the preset came from.
  const auto j = nlohmann::json::parse(PresetJson(*cal));
  EXPECT_EQ(j["preset"], "skipkv-cal");
  EXPECT_EQ(j["base"], "skipkv");
  EXPECT_EQ(j["preset_file"], "cal.json");

  // Without the file the name is unknown; with it the error lists the file's presets.
  auto unknown = MakePreset("skipkv-cal", 297, {});
  EXPECT_FALSE(unknown.ok());
  auto typo = MakePreset("skipkv-cla", 297, {}, SteeringConfig{}, ctx);
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("skipkv-cal (cal.json)"), std::string::npos) << typo.status().message();
}

TEST(PresetFileTest, WrittenFileReadsBackTheSame) {
  auto entries = ParsePresetFile(kFile, "cal.json");
  ASSERT_TRUE(entries.ok());
  const std::string text = PresetFileJson(*entries);
  auto back = ParsePresetFile(text, "again.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
  ASSERT_EQ(back->size(), entries->size());
  for (size_t i = 0; i < back->size(); ++i) {
    EXPECT_EQ((*back)[i].name, (*entries)[i].name);
    EXPECT_EQ((*back)[i].base, (*entries)[i].base);
    EXPECT_EQ((*back)[i].settings, (*entries)[i].settings);
    EXPECT_EQ((*back)[i].description, (*entries)[i].description);
    EXPECT_EQ((*back)[i].provenance_json, (*entries)[i].provenance_json);
  }
  const std::string path = ::testing::TempDir() + "/preset_file_test.json";
  std::ofstream(path) << text;
  auto loaded = LoadPresetFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)[0].source, path);
  std::remove(path.c_str());
  auto missing = LoadPresetFile(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(path), std::string::npos);
}

TEST(PresetFileTest, MalformedFilesNameFileAndField) {
  struct Case {
    const char* field;    // Status::field()
    const char* message;  // a part of the message
  };
  const std::string head = R"({"format":"skipkv-presets/1","presets":[)";
  const std::vector<std::pair<std::string, Case>> cases = {
      {"not json", {"", "not valid JSON"}},
      {"[]", {"(top level)", "must be an object"}},
      {R"({"format":"x","presets":[]})", {"format", "skipkv-presets/1"}},
      {R"({"format":"skipkv-presets/1","presets":[]})", {"presets", "non-empty array"}},
      {head + R"("x"]})", {"presets[0]", "must be an object"}},
      {head + R"({"base":"skipkv"}]})", {"presets[0].name", "is required"}},
      {head + R"({"name":"a b","base":"skipkv"}]})", {"presets[0].name", "A-Z a-z 0-9"}},
      {head + R"({"name":"rkv","base":"skipkv"}]})", {"presets[0].name", "built-in"}},
      {head + R"({"name":"full","base":"skipkv"}]})", {"presets[0].name", "built-in"}},
      {head + R"({"name":"c","base":"nope"}]})", {"presets[0].base", "unknown base 'nope'"}},
      {head + R"({"name":"c","base":"rkv","extra":1}]})", {"presets[0].extra", "unknown field"}},
      {head + R"({"name":"c","base":"rkv","settings":"window=4"}]})", {"presets[0].settings", "array"}},
      {head + R"({"name":"c","base":"rkv","settings":[4]}]})", {"presets[0].settings[0]", "FIELD=VALUE"}},
      {head + R"({"name":"c","base":"rkv","settings":["window"]}]})", {"presets[0].settings", "FIELD=VALUE"}},
      {head + R"({"name":"c","base":"rkv","settings":["rkv.window=4"]}]})",
       {"presets[0].settings", "no METHOD. scope"}},
      {head + R"({"name":"c","base":"rkv","settings":["nope=4"]}]})", {"presets[0].nope", "unknown field 'nope'"}},
      {head + R"({"name":"c","base":"rkv","settings":["sim_threshold=0.7"]}]})",
       {"presets[0].sim_threshold", "has no field 'sim_threshold'"}},
      {head + R"({"name":"c","base":"skipkv","settings":["sim_threshold=abc"]}]})",
       {"presets[0].sim_threshold", "abc"}},
      {head + R"({"name":"c","base":"skipkv","settings":["steer_alpha0=x"]}]})", {"presets[0].steer_alpha0", "x"}},
      {head + R"({"name":"c","base":"rkv","provenance":[1]}]})", {"presets[0].provenance", "must be an object"}},
      {head + R"({"name":"c","base":"rkv"},{"name":"c","base":"h2o"}]})", {"presets[1].name", "defined twice"}},
      {std::string(600, '[') + std::string(600, ']'), {"", "deeper than 512"}},
  };
  for (const auto& [text, c] : cases) {
    auto r = ParsePresetFile(text, "bad.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().field(), c.field) << text << " -> " << r.status().ToString();
    EXPECT_NE(r.status().message().find("bad.json"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << text << " -> " << r.status().message();
  }
}

}  // namespace
}  // namespace skipkv
