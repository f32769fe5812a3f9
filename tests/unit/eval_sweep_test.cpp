// The sweep's bookkeeping (src/eval): datasets with their field mapping and
// malformed-line errors, the prompt, shards, the append-only results file
// (torn tails, resume checks), merge (refuses mixed configurations) and the
// metrics, against hand-computed expectations.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "eval/dataset.h"
#include "eval/jsonl.h"
#include "eval/math_equal.h"
#include "eval/prompt.h"
#include "eval/provenance.h"
#include "eval/results.h"

namespace skipkv::eval {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/eval_sweep_test_" + std::to_string(::getpid()) + "_" + name;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(EvalDatasetTest, BundledDatasetsLoad) {
  const std::string dir = SKIPKV_DATA_DIR;
  struct Expect {
    const char* name;
    size_t rows;
    const char* first_id;
    const char* first_reference;
    int64_t max_gen;
  };
  for (const Expect& e : {Expect{"gsm8k", 1319, "0", "18", 8192},
                          Expect{"math500", 500, "test/precalculus/807.json", "(3,\\frac{\\pi}{2})", 16384},
                          Expect{"aime24", 30, "60", "204", 16384}}) {
    auto spec = ResolveDataset(e.name, dir);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    EXPECT_EQ(spec->max_gen, e.max_gen);
    auto ds = LoadDataset(*spec, false);
    ASSERT_TRUE(ds.ok()) << ds.status().ToString();
    EXPECT_EQ(ds->problems.size(), e.rows) << e.name;
    EXPECT_TRUE(ds->skipped.empty());
    EXPECT_EQ(ds->problems[0].id, e.first_id) << e.name;
    EXPECT_EQ(ds->problems[0].reference, e.first_reference) << e.name;
    EXPECT_EQ(ds->problems[0].line, 1u);
    std::set<std::string> ids;
    for (const auto& p : ds->problems) ids.insert(p.id);
    EXPECT_EQ(ids.size(), e.rows) << e.name << ": ids must be unique";
  }
}

// Testbed v2's splits (tools/testbed/gen.py --fmt 4): plain prompts ending in "<think>\n", one-digit
// answers that grade from a \boxed{} after </think>, and no prompt shared between the two splits or with
// the v1 testbed's.
TEST(EvalDatasetTest, TestbedV2DatasetsLoadAndGrade) {
  std::set<std::string> prompts;
  for (const auto& name : {"testbed", "testbed-val"}) {
    auto spec = ResolveDataset(name, SKIPKV_DATA_DIR);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    auto ds = LoadDataset(*spec, false);
    ASSERT_TRUE(ds.ok()) << ds.status().ToString();
    for (const auto& p : ds->problems) prompts.insert(p.question);
  }
  struct Expect {
    const char* name;
    size_t rows;
    const char* id_prefix;
    bool reported;  // a split results are reported on (calibrate refuses it)
  };
  for (const Expect& e : {Expect{"testbed2", 500, "testbed2-test-", true},
                          Expect{"testbed2-val", 200, "testbed2-val-", false}}) {
    auto spec = ResolveDataset(e.name, SKIPKV_DATA_DIR);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    EXPECT_EQ(spec->reported_split, e.reported) << e.name;
    EXPECT_EQ(spec->max_gen, 1536) << e.name;
    EXPECT_TRUE(spec->plain_prompt) << e.name;
    auto ds = LoadDataset(*spec, false);
    ASSERT_TRUE(ds.ok()) << ds.status().ToString();
    ASSERT_EQ(ds->problems.size(), e.rows) << e.name;
    EXPECT_TRUE(ds->skipped.empty());
    std::set<std::string> ids;
    for (const auto& p : ds->problems) {
      ids.insert(p.id);
      EXPECT_EQ(p.id.rfind(e.id_prefix, 0), 0u) << p.id;
      ASSERT_EQ(p.reference.size(), 1u) << p.id;
      ASSERT_TRUE(p.reference[0] >= '0' && p.reference[0] <= '9') << p.id;
      EXPECT_EQ(p.question.rfind("Facts:\n", 0), 0u) << p.id;
      EXPECT_EQ(p.question.substr(p.question.size() - 8), "<think>\n") << p.id;
      EXPECT_TRUE(prompts.insert(p.question).second) << p.id << ": prompt shared with another testbed split";
      const std::string right = "0+1=1, 0 left.\n\n</think>\n\\boxed{" + p.reference + "}\n";
      EXPECT_TRUE(GradeOutput(right, p.reference_raw).equal) << p.id;
      const char wrong_digit = static_cast<char>('0' + (p.reference[0] - '0' + 1) % 10);
      EXPECT_FALSE(
          GradeOutput("</think>\n\\boxed{" + std::string(1, wrong_digit) + "}\n", p.reference_raw).equal)
          << p.id;
    }
    EXPECT_EQ(ids.size(), e.rows) << e.name << ": ids must be unique";
  }
}

