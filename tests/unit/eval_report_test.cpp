// Report data and Table 1 planning: byte sizes, the max batch for a memory
// limit (numbers worked out by hand for the R1-Distill-Qwen-1.5B shape),
// per-sample sentence ratios from a row's diagnostics, the eviction view's
// data from a hand-written trace (and its errors naming file, line and
// field), and the Markdown table.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "eval/report.h"
#include "eval/throughput.h"

namespace skipkv::eval {
namespace {

std::string Temp(const std::string& name, const std::string& content) {
  const std::string p = ::testing::TempDir() + "/skipkv_report_test_" + name;
  std::ofstream(p) << content;
  return p;
}

TEST(EvalReportTest, ParsesByteSizes) {
  EXPECT_EQ(*ParseByteSize("8GiB"), 8ull << 30);
  EXPECT_EQ(*ParseByteSize("512 MiB"), 512ull << 20);
  EXPECT_EQ(*ParseByteSize("2GB"), 2000000000ull);
  EXPECT_EQ(*ParseByteSize("1.5kib"), 1536ull);
  EXPECT_EQ(*ParseByteSize("4096"), 4096ull);
  for (const char* bad : {"", "GiB", "8XB", "1.2.3G", "0", "-1G"}) {
    auto r = ParseByteSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << r.status().message();
  }
}

TEST(EvalReportTest, MaxBatchForTheQwen15bShape) {
  // 28 layers, 2 KV heads, head_dim 128, f16: 2 * 28 * 2 * 128 * 2 = 28672 bytes per position.
  const uint64_t slot = KvBytesPerSlot(28, 2, 128, 2);
  EXPECT_EQ(slot, 28672u);
  const uint64_t mem = 8ull << 30;
  KvPolicyConfig full;
  full.policy = "full";
  auto f = PlanMaxBatch(full, 200, 8192, slot, mem);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->slots_per_sequence, 8392);
  EXPECT_EQ(f->bytes_per_sequence, 8392u * 28672u);
  EXPECT_EQ(f->max_batch, 35);  // 8589934592 / 240615424 = 35.7
  KvPolicyConfig rkv;
  rkv.policy = "rkv";
  rkv.budget = 1024;
  rkv.window = 8;
  rkv.interval = 128;
  auto r = PlanMaxBatch(rkv, 200, 8192, slot, mem);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->slots_per_sequence, 1152);                 // B + Δt
  EXPECT_EQ(r->max_batch, 260);                           // 8589934592 / 33030144 = 260.06
  auto longp = PlanMaxBatch(rkv, 2000, 8192, slot, mem);  // a prompt longer than B + Δt is held whole
  EXPECT_EQ(longp->slots_per_sequence, 2000);
  rkv.budget = 0;
  EXPECT_FALSE(PlanMaxBatch(rkv, 200, 8192, slot, mem).ok());
  EXPECT_FALSE(PlanMaxBatch(full, 0, 8192, slot, mem).ok());
}

TEST(EvalReportTest, SentenceRatiosFromDiagnostics) {
  nlohmann::json row = {{"diagnostics",
                         {{"skipkv.pss_sentences", 20.0},
                          {"skipkv.redundant_sentences", 5.0},
                          {"skipkv.nonexec_sentences", 2.0}}}};
  auto s = SampleSentenceStats(row);
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->similarity_ratio, 0.25);
  EXPECT_DOUBLE_EQ(s->nonexec_ratio, 0.1);
  EXPECT_FALSE(s->pair_similarity_ratio.has_value());  // a row without pair counts
  row["diagnostics"]["skipkv.similar_pairs"] = 3.0;
  row["diagnostics"]["skipkv.compared_pairs"] = 12.0;
  s = SampleSentenceStats(row);
  ASSERT_TRUE(s->pair_similarity_ratio.has_value());
  EXPECT_DOUBLE_EQ(*s->pair_similarity_ratio, 0.25);
  row["diagnostics"]["skipkv.compared_pairs"] = 0.0;
  EXPECT_FALSE(SampleSentenceStats(row)->pair_similarity_ratio.has_value());
  EXPECT_FALSE(SampleSentenceStats({{"diagnostics", nlohmann::json::object()}}).has_value());
  row["diagnostics"]["skipkv.pss_sentences"] = 0.0;
  EXPECT_FALSE(SampleSentenceStats(row).has_value());
}

