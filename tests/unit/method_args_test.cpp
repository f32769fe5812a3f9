// The one declaration of the method parameters (skipkv/method_args.h): keys
// and flags are unique, every field reaches the provenance JSON, and every
// field declared for --set (eval, bench throughput, serve's "kv") parses back
// through MakePreset into the field it names. The CLI side (--help of
// each command, `run --json`) is tests/e2e/method_args_e2e_test.cpp.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "skipkv/presets.h"
#include "serve/api_convert.h"
#include "serve/api_request.h"
#include "skipkv/method_args.h"

namespace skipkv {
namespace {

struct Declared {
  std::string key, flag;
  unsigned where;
  ArgScope scope;
  bool negated;
};

std::vector<Declared> AllArgs() {
  std::vector<Declared> v;
  MethodConfig m;
  ForEachMethodArg(m, [&](auto&, const ArgInfo& a) { v.push_back({a.key, a.flag, a.where, a.scope, a.negated}); });
  return v;
}

// The JSON text of the field `key` of `m`.
std::string ValueOf(MethodConfig m, const std::string& key) {
  std::string out;
  ForEachMethodArg(m, [&](auto& field, const ArgInfo& a) {
    if (key == a.key) out = ArgValueJson(field);
  });
  return out;
}

TEST(MethodArgsTest, KeysAndFlagsAreUniqueAndWellFormed) {
  std::set<std::string> keys, flags;
  for (const Declared& d : AllArgs()) {
    EXPECT_TRUE(keys.insert(d.key).second) << "duplicate key " << d.key;
    EXPECT_TRUE(flags.insert(d.flag).second) << "duplicate flag " << d.flag;
    EXPECT_EQ(d.flag.rfind("--", 0), 0u) << d.flag;
    EXPECT_EQ(d.key.find_first_of("=. -"), std::string::npos) << d.key << ": not a --set / JSON name";
    if (d.negated) {
      EXPECT_EQ(d.flag.rfind("--no-", 0), 0u) << d.flag;
    }
    EXPECT_NE(d.where, 0u) << d.key << " is accepted nowhere";
  }
  // The parameters every sweep and server request tunes.
  for (const char* k : {"policy", "budget", "window", "interval", "mix_lambda", "sim_threshold", "steer_layer"})
    EXPECT_TRUE(keys.count(k)) << k;
}

TEST(MethodArgsTest, ProvenanceJsonHasEveryDeclaredField) {
  MethodConfig m;
  m.kv.policy = "skipkv";
  m.kv.skipkv.delimiters = {"\n", "a,b"};
  m.kv.trace_layers = {0, 3};
  const nlohmann::json j = nlohmann::json::parse(MethodArgsJson(m));
  for (const Declared& d : AllArgs()) EXPECT_TRUE(j.contains(d.key)) << d.key;
  EXPECT_EQ(j.size(), AllArgs().size());
  EXPECT_EQ(j.at("policy"), "skipkv");
  EXPECT_EQ(j.at("sentence_delimiters"), nlohmann::json({"\n", "a,b"}));
  EXPECT_EQ(j.at("trace_layers"), nlohmann::json({0, 3}));
  EXPECT_EQ(j.at("pad_policy"), "ragged");
  EXPECT_TRUE(j.at("steer_alpha_max").is_null());  // no clamp
  EXPECT_EQ(j.at("mix_lambda").dump(), "0.1");
}

// A preset whose method uses fields of `scope` (the steering presets get a vector).
std::string PresetFor(ArgScope scope) {
  switch (scope) {
    case ArgScope::kStreaming: return "streaming";
    case ArgScope::kSentences: return "rkv+sentence";
    case ArgScope::kSteer:
    case ArgScope::kSteerAdaptive: return "rkv+sentence+steering";
    case ArgScope::kSteerFixed: return "seal";
    default: return "rkv";
  }
}

TEST(MethodArgsTest, EverySetFieldParsesBackThroughMakePreset) {
  // A valid non-default value per --set field; a new settable field must be
  // added here (and so is tested).
  const std::map<std::string, std::string> values = {
      {"window", "16"},          {"interval", "64"},          {"mix_lambda", "0.5"},
      {"pool_kernel", "5"},      {"sinks", "2"},              {"h2o_heavy", "100"},
      {"h2o_recent", "200"},     {"sim_threshold", "0.5"},    {"min_sentence_tokens", "3"},
      {"pss_include_prompt", "true"}, {"max_sentences", "7"}, {"sentence_scoring", "false"},
      {"steer_layer", "3"},      {"steer_coef", "2.5"},       {"steer_alpha0", "1.5"},
      {"steer_gamma", "0.25"},   {"steer_alpha_max", "4"},
      {"steer_authors_form", "true"}, {"range_min_slots", "2"},  {"pss_lambda_last", "true"}, {"pad_mask_seen_tokens", "true"},
      {"sentence_delimiters", "\\n,?\\n\\n"}, {"nonexec_keywords", "Wait,again"},
  };
  SteeringConfig vector;
  vector.enabled = true;
  vector.file = "/some/vector.gguf";
  size_t settable = 0;
  for (const Declared& d : AllArgs()) {
    if (!(d.where & kArgSet)) continue;
    ++settable;
    ASSERT_TRUE(values.count(d.key)) << "no test value for --set " << d.key;
    const std::string& text = values.at(d.key);
    if (d.scope == ArgScope::kH2oAcc) {
      // No preset runs h2o_acc: a shared override is skipped, a scoped one refused.
      auto shared = MakePreset("rkv", 512, {d.key + "=" + text});
      EXPECT_TRUE(shared.ok()) << d.key << ": " << shared.status().ToString();
      auto scoped = MakePreset("rkv", 512, {"rkv." + d.key + "=" + text});
      ASSERT_FALSE(scoped.ok()) << d.key;
      EXPECT_NE(scoped.status().message().find("has no field '" + d.key + "'"), std::string::npos);
      continue;
    }
    const std::string preset = PresetFor(d.scope);
    auto base = MakePreset(preset, 512, {}, vector);
    ASSERT_TRUE(base.ok()) << preset << ": " << base.status().ToString();
    auto set = MakePreset(preset, 512, {preset + "." + d.key + "=" + text}, vector);
    ASSERT_TRUE(set.ok()) << d.key << "=" << text << ": " << set.status().ToString();
    const std::string before = ValueOf(base->method, d.key), after = ValueOf(set->method, d.key);
    EXPECT_NE(before, after) << d.key << " did not change";
    // Lists are written in the delimiter syntax, everything else as JSON.
    const bool list = d.key == "sentence_delimiters" || d.key == "nonexec_keywords";
    const std::string want = list ? ArgValueJson(*ParseDelimiterList(text)) : text;
    EXPECT_EQ(nlohmann::json::parse(after), nlohmann::json::parse(want)) << d.key;
    // Serve's "kv" object sends JSON numbers as dumped: 16 -> "16", 0.5 -> "0.5".
  }
  EXPECT_EQ(settable, values.size()) << "a test value for a field that is not settable";
}

// Serve's "kv" object names the same fields as --set: each KV field with
// kArgSet, sent as a JSON number or boolean, lands in the request's method.
TEST(MethodArgsTest, ServeKvObjectTakesTheSetFields) {
  const std::map<std::string, nlohmann::json> values = {
      {"window", 16},          {"interval", 64},           {"mix_lambda", 0.5},       {"pool_kernel", 5},
      {"sinks", 2},            {"sim_threshold", 0.5},     {"min_sentence_tokens", 3}, {"pss_include_prompt", true},
      {"max_sentences", 7},    {"sentence_scoring", false},  {"range_min_slots", 2},     {"pss_lambda_last", true},
      {"pad_mask_seen_tokens", true},
  };
  size_t checked = 0;
  for (const Declared& d : AllArgs()) {
    if (!(d.where & kArgSet) || d.key.rfind("steer_", 0) == 0 || d.scope == ArgScope::kH2oAcc) continue;
    // "kv" takes numbers and booleans; the list fields come with the preset.
    if (d.key == "sentence_delimiters" || d.key == "nonexec_keywords") continue;
    ASSERT_TRUE(values.count(d.key)) << "no test value for kv." << d.key;
    const std::string preset = PresetFor(d.scope);
    nlohmann::json body = {{"prompt", "x"}, {"kv", {{"policy", preset}, {"budget", 512}, {d.key, values.at(d.key)}}}};
    serve::ParseOutcome parsed = serve::ParseRequest(body.dump(), serve::Endpoint::kCompletions);
    ASSERT_TRUE(parsed.ok()) << d.key << ": " << parsed.error.message;
    serve::ConvertOutcome conv = serve::ToEngineRequest(*parsed.request, serve::ConvertLimits{4096, 16, 0});
    ASSERT_TRUE(conv.ok()) << d.key << ": " << conv.error.message;
    ASSERT_TRUE(conv.request->method.has_value());
    EXPECT_EQ(nlohmann::json::parse(ValueOf(*conv.request->method, d.key)), values.at(d.key)) << d.key;
    ++checked;
  }
  EXPECT_EQ(checked, values.size());
}

// The SkipKV authors' presets are serve "kv" policies too (issue 38).
TEST(MethodArgsTest, ServeKvTakesTheAuthorsPresets) {
  nlohmann::json body = {{"prompt", "x"}, {"kv", {{"policy", "skipkv-authors"}, {"budget", 512}}}};
  serve::ParseOutcome parsed = serve::ParseRequest(body.dump(), serve::Endpoint::kCompletions);
  ASSERT_TRUE(parsed.ok()) << parsed.error.message;
  serve::ConvertOutcome conv = serve::ToEngineRequest(*parsed.request, serve::ConvertLimits{4096, 16, 0});
  ASSERT_TRUE(conv.ok()) << conv.error.message;
  ASSERT_TRUE(conv.request->method.has_value());
  const MethodConfig& m = *conv.request->method;
  EXPECT_EQ(m.kv.policy, "skipkv");
  EXPECT_EQ(m.kv.skipkv.range_min_slots, 2);
  EXPECT_TRUE(m.kv.skipkv.lambda_last);
  EXPECT_TRUE(m.kv.pad_mask_seen_tokens);
}

TEST(MethodArgsTest, ParseErrorsNameTheKeyAndValue) {
  MethodConfig m;
  struct Case {
    std::string key, text, message;
  };
  const std::vector<Case> cases = {
      {"window", "abc", "window=abc: not a number"},
      {"window", "2.5", "window=2.5: not an integer"},
      {"window", "1e12", "window=1e12: out of range"},
      {"pss_include_prompt", "maybe", "pss_include_prompt=maybe: must be true or false"},
      {"pad_policy", "sideways", "unknown pad policy 'sideways'"},
      {"steer_cadence", "hourly", "steering cadence 'hourly'"},
      {"sentence_delimiters", ".,", "item 2 of '.,' is empty"},
      {"sentence_delimiters", "a\\q", "unknown escape"},
      {"trace_layers", "1,x", "trace_layers=x: not a number"},
  };
  for (const Case& c : cases) {
    Status st = Status::Ok();
    bool found = false;
    ForEachMethodArg(m, [&](auto& field, const ArgInfo& a) {
      if (c.key != a.key) return;
      found = true;
      st = ParseArgValue(field, a, c.text);
    });
    ASSERT_TRUE(found) << c.key;
    ASSERT_FALSE(st.ok()) << c.key << "=" << c.text;
    EXPECT_NE(st.message().find(c.message), std::string::npos) << st.message();
  }
}

TEST(MethodArgsTest, DelimiterListRoundTrips) {
  const std::vector<std::string> items = {"\n", ".\n", "a,b", "back\\slash", "\t\r"};
  auto parsed = ParseDelimiterList(FormatDelimiterList(items));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, items);
  EXPECT_EQ(FormatDelimiterList(DefaultSentenceDelimiters()), "\\n,.\\n,)\\n,\\n\\n,.\\n\\n,)\\n\\n");
}

TEST(MethodArgsTest, ScopesFollowPolicyProperties) {
  MethodConfig m;
  EXPECT_TRUE(MethodUsesArg(ArgScope::kAny, m));
  EXPECT_FALSE(MethodUsesArg(ArgScope::kEvicts, m));  // full
  m.kv.policy = "skipkv";
  EXPECT_TRUE(MethodUsesArg(ArgScope::kEvicts, m));
  EXPECT_TRUE(MethodUsesArg(ArgScope::kSentences, m));
  EXPECT_TRUE(MethodUsesArg(ArgScope::kMixLambda, m));
  EXPECT_FALSE(MethodUsesArg(ArgScope::kStreaming, m));
  EXPECT_FALSE(MethodUsesArg(ArgScope::kSteer, m));
  m.steer.enabled = true;
  EXPECT_TRUE(MethodUsesArg(ArgScope::kSteerFixed, m));
  m.steer.adaptive = true;
  EXPECT_FALSE(MethodUsesArg(ArgScope::kSteerFixed, m));
  EXPECT_TRUE(MethodUsesArg(ArgScope::kSteerAdaptive, m));
}

}  // namespace
}  // namespace skipkv