TEST(EvalDatasetTest, UnknownNameIsAnError) {
  auto spec = ResolveDataset("math5000", SKIPKV_DATA_DIR);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("'math5000'"), std::string::npos);
  EXPECT_NE(spec.status().message().find("math500"), std::string::npos);
}

TEST(EvalDatasetTest, FieldMappingAndMalformedLines) {
  const std::string path = TempPath("custom.jsonl");
  WriteFile(path,
            "{\"q\": \"What is 1+1?\", \"a\": \"2\", \"k\": \"x1\"}\n"
            "\n"
            "{\"q\": \"What is 2+2?\", \"a\": 4, \"k\": \"x2\"}\n"
            "{\"q\": \"broken\", \"a\": \n"
            "{\"q\": \"no answer\", \"k\": \"x3\"}\n"
            "{\"q\": \"dup id\", \"a\": \"5\", \"k\": \"x1\"}\n"
            "{\"q\": \"\", \"a\": \"5\", \"k\": \"x9\"}\n"
            "[1, 2]\n"
            "{\"q\": \"boxed\", \"a\": \"so \\\\boxed{\\\\frac12}\", \"k\": \"x4\"}\n");
  auto spec = ResolveDataset(path, SKIPKV_DATA_DIR, "q", "a", "k");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->question_field, "q");
  // Without --skip-bad the first bad line (4) is fatal, named with its line.
  auto strict = LoadDataset(*spec, false);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find(path + ":4: not valid JSON"), std::string::npos)
      << strict.status().message();
  // With it, every bad line is reported and the rest load.
  auto lenient = LoadDataset(*spec, true);
  ASSERT_TRUE(lenient.ok()) << lenient.status().ToString();
  ASSERT_EQ(lenient->problems.size(), 3u);
  EXPECT_EQ(lenient->problems[1].id, "x2");
  EXPECT_EQ(lenient->problems[1].reference, "4");
  EXPECT_EQ(lenient->problems[1].line, 3u);
  EXPECT_EQ(lenient->problems[2].reference, "\\frac{1}{2}");
  ASSERT_EQ(lenient->skipped.size(), 5u);
  EXPECT_NE(lenient->skipped[1].find(":5: field 'a' is missing"), std::string::npos) << lenient->skipped[1];
  EXPECT_NE(lenient->skipped[2].find(":6: field 'k' repeats the id 'x1'"), std::string::npos)
      << lenient->skipped[2];
  EXPECT_NE(lenient->skipped[3].find(":7: field 'q' is empty"), std::string::npos) << lenient->skipped[3];
  EXPECT_NE(lenient->skipped[4].find(":8: not a JSON object"), std::string::npos) << lenient->skipped[4];
  // A file whose every line is bad has no usable rows.
  const std::string bad = TempPath("bad.jsonl");
  WriteFile(bad, "{\"question\": 3, \"answer\": \"1\"}\n");
  auto spec2 = ResolveDataset(bad, SKIPKV_DATA_DIR);
  ASSERT_TRUE(spec2.ok());
  auto r = LoadDataset(*spec2, false);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(":1: field 'question' must be a string, got number"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(LoadDataset(*spec2, true).ok());
}