TEST(EvalReportTest, EvictionViewDataPicksLayerHeadAndSequence) {
  const std::string run = Temp("run.json", nlohmann::json{{"index", 0},
                                                          {"prompt_tokens", 2},
                                                          {"method", {{"name", "rkv"}}},
                                                          {"stream_pieces", {"<s>", "A", " b", " c", " d"}}}
                                                   .dump() +
                                               "\n");
  const std::string trace =
      Temp("trace.jsonl", R"({"seq":0,"l":4,"layer":0,"n":4,"kept":[[[0,1],[3,3]],[[0,0],[2,3]]]})"
                          "\n"
                          R"({"seq":0,"l":4,"layer":1,"n":4,"kept":[[[1,3]],[[0,2]]]})"
                          "\n"
                          R"({"seq":1,"l":4,"layer":0,"n":4,"kept":[[[0,2]],[[0,2]]]})"
                          "\n");
  auto ev = EvictionViewData(trace, run, 0, 1, 0);
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  ASSERT_EQ(ev->at("compressions").size(), 1u);
  EXPECT_EQ(ev->at("compressions")[0].at("kept"), nlohmann::json::parse("[[0,0],[2,3]]"));
  EXPECT_EQ(ev->at("pieces").size(), 5u);
  EXPECT_EQ(ev->at("prompt_tokens"), 2);

  auto head = EvictionViewData(trace, run, 0, 2, 0);
  ASSERT_FALSE(head.ok());
  EXPECT_NE(head.status().message().find("head 2 out of range"), std::string::npos)
      << head.status().message();
  auto layer = EvictionViewData(trace, run, 7, 0, 0);
  ASSERT_FALSE(layer.ok());
  EXPECT_NE(layer.status().message().find("at layer 7"), std::string::npos) << layer.status().message();
  const std::string broken = Temp("broken.jsonl", R"({"seq":0,"l":"x","layer":0,"n":4,"kept":[]})"
                                                  "\n");
  auto b = EvictionViewData(broken, run, 0, 0, 0);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find(":1: field 'l'"), std::string::npos) << b.status().message();
  const std::string nopieces = Temp("nopieces.json", R"({"index":0})"
                                                     "\n");
  auto np = EvictionViewData(trace, nopieces, 0, 0, 0);
  ASSERT_FALSE(np.ok());
  EXPECT_NE(np.status().message().find("stream_pieces"), std::string::npos) << np.status().message();
}

TEST(EvalReportTest, MarkdownHasEveryRowAndTheSentenceTable) {
  nlohmann::json report = {
      {"sections",
       {{{"file", "a.jsonl"},
         {"dataset", "gsm8k"},
         {"model", "m"},
         {"summary",
          {{{"method", "fullkv"}, {"budget", 0}, {"rows", 2}, {"pass@1", 50.0}, {"tokens_mean", 10.0}},
           {{"method", "skipkv"}, {"budget", 64}, {"rows", 2}, {"pass@1", 0.0}, {"tokens_mean", 12.5}}}},
         {"samples",
          {{{"method", "skipkv"},
            {"budget", 64},
            {"correct", false},
            {"similarity_ratio", 0.5},
            {"pair_similarity_ratio", 0.125},
            {"nonexec_ratio", 0.25}},
           {{"method", "skipkv"},
            {"budget", 64},
            {"correct", false},
            {"similarity_ratio", 0.0},
            {"nonexec_ratio", 0.75}},
           {{"method", "fullkv"},
            {"budget", 0},
            {"correct", true},
            {"similarity_ratio", 0.0},
            {"pair_similarity_ratio", 0.5},
            {"nonexec_ratio", 0.0}}}}}}},
      {"throughput", nullptr}};
  const std::string md = SummaryMarkdown(report);
  EXPECT_NE(md.find("| fullkv | 0 | 2 | 50.0 | 10.0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| skipkv | 64 | 2 | 0.0 | 12.5 |"), std::string::npos) << md;
  // Pair share: the mean over the samples that have one (one of two here).
  EXPECT_NE(md.find("| skipkv | 64 | no | 2 | 0.125 | 0.250 | 0.500 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| fullkv | 0 | yes | 1 | 0.500 | 0.000 | 0.000 |"), std::string::npos) << md;
  EXPECT_EQ(md.find("Throughput"), std::string::npos);
}

}  // namespace
}  // namespace skipkv::eval
