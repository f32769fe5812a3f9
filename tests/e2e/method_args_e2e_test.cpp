// The CLI is driven by the one declaration of the method parameters
// (skipkv/method_args.h): each declared flag is in --help of every command
// that takes it (with its help text), `run --json` carries every declared
// field in its provenance ("config") with the values the flags set, and a
// flag the policy does not use is refused by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "skipkv/method_args.h"

namespace skipkv::e2e {
namespace {

struct Declared {
  std::string key, flag, help;
  unsigned where;
};

std::vector<Declared> AllArgs() {
  std::vector<Declared> v;
  MethodConfig m;
  ForEachMethodArg(m, [&](auto&, const ArgInfo& a) { v.push_back({a.key, a.flag, a.help, a.where}); });
  return v;
}

TEST(MethodArgsE2eTest, EveryDeclaredFlagIsInTheHelpOfEachCommandThatTakesIt) {
  const std::string dir = TestDir("method_args_help");
  const struct {
    const char* command;
    unsigned bit;
  } commands[] = {{"run", kArgRun}, {"bench", kArgBench}, {"eval", kArgEval}, {"serve", kArgServe}};
  for (const auto& c : commands) {
    CmdResult r = RunSkipkv(dir, {c.command, "--help"});
    ASSERT_EQ(r.exit_code, 0) << c.command << ": " << r.err;
    size_t n = 0;
    for (const Declared& d : AllArgs()) {
      if (!(d.where & c.bit)) continue;
      ++n;
      EXPECT_NE(r.out.find(d.flag + " "), std::string::npos) << c.command << " --help lacks " << d.flag;
      EXPECT_NE(r.out.find(d.help.substr(0, 30)), std::string::npos)
          << c.command << " --help lacks the help of " << d.flag;
    }
    EXPECT_GT(n, 0u) << c.command << " takes no declared parameter";
  }
}

TEST(MethodArgsE2eTest, RunJsonProvenanceHasEveryDeclaredFieldWithTheFlagsValues) {
  const std::string dir = TestDir("method_args_json");
  CmdResult r = RunSkipkv(dir, {"run", "--json", "-q", "-n", "6", "-t", "1", "-p", "Once upon a time",
                                "--kv-policy", "skipkv", "--kv-budget", "48", "--kv-window", "4", "--kv-interval",
                                "8", "--mix-lambda", "0.2", "--pool-kernel", "5", "--sim-threshold", "0.9",
                                "--min-sentence-tokens", "3", "--pss-include-prompt", "--max-sentences", "100",
                                "--sentence-delimiters", ".,\\n", "--no-sentence-scoring", "--pad-policy", "padded"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out.substr(0, r.out.find('\n')));
  const nlohmann::json& config = j.at("config");
  for (const Declared& d : AllArgs()) EXPECT_TRUE(config.contains(d.key)) << "run --json config lacks " << d.key;
  EXPECT_EQ(config.at("policy"), "skipkv");
  EXPECT_EQ(config.at("budget"), 48);
  EXPECT_EQ(config.at("window"), 4);
  EXPECT_EQ(config.at("interval"), 8);
  EXPECT_FLOAT_EQ(config.at("mix_lambda").get<float>(), 0.2f);
  EXPECT_EQ(config.at("pool_kernel"), 5);
  EXPECT_FLOAT_EQ(config.at("sim_threshold").get<float>(), 0.9f);
  EXPECT_EQ(config.at("min_sentence_tokens"), 3);
  EXPECT_EQ(config.at("pss_include_prompt"), true);
  EXPECT_EQ(config.at("max_sentences"), 100);
  EXPECT_EQ(config.at("sentence_delimiters"), nlohmann::json({".", "\n"}));
  EXPECT_EQ(config.at("sentence_scoring"), false);
  EXPECT_EQ(config.at("pad_policy"), "padded");
}

TEST(MethodArgsE2eTest, AFlagThePolicyDoesNotUseIsRefusedByName) {
  const std::string dir = TestDir("method_args_refuse");
  const struct {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"run", "--kv-policy", "rkv", "--sinks", "2"}, "--sinks applies to the policy streaming only"},
      {{"run", "--kv-policy", "snapkv", "--mix-lambda", "0.5"}, "--mix-lambda applies to the policies rkv and skipkv"},
      {{"run", "--kv-policy", "rkv", "--h2o-heavy", "4"}, "--h2o-heavy applies to the policy h2o_acc only"},
      {{"bench", "-m", ":default:", "--kv-policy", "rkv", "--max-sentences", "4"},
       "--max-sentences applies to a policy that uses sentences"},
      {{"run", "--pad-policy", "sideways"}, "unknown pad policy 'sideways'"},
  };
  for (const auto& c : cases) {
    CmdResult r = RunSkipkv(dir, c.args);
    EXPECT_NE(r.exit_code, 0) << c.message;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << "expected '" << c.message << "' in: " << r.err;
  }
}

}  // namespace
}  // namespace skipkv::e2e
