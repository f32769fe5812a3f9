// Method presets (src/eval/presets.h): what each preset runs, overrides for
// all methods and for one label, and the errors for unknown presets, fields
// and values.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "eval/presets.h"

namespace skipkv::eval {
namespace {

TEST(EvalPresetsTest, PresetsRunTheirPolicies) {
  struct Expect {
    const char* preset;
    const char* policy;
    bool grouping;
  };
  for (const Expect& e :
       {Expect{"fullkv", "full", false}, Expect{"streaming", "streaming", false}, Expect{"h2o", "h2o", false},
        Expect{"snapkv", "snapkv", false}, Expect{"rkv", "rkv", false},
        Expect{"rkv+sentence", "skipkv", false}, Expect{"skipkv", "skipkv", true}}) {
    auto p = MakePreset(e.preset, 512, {});
    ASSERT_TRUE(p.ok()) << e.preset << ": " << p.status().ToString();
    EXPECT_EQ(p->method.kv.policy, e.policy);
    EXPECT_EQ(p->method.name, e.preset);
    EXPECT_EQ(p->grouping, e.grouping);
    EXPECT_EQ(p->full(), std::string(e.policy) == "full");
    if (!p->full()) {
      EXPECT_EQ(p->method.kv.budget, 512);
    }
  }
  auto sk = MakePreset("skipkv", 1024, {});
  ASSERT_TRUE(sk.ok());
  EXPECT_TRUE(sk->method.kv.skipkv.sentence_scoring);
  EXPECT_FLOAT_EQ(sk->method.kv.skipkv.sim_threshold, 0.95f);
  EXPECT_FLOAT_EQ(sk->method.kv.mix_lambda, 0.1f);
  EXPECT_EQ(sk->method.kv.window, 8);
  EXPECT_EQ(sk->method.kv.interval, 128);
  const auto j = nlohmann::json::parse(PresetJson(*sk));
  EXPECT_EQ(j.at("preset"), "skipkv");
  EXPECT_EQ(j.at("grouping"), true);
  EXPECT_EQ(j.at("budget"), 1024);
  EXPECT_EQ(j.at("policy"), "skipkv");
}

TEST(EvalPresetsTest, OverridesAndLabels) {
  const std::vector<std::string> o = {"window=16", "mix_lambda=0.07", "fast.interval=64",
                                      "rkv+sentence.sim_threshold=0.99", "grouping=true"};
  auto rkv = MakePreset("rkv", 256, o);
  ASSERT_TRUE(rkv.ok()) << rkv.status().ToString();
  EXPECT_EQ(rkv->method.kv.window, 16);
  EXPECT_FLOAT_EQ(rkv->method.kv.mix_lambda, 0.07f);
  EXPECT_EQ(rkv->method.kv.interval, 128);  // fast.interval is another label's
  EXPECT_TRUE(rkv->grouping);
  auto fast = MakePreset("fast=rkv", 256, o);
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  EXPECT_EQ(fast->method.name, "fast");
  EXPECT_EQ(fast->preset, "rkv");
  EXPECT_EQ(fast->method.kv.interval, 64);
  auto sent = MakePreset("rkv+sentence", 256, o);
  ASSERT_TRUE(sent.ok()) << sent.status().ToString();
  EXPECT_FLOAT_EQ(sent->method.kv.skipkv.sim_threshold, 0.99f);
  // Shared fields a policy lacks are ignored for it (fullkv, streaming's mix_lambda).
  auto full = MakePreset("fullkv", 256, o);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  auto stream = MakePreset("streaming", 256, {"mix_lambda=0.5", "sinks=2"});
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  EXPECT_EQ(stream->method.kv.streaming_sinks, 2);
}

TEST(EvalPresetsTest, ErrorsNameTheProblem) {
  struct Case {
    std::string spec;
    std::vector<std::string> overrides;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"bogus", {}, "unknown method 'bogus'"},
      {"seal", {}, "steering issue"},
      {"=rkv", {}, "label before '='"},
      {"a.b=rkv", {}, "label before '='"},
      {"rkv", {"nonsense"}, "must be FIELD=VALUE"},
      {"rkv", {"colour=red"}, "unknown field 'colour'"},
      {"rkv", {"window=abc"}, "window=abc: not a number"},
      {"rkv", {"window=2.5"}, "not an integer"},
      {"rkv", {"grouping=maybe"}, "must be true or false"},
      {"rkv", {"rkv.sim_threshold=0.9"}, "has no field 'sim_threshold'"},
      {"rkv", {"rkv.sinks=2"}, "has no field 'sinks'"},
      {"rkv", {"window=600"}, "window"},  // budget 512 <= window: ValidateMethod
      {"skipkv", {"sim_threshold=1.5"}, "sim_threshold"},
  };
  for (const auto& c : cases) {
    auto p = MakePreset(c.spec, 512, c.overrides);
    ASSERT_FALSE(p.ok()) << c.spec;
    EXPECT_NE(p.status().message().find(c.message), std::string::npos)
        << "expected '" << c.message << "' in: " << p.status().message();
  }
}

}  // namespace
}  // namespace skipkv::eval
