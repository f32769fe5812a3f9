// Method presets (src/eval/presets.h): what each preset runs, overrides for
// all methods and for one label, the steering presets (seal,
// rkv+sentence+steering, skipkv with a vector), and the errors for unknown
// presets, fields and values.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "skipkv/presets.h"

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
    std::string field;  // Status::field(): what serve maps to "kv.FIELD" without reading the message
  };
  const std::vector<Case> cases = {
      {"bogus", {}, "unknown method 'bogus'", "method"},
      {"seal", {}, "method 'seal' (preset seal) steers: give a steering vector with --steer FILE", "steer_file"},
      {"plus=rkv+sentence+steering", {}, "method 'plus' (preset rkv+sentence+steering) steers", "steer_file"},
      {"+steering", {}, "Table 2's +steering row is rkv+sentence+steering", "method"},
      {"rkv", {"rkv.steer_coef=2"}, "method 'rkv' (preset rkv) does not steer", "steer_coef"},
      {"skipkv", {"skipkv.steer_coef=2"}, "does not steer", "steer_coef"},  // no vector given
      {"rkv", {"steer_colour=2"}, "unknown field 'steer_colour'", "steer_colour"},
      {"=rkv", {}, "label before '='", "method"},
      {"a.b=rkv", {}, "label before '='", "method"},
      {"rkv", {"nonsense"}, "must be FIELD=VALUE", ""},
      {"rkv", {"colour=red"}, "unknown field 'colour'", "colour"},
      {"rkv", {"window=abc"}, "window=abc: not a number", "window"},
      {"rkv", {"window=2.5"}, "not an integer", "window"},
      {"rkv", {"grouping=maybe"}, "must be true or false", "grouping"},
      {"rkv", {"rkv.sim_threshold=0.9"}, "has no field 'sim_threshold'", "sim_threshold"},
      {"rkv", {"rkv.sinks=2"}, "has no field 'sinks'", "sinks"},
      {"rkv", {"window=600"}, "window", "budget"},  // budget 512 <= window: ValidateMethod
      {"skipkv", {"sim_threshold=1.5"}, "sim_threshold", "sim_threshold"},
  };
  for (const auto& c : cases) {
    auto p = MakePreset(c.spec, 512, c.overrides);
    ASSERT_FALSE(p.ok()) << c.spec;
    EXPECT_NE(p.status().message().find(c.message), std::string::npos)
        << "expected '" << c.message << "' in: " << p.status().message();
    EXPECT_EQ(p.status().field(), c.field) << p.status().message();
  }
}

SteeringConfig Vector() {
  SteeringConfig v;
  v.enabled = true;
  v.file = "/some/vector.gguf";
  v.layer = 3;
  v.coef = 1.5f;
  v.alpha0 = 1.25f;
  v.gamma = 0.03f;
  return v;
}

TEST(EvalPresetsTest, SteeringPresets) {
  const SteeringConfig v = Vector();
  // seal: FullKV + the fixed strength.
  auto seal = MakePreset("seal", 512, {}, v);
  ASSERT_TRUE(seal.ok()) << seal.status().ToString();
  EXPECT_EQ(seal->method.kv.policy, "full");
  EXPECT_TRUE(seal->full());
  EXPECT_FALSE(seal->grouping);
  EXPECT_TRUE(seal->method.steer.enabled);
  EXPECT_FALSE(seal->method.steer.adaptive);
  EXPECT_EQ(seal->method.steer.file, "/some/vector.gguf");
  EXPECT_EQ(seal->method.steer.layer, 3);
  EXPECT_FLOAT_EQ(seal->method.steer.coef, 1.5f);
  // Table 2's +steering row: sentence scoring, adaptive strength, no grouping.
  auto plus = MakePreset("rkv+sentence+steering", 256, {}, v);
  ASSERT_TRUE(plus.ok()) << plus.status().ToString();
  EXPECT_EQ(plus->method.kv.policy, "skipkv");
  EXPECT_TRUE(plus->method.kv.skipkv.sentence_scoring);
  EXPECT_FALSE(plus->grouping);
  EXPECT_TRUE(plus->method.steer.enabled);
  EXPECT_TRUE(plus->method.steer.adaptive);
  EXPECT_FLOAT_EQ(plus->method.steer.alpha0, 1.25f);
  EXPECT_FLOAT_EQ(plus->method.steer.gamma, 0.03f);
  // skipkv: adaptive with a vector (+grouping), unsteered without one.
  auto sk = MakePreset("skipkv", 256, {}, v);
  ASSERT_TRUE(sk.ok()) << sk.status().ToString();
  EXPECT_TRUE(sk->grouping);
  EXPECT_TRUE(sk->method.steer.enabled);
  EXPECT_TRUE(sk->method.steer.adaptive);
  auto bare = MakePreset("skipkv", 256, {});
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(bare->method.steer.enabled);
  // The other presets ignore the vector.
  for (const char* name : {"fullkv", "rkv", "rkv+sentence", "streaming"}) {
    auto p = MakePreset(name, 256, {}, v);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_FALSE(p->method.steer.enabled) << name;
  }
  // The steering fields are in the row's method_config (resume compares it).
  const auto j = nlohmann::json::parse(PresetJson(*seal));
  EXPECT_EQ(j.at("steer.file"), "/some/vector.gguf");
  EXPECT_EQ(j.at("steer.mode"), "fixed");
  EXPECT_EQ(j.at("steer.layer"), 3);
  EXPECT_EQ(nlohmann::json::parse(PresetJson(*sk)).at("steer.mode"), "adaptive");
}