TEST(EvalPromptTest, RkvInstructionIsVerbatim) {
  EXPECT_EQ(
      RkvInstruction("Q?"),
      "You are given a math problem.\n\nProblem: Q?\n\n You need to solve the problem step by step. First, "
      "you "
      "need to provide the chain-of-thought, then provide the final answer.\n\n Provide the final answer in "
      "the format: Final answer:  \\boxed{}");
  EXPECT_TRUE(ParsePromptStyle("chat").ok());
  EXPECT_FALSE(ParsePromptStyle("Chat").ok());
}

// Issue 38 row 2: the SkipKV authors' SEAL instruction (run_math.py, DeepSeek
// models: one user turn), question stripped; it goes through the chat template.
TEST(EvalPromptTest, SealInstructionIsVerbatim) {
  EXPECT_EQ(SealInstruction("  Q?\n"),
            "Answer the following questions. You should think step-by-step and put your final answer "
            "within \\boxed{}.\nQuestion: Q?");
  auto s = ParsePromptStyle("seal-chat");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, PromptStyle::kSealChat);
  EXPECT_STREQ(PromptStyleName(*s), "seal-chat");
  EXPECT_TRUE(PromptStyleUsesChat(*s));
  EXPECT_FALSE(PromptStyleUsesChat(PromptStyle::kRaw));
  EXPECT_EQ(PromptText(*s, "x"), SealInstruction("x"));
  EXPECT_EQ(PromptText(PromptStyle::kRaw, "x"), RkvInstruction("x"));
}

TEST(EvalShardTest, ParseAndPartition) {
  EXPECT_FALSE(ParseShard("0/2").ok());
  EXPECT_FALSE(ParseShard("3/2").ok());
  EXPECT_FALSE(ParseShard("1/0").ok());
  EXPECT_FALSE(ParseShard("1-2").ok());
  EXPECT_FALSE(ParseShard("1/2x").ok());
  auto a = ParseShard("1/3"), b = ParseShard("2/3"), c = ParseShard("3/3");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  for (size_t i = 0; i < 100; ++i) EXPECT_EQ(a->Contains(i) + b->Contains(i) + c->Contains(i), 1) << i;
  EXPECT_TRUE(a->Contains(0));
  EXPECT_TRUE(b->Contains(4));
}

nlohmann::json Row(const std::string& problem, const std::string& method, int64_t budget, int sample,
                   bool correct, double tokens, const nlohmann::json& run) {
  return {{"problem", problem},
          {"method", method},
          {"budget", budget},
          {"sample", sample},
          {"line", std::stoi(problem) + 1},
          {"correct", correct},
          {"output", "out " + problem + method + std::to_string(sample)},
          {"output_tokens", tokens},
          {"kv", {{"peak_live_bytes", tokens * 10}, {"compressions", 2}}},
          {"run", run},
          {"method_config", {{"policy", method}, {"budget", budget}}}};
}

// Two runs appending to one file once interleaved their lines (torn JSON in
// the middle of the file, rows run twice): a second writer is refused while
// the first lives, and admitted once it has closed.
TEST(EvalResultsTest, OneWriterPerFile) {
  const std::string path = TempPath("locked.jsonl");
  std::filesystem::remove(path);
  const nlohmann::json run = {{"dataset", "math500"}};
  {
    auto first = ResultsWriter::Open(path);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    auto second = ResultsWriter::Open(path);
    ASSERT_FALSE(second.ok());
    EXPECT_NE(second.status().message().find("another run"), std::string::npos) << second.status().message();
    EXPECT_NE(second.status().message().find(path), std::string::npos) << second.status().message();
    ASSERT_TRUE((*first)->Append(Row("0", "rkv", 512, 0, true, 10, run)).ok());
  }
  auto again = ResultsWriter::Open(path);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_TRUE((*again)->Append(Row("1", "rkv", 512, 0, true, 10, run)).ok());
  auto lines = ReadJsonl(path);
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  EXPECT_EQ(lines->size(), 2u);
}

