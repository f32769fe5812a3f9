// The sweep side of the SkipKV authors' presets (issue 38 rows 2 and 3) on the
// embedded stories260K model: in one sweep rkv-authors sends R-KV's
// instruction raw and skipkv-authors SEAL's instruction through the chat
// template (different prompt ids, each as the engine tokenizes that text);
// an explicit --prompt, the testbed's plain prompt and --set change that; the
// rows record the style in method_config; with max_length_counts_prompt a
// row's limit is --max-gen minus its prompt (ragged) or minus the longest
// prompt of its padded batch, and without it --max-gen itself; a preset's
// own total (max_length: the authors' per dataset) unless --max-gen is given.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/dataset.h"
#include "eval/prompt.h"
#include "eval/sweep.h"
#include "skipkv/engine.h"
#include "skipkv/presets.h"

namespace skipkv::eval {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/eval_sweep_parity_test_" + std::to_string(::getpid()) + "_" + name;
}

std::unique_ptr<Engine> MakeEngine(PadPolicy pad) {
  EngineOptions o;
  o.threads = 2;
  o.kv.pad_policy = pad;
  o.batch_size = 3;
  o.sort_by_length = false;  // the sweep groups
  // stories260K has no template of its own ("raw": chat = raw text); ChatML
  // tells the raw prompt from the chat one.
  o.chat_template = "chatml";
  auto e = Engine::Create(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

MethodPreset Preset(const std::string& spec, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> o = {"window=4", "interval=16"};
  o.insert(o.end(), extra.begin(), extra.end());
  auto p = MakePreset(spec, 40, o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : MethodPreset{};
}

// Three problems of different lengths, so that the padded batch has pads.
SweepConfig Config(const std::string& name) {
  const std::string path = TempPath(name + ".jsonl");
  std::ofstream(path, std::ios::binary)
      << "{\"question\": \"Tom has two cats.\", \"answer\": \"2\"}\n"
         "{\"question\": \"A girl named Lily went to the park with her big red ball and her mom.\", "
         "\"answer\": \"1\"}\n"
         "{\"question\": \"Once upon a time there was a dog.\", \"answer\": \"3\"}\n";
  SweepConfig c;
  auto spec = ResolveDataset(path, SKIPKV_DATA_DIR);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  c.dataset = *spec;
  auto ds = LoadDataset(c.dataset, false);
  EXPECT_TRUE(ds.ok()) << ds.status().ToString();
  c.problems = ds->problems;
  c.pairs = {Preset("rkv-authors"), Preset("skipkv-authors"), Preset("rkv")};
  c.prompt = PromptStyle::kChat;  // --prompt auto on a math dataset
  c.batch_size = 3;
  c.model_path = ":default:";
  c.output = TempPath(name + "_rows.jsonl");
  std::filesystem::remove(c.output);
  return c;
}

std::vector<int32_t> Ids(const Engine& e, const std::string& text, bool chat) {
  auto ids = e.Tokenize(text, true, chat);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

// The token counts of the problems' raw R-KV prompts (rkv-authors').
std::vector<int64_t> RawPromptLengths(const Engine& e, const SweepConfig& c) {
  std::vector<int64_t> lens;
  for (const Problem& p : c.problems)
    lens.push_back(static_cast<int64_t>(Ids(e, RkvInstruction(p.question), false).size()));
  return lens;
}
int64_t LongestRawPrompt(const Engine& e, const SweepConfig& c) {
  const auto lens = RawPromptLengths(e, c);
  return *std::max_element(lens.begin(), lens.end());
}

TEST(EvalSweepParityTest, PresetsCarryPromptAndMaxLength) {
  const MethodPreset r = Preset("rkv-authors"), s = Preset("skipkv-authors"),
                     f = *MakePreset("fullkv-authors", 0, {});
  ASSERT_TRUE(r.prompt && s.prompt && f.prompt);
  EXPECT_EQ(*r.prompt, PromptStyle::kRaw);
  EXPECT_EQ(*f.prompt, PromptStyle::kRaw);
  EXPECT_EQ(*s.prompt, PromptStyle::kSealChat);
  EXPECT_TRUE(r.max_length_counts_prompt && s.max_length_counts_prompt && f.max_length_counts_prompt);
  const MethodPreset plain = Preset("rkv");
  EXPECT_FALSE(plain.prompt.has_value());
  EXPECT_FALSE(plain.max_length_counts_prompt);
  // The provenance: shown when set, absent otherwise (older rows keep their configuration).
  const auto rj = nlohmann::json::parse(PresetJson(r));
  EXPECT_EQ(rj.at("prompt"), "raw");
  EXPECT_EQ(rj.at("max_length_counts_prompt"), true);
  EXPECT_EQ(nlohmann::json::parse(PresetJson(s)).at("prompt"), "seal-chat");
  const auto pj = nlohmann::json::parse(PresetJson(plain));
  EXPECT_FALSE(pj.contains("prompt"));
  EXPECT_FALSE(pj.contains("max_length_counts_prompt"));
  // Switches of their own: --set turns them on or off, per label.
  const MethodPreset set = Preset("rkv", {"rkv.prompt=seal-chat", "max_length_counts_prompt=true"});
  ASSERT_TRUE(set.prompt.has_value());
  EXPECT_EQ(*set.prompt, PromptStyle::kSealChat);
  EXPECT_TRUE(set.max_length_counts_prompt);
  const MethodPreset off =
      Preset("rkv-authors", {"rkv-authors.max_length_counts_prompt=false", "prompt=chat"});
  EXPECT_FALSE(off.max_length_counts_prompt);
  EXPECT_EQ(*off.prompt, PromptStyle::kChat);
  auto bad = MakePreset("rkv", 40, {"rkv.prompt=Chat"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "prompt");
  EXPECT_NE(bad.status().message().find("prompt=Chat"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("seal-chat"), std::string::npos) << bad.status().message();
  auto bad2 = MakePreset("rkv", 40, {"max_length_counts_prompt=maybe"});
  ASSERT_FALSE(bad2.ok());
  EXPECT_NE(bad2.status().message().find("max_length_counts_prompt"), std::string::npos);
  // The authors' total per dataset (run_math.py's dataset2max_length), for the three presets.
  struct Length {
    const char* preset;
    const char* dataset;
    int64_t max_length;
  };
  for (const Length& l : {Length{"rkv-authors", "math500", 8192}, Length{"skipkv-authors", "aime24", 16384},
                          Length{"fullkv-authors", "gsm8k", 8192}, Length{"rkv-authors", "testbed", 0},
                          Length{"rkv", "math500", 0}}) {
    auto q = MakePreset(l.preset, 40, {}, {}, PresetContext{"", l.dataset});
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    EXPECT_EQ(q->max_length, l.max_length) << l.preset << " " << l.dataset;
    const auto j = nlohmann::json::parse(PresetJson(*q));
    EXPECT_EQ(j.contains("max_length"), l.max_length > 0) << l.preset << " " << l.dataset;
    if (l.max_length > 0) EXPECT_EQ(j.at("max_length"), l.max_length);
  }
  EXPECT_EQ(Preset("rkv", {"rkv.max_length=300"}).max_length, 300);
  auto neg = MakePreset("rkv", 40, {"max_length=-1"});
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.status().field(), "max_length");
}

TEST(EvalSweepParityTest, GenerationLimitArithmetic) {
  SweepConfig c;
  c.max_gen = 1000;
  MethodPreset p = Preset("rkv");
  EXPECT_EQ(GenerationLimit(c, p, 300), 1000);  // the project's default: new tokens only
  p.max_length_counts_prompt = true;
  EXPECT_EQ(GenerationLimit(c, p, 300), 700);
  EXPECT_EQ(GenerationLimit(c, p, 1000), 1);  // a prompt at the total still makes one token
  EXPECT_EQ(GenerationLimit(c, p, 5000), 1);
  p.max_length = 400;  // the preset's total, unless --max-gen was given
  EXPECT_EQ(GenerationLimit(c, p, 300), 100);
  c.max_gen_given = true;
  EXPECT_EQ(GenerationLimit(c, p, 300), 700);
  c.max_gen_given = false;
  p.max_length_counts_prompt = false;
  EXPECT_EQ(GenerationLimit(c, p, 300), 400);
}

TEST(EvalSweepParityTest, PromptStylePerPreset) {
  auto engine = MakeEngine(PadPolicy::kRagged);
  ASSERT_NE(engine, nullptr);
  SweepConfig c = Config("style");
  const Problem& p = c.problems[1];
  const auto raw = Ids(*engine, RkvInstruction(p.question), false);
  const auto seal = Ids(*engine, SealInstruction(p.question), true);
  const auto chat = Ids(*engine, RkvInstruction(p.question), true);
  ASSERT_NE(raw, seal);
  ASSERT_NE(raw, chat);
  ASSERT_NE(seal, Ids(*engine, SealInstruction(p.question), false));
  auto tokens = [&](size_t pair) {
    auto ids = SweepPromptTokens(c, *engine, c.pairs[pair], p);
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    return ids.ok() ? *ids : std::vector<int32_t>{};
  };
  // --prompt auto: each preset's own; a preset without one gets the sweep's.
  EXPECT_EQ(PairPromptStyle(c, c.pairs[0]), PromptStyle::kRaw);
  EXPECT_EQ(PairPromptStyle(c, c.pairs[1]), PromptStyle::kSealChat);
  EXPECT_EQ(PairPromptStyle(c, c.pairs[2]), PromptStyle::kChat);
  EXPECT_EQ(tokens(0), raw);
  EXPECT_EQ(tokens(1), seal);
  EXPECT_EQ(tokens(2), chat);
  // An explicit --prompt wins over every preset's.
  c.prompt_given = true;
  EXPECT_EQ(tokens(0), chat);
  EXPECT_EQ(tokens(1), chat);
  c.prompt = PromptStyle::kSealChat;
  EXPECT_EQ(tokens(0), seal);
  // A dataset with its own prompt (the testbed: plain) keeps it under auto.
  c.prompt_given = false;
  c.prompt = PromptStyle::kPlain;
  c.dataset.plain_prompt = true;
  EXPECT_EQ(PairPromptStyle(c, c.pairs[1]), PromptStyle::kPlain);
  EXPECT_EQ(tokens(1), Ids(*engine, p.question, false));
}

// One ragged sweep with both presets: the rows' prompts, styles and limits.
TEST(EvalSweepParityTest, RaggedSweepRowsPerPreset) {
  auto engine = MakeEngine(PadPolicy::kRagged);
  ASSERT_NE(engine, nullptr);
  SweepConfig c = Config("ragged");
  const int64_t longest = LongestRawPrompt(*engine, c);
  c.max_gen = longest + 6;  // every rkv-authors row keeps >= 6 new tokens
  auto res = RunSweep(c, *engine);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  ASSERT_EQ(res->rows.size(), 9u);
  std::map<std::string, int> per_method;
  for (const auto& row : res->rows) {
    const std::string method = row.at("method");
    const Problem& p = *std::find_if(c.problems.begin(), c.problems.end(),
                                     [&](const Problem& q) { return q.id == row.at("problem"); });
    SCOPED_TRACE(method + " " + p.id);
    ++per_method[method];
    const int64_t prompt = row.at("prompt_tokens").get<int64_t>();
    const auto& mc = row.at("method_config");
    if (method == "rkv") {
      EXPECT_EQ(prompt, static_cast<int64_t>(Ids(*engine, RkvInstruction(p.question), true).size()));
      EXPECT_FALSE(mc.contains("prompt"));
      EXPECT_EQ(row.at("max_new_tokens").get<int64_t>(), c.max_gen);
      continue;
    }
    const bool skipkv = method == "skipkv-authors";
    EXPECT_EQ(mc.at("prompt"), skipkv ? "seal-chat" : "raw");
    EXPECT_EQ(mc.at("max_length_counts_prompt"), true);
    const auto expected = skipkv ? Ids(*engine, SealInstruction(p.question), true)
                                 : Ids(*engine, RkvInstruction(p.question), false);
    EXPECT_EQ(prompt, static_cast<int64_t>(expected.size()));
    EXPECT_EQ(row.at("max_new_tokens").get<int64_t>(), std::max<int64_t>(1, c.max_gen - prompt));
    EXPECT_LE(row.at("output_tokens").get<int64_t>(), row.at("max_new_tokens").get<int64_t>());
    EXPECT_EQ(row.at("run").at("prompt"), "chat");
  }
  EXPECT_EQ(per_method.size(), 3u);
  // The rkv-authors rows run into their limit or end earlier; at least one
  // row of the sweep ends at a limit below --max-gen (the prompt counted).
  bool limited = false;
  for (const auto& row : res->rows)
    limited |= row.at("finish") == "length" && row.at("output_tokens").get<int64_t>() < c.max_gen;
  EXPECT_TRUE(limited);
}

// A preset's max_length is the rows' total unless --max-gen was given; the
// row's method_config shows the total used.
TEST(EvalSweepParityTest, PresetMaxLengthUnlessMaxGenGiven) {
  auto engine = MakeEngine(PadPolicy::kRagged);
  ASSERT_NE(engine, nullptr);
  SweepConfig c = Config("max_length");
  const int64_t longest = LongestRawPrompt(*engine, c);
  c.pairs = {Preset("rkv-authors", {"max_length=" + std::to_string(longest + 4)})};
  c.max_gen = 1000;  // the dataset's default, not given
  auto own = RunSweep(c, *engine);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  ASSERT_EQ(own->rows.size(), 3u);
  for (const auto& row : own->rows) {
    EXPECT_EQ(row.at("method_config").at("max_length"), longest + 4);
    EXPECT_EQ(row.at("max_new_tokens").get<int64_t>(), longest + 4 - row.at("prompt_tokens").get<int64_t>());
  }
  c.output = TempPath("max_length_given_rows.jsonl");
  std::filesystem::remove(c.output);
  c.max_gen = longest + 7;
  c.max_gen_given = true;
  auto given = RunSweep(c, *engine);
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  for (const auto& row : given->rows) {
    EXPECT_EQ(row.at("method_config").at("max_length"), longest + 7);
    EXPECT_EQ(row.at("max_new_tokens").get<int64_t>(), longest + 7 - row.at("prompt_tokens").get<int64_t>());
  }
}

// Padded: every row of a batch is padded to its longest prompt, which is
// what the authors' max_length subtracts.
TEST(EvalSweepParityTest, PaddedLimitIsMaxGenMinusLongestOfTheBatch) {
  auto engine = MakeEngine(PadPolicy::kPadded);
  ASSERT_NE(engine, nullptr);
  SweepConfig c = Config("padded");
  c.pairs = {Preset("rkv-authors")};
  const std::vector<int64_t> lens = RawPromptLengths(*engine, c);
  const int64_t longest = *std::max_element(lens.begin(), lens.end());
  ASSERT_LT(*std::min_element(lens.begin(), lens.end()), longest);  // the batch has pads
  c.max_gen = longest + 5;
  auto res = RunSweep(c, *engine);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  ASSERT_EQ(res->rows.size(), 3u);  // one batch of three
  for (const auto& row : res->rows) {
    EXPECT_EQ(row.at("max_new_tokens").get<int64_t>(), 5);
    EXPECT_LE(row.at("output_tokens").get<int64_t>(), 5);
    EXPECT_EQ(row.at("kv").at("pad_len").get<int64_t>(), longest - row.at("prompt_tokens").get<int64_t>());
  }
}

}  // namespace
}  // namespace skipkv::eval