TEST(EvalPresetsTest, SteeringOverrides) {
  const SteeringConfig v = Vector();
  // Shared: applied where the strength kind matches, skipped elsewhere.
  const std::vector<std::string> o = {"steer_coef=4", "steer_gamma=0.05", "off.steer_coef=0",
                                      "steer_layer=5"};
  auto seal = MakePreset("seal", 512, o, v);
  ASSERT_TRUE(seal.ok()) << seal.status().ToString();
  EXPECT_FLOAT_EQ(seal->method.steer.coef, 4.0f);
  EXPECT_FLOAT_EQ(seal->method.steer.gamma, 0.03f);  // not its field: untouched
  EXPECT_EQ(seal->method.steer.layer, 5);
  auto off = MakePreset("off=seal", 512, o, v);
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FLOAT_EQ(off->method.steer.coef, 0.0f);
  auto sk = MakePreset("skipkv", 512, o, v);
  ASSERT_TRUE(sk.ok()) << sk.status().ToString();
  EXPECT_FLOAT_EQ(sk->method.steer.gamma, 0.05f);
  EXPECT_EQ(sk->method.steer.layer, 5);
  auto rkv = MakePreset("rkv", 512, o, v);  // does not steer: shared steering fields skipped
  ASSERT_TRUE(rkv.ok()) << rkv.status().ToString();
  EXPECT_FALSE(rkv->method.steer.enabled);
  // Scoped fields of the other strength kind are refused, naming the kind.
  auto bad = MakePreset("seal", 512, {"seal.steer_gamma=0.1"}, v);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fixed strength (steer_coef)"), std::string::npos)
      << bad.status().message();
  auto bad2 = MakePreset("skipkv", 512, {"skipkv.steer_coef=1"}, v);
  ASSERT_FALSE(bad2.ok());
  EXPECT_NE(bad2.status().message().find("adaptive strength"), std::string::npos) << bad2.status().message();
  // Values are validated (ValidateSteeringConfig: alpha_max >= alpha0, γ >= 0).
  auto neg = MakePreset("skipkv", 512, {"steer_gamma=-1"}, v);
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("gamma"), std::string::npos) << neg.status().message();
  auto nan = MakePreset("seal", 512, {"steer_coef=x"}, v);
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.status().message().find("steer_coef=x: not a number"), std::string::npos);
}

TEST(EvalPresetsTest, RegistryAnswersWhatCallersUsedToCompareNamesFor) {
  // The alias "full" (the policy's name) is the fullkv method.
  EXPECT_EQ(CanonicalPresetName("full"), "fullkv");
  EXPECT_EQ(CanonicalPresetName("rkv"), "rkv");
  EXPECT_EQ(CanonicalPresetName("bogus"), "bogus");
  auto full = MakePreset("full", 512, {});
  ASSERT_TRUE(full.ok()) << full.status().message();
  EXPECT_EQ(full->preset, "fullkv");
  EXPECT_TRUE(full->full());
  // Which presets steer only when a vector is given (eval's note).
  for (const std::string& name : KnownPresets()) {
    auto p = MakePreset(name, 512, {});
    if (!p.ok()) continue;  // the presets that need a vector
    EXPECT_EQ(p->steers_if_given, name == "skipkv" || name == "skipkv-authors") << name;
    // Traits: exactly the presets whose policy evicts take the budget.
    EXPECT_EQ(TraitsOf(p->method).evicts, p->method.kv.budget == 512) << name;
  }
}

}  // namespace
}  // namespace skipkv::eval