TEST(EvalResultsTest, AppendResumeAndTornTail) {
  const std::string path = TempPath("rows.jsonl");
  std::filesystem::remove(path);
  const nlohmann::json run = {{"dataset", "math500"}, {"model_digest", "abc"}};
  const std::map<std::string, nlohmann::json> methods = {{"rkv", {{"policy", "rkv"}, {"budget", 512}}}};
  {
    auto w = ResultsWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*w)->Append(Row("0", "rkv", 512, 0, true, 10, run)).ok());
    ASSERT_TRUE((*w)->Append(Row("1", "rkv", 512, 0, false, 20, run)).ok());
  }
  // A writer killed mid-line leaves a torn tail: reading ignores it, and the
  // next writer cuts it before appending.
  { std::ofstream(path, std::ios::app) << "{\"problem\": \"2\", \"meth"; }
  auto done = ReadFinishedRows(path, run, methods);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->size(), 2u);
  EXPECT_TRUE(done->count(RowKey{"1", "rkv", 512, 0}));
  {
    auto w = ResultsWriter::Open(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append(Row("2", "rkv", 512, 0, true, 30, run)).ok());
  }
  auto lines = ReadJsonl(path);
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  EXPECT_EQ(lines->size(), 3u);
  // Another run configuration or another method configuration is refused.
  nlohmann::json other = run;
  other["model_digest"] = "def";
  auto refused = ReadFinishedRows(path, other, methods);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("run.model_digest"), std::string::npos)
      << refused.status().message();
  auto refused2 = ReadFinishedRows(path, run, {{"rkv", {{"policy", "rkv"}, {"budget", 1024}}}});
  ASSERT_FALSE(refused2.ok());
  EXPECT_NE(refused2.status().message().find("'budget'"), std::string::npos) << refused2.status().message();
}

TEST(EvalResultsTest, MergeJoinsShardsAndRefusesMixedConfigs) {
  const nlohmann::json run = {{"dataset", "gsm8k"}};
  const std::string a = TempPath("shard1.jsonl"), b = TempPath("shard2.jsonl");
  WriteFile(a, Row("0", "rkv", 512, 0, true, 1, run).dump() + "\n" +
                   Row("2", "rkv", 512, 0, true, 1, run).dump() + "\n");
  WriteFile(b, Row("1", "rkv", 512, 0, false, 1, run).dump() + "\n" +
                   Row("0", "full", 0, 0, true, 1, run).dump() + "\n");
  auto merged = MergeResults({a, b});
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  ASSERT_EQ(merged->size(), 4u);
  EXPECT_EQ((*merged)[0]["method"], "full");
  EXPECT_EQ((*merged)[1]["problem"], "0");
  EXPECT_EQ((*merged)[2]["problem"], "1");
  EXPECT_EQ((*merged)[3]["problem"], "2");
  // A shard from another run.
  const std::string c = TempPath("shard3.jsonl");
  WriteFile(c, Row("3", "rkv", 512, 0, true, 1, {{"dataset", "math500"}}).dump() + "\n");
  auto mixed = MergeResults({a, c});
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("run.dataset"), std::string::npos) << mixed.status().message();
  // The same key with another output.
  nlohmann::json dup = Row("0", "rkv", 512, 0, true, 1, run);
  dup["output"] = "something else";
  WriteFile(c, dup.dump() + "\n");
  EXPECT_FALSE(MergeResults({a, c}).ok());
  // The same method and budget with another method configuration.
  nlohmann::json cfg = Row("5", "rkv", 512, 0, true, 1, run);
  cfg["method_config"]["window"] = 16;
  WriteFile(c, cfg.dump() + "\n");
  auto cfg_mixed = MergeResults({a, c});
  ASSERT_FALSE(cfg_mixed.ok());
  EXPECT_NE(cfg_mixed.status().message().find("'window'"), std::string::npos) << cfg_mixed.status().message();
  EXPECT_FALSE(MergeResults({a, TempPath("missing.jsonl")}).ok());
}

TEST(EvalResultsTest, SummarizeAveragesSamplesPerProblem) {
  const nlohmann::json run = {{"dataset", "x"}};
  // Problem 0: 2 of 2 samples correct; problem 1: 1 of 2; problem 2: 0 of 2.
  // pass@1 = mean(1, 0.5, 0) = 50%. Tokens: correct 10+20+30, incorrect 40+50+60.
  std::vector<nlohmann::json> rows = {
      Row("0", "rkv", 512, 0, true, 10, run),  Row("0", "rkv", 512, 1, true, 20, run),
      Row("1", "rkv", 512, 0, true, 30, run),  Row("1", "rkv", 512, 1, false, 40, run),
      Row("2", "rkv", 512, 0, false, 50, run), Row("2", "rkv", 512, 1, false, 60, run),
      Row("0", "full", 0, 0, true, 7, run),
  };
  rows[0]["diagnostics"] = {{"skipkv.sentences", 4}, {"note", "text is ignored"}};
  rows[1]["diagnostics"] = {{"skipkv.sentences", 8}};
  const auto s = Summarize(rows);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0]["method"], "full");
  EXPECT_DOUBLE_EQ(s[0]["pass@1"].get<double>(), 100.0);
  const auto& r = s[1];
  EXPECT_EQ(r["rows"], 6);
  EXPECT_EQ(r["problems"], 3);
  EXPECT_DOUBLE_EQ(r["pass@1"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(r["tokens_total"].get<double>(), 210.0);
  EXPECT_DOUBLE_EQ(r["tokens_mean_correct"].get<double>(), 20.0);
  EXPECT_DOUBLE_EQ(r["tokens_mean_incorrect"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(r["kv_peak_bytes_max"].get<double>(), 600.0);
  EXPECT_DOUBLE_EQ(r["kv_peak_bytes_mean"].get<double>(), 350.0);
  EXPECT_DOUBLE_EQ(r["compressions_mean"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(r["diagnostics_mean"]["skipkv.sentences"].get<double>(), 6.0);
  EXPECT_FALSE(r["diagnostics_mean"].contains("note"));
}

TEST(EvalProvenanceTest, ContentDigestTellsFilesApart) {
  const std::string a = TempPath("digest_a.bin"), b = TempPath("digest_b.bin");
  std::string bytes(100003, 'x');
  WriteFile(a, bytes);
  bytes[77777] = 'y';
  WriteFile(b, bytes);
  auto da = ContentDigest(a), da2 = ContentDigest(a), db = ContentDigest(b);
  ASSERT_TRUE(da.ok() && da2.ok() && db.ok());
  EXPECT_EQ(*da, *da2);
  EXPECT_NE(*da, *db);
  EXPECT_EQ(da->rfind("xh64:", 0), 0u);
  EXPECT_EQ(da->size(), 5u + 16u);
  // A file and the same bytes one shorter differ (the length is hashed).
  WriteFile(b, std::string(100002, 'x'));
  EXPECT_NE(*ContentDigest(b), *da);
  // A directory: its files' names and contents.
  const std::string dir = TempPath("digest_dir");
  std::filesystem::create_directories(dir + "/sub");
  WriteFile(dir + "/config.json", "{}");
  WriteFile(dir + "/sub/w.bin", "abc");
  auto d1 = ContentDigest(dir);
  ASSERT_TRUE(d1.ok()) << d1.status().ToString();
  WriteFile(dir + "/sub/w.bin", "abd");
  EXPECT_NE(*ContentDigest(dir), *d1);
  EXPECT_EQ(*ContentDigest(":default:"), "embedded:stories260K");
  EXPECT_FALSE(ContentDigest(TempPath("no_such_file")).ok());
  EXPECT_FALSE(SourceCommit().empty());
}

}  // namespace
}  // namespace skipkv::eval
