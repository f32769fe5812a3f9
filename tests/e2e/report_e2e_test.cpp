// End-to-end: the report tools on the embedded stories260K model.
//   * a small sweep (fullkv, rkv, skipkv x 2 budgets), one traced generation
//     and a `bench throughput` run go into one directory; `skipkv eval
//     report DIR` writes summary.md (every (method, budget) of the rows),
//     report.html (every plot) and eviction.html;
//   * headless Chromium (Debian's `chromium`) opens both pages: the DOM after
//     load must hold every plot as a loaded <img> and the eviction view's
//     slider with one position per traced compression and coloured tokens,
//     and the screenshots must not be blank;
//   * `bench throughput`'s max batch is checked against the KV shape by hand;
//   * `eval fidelity` prints FullKV 100 % and a small budget below it.
// Chromium and python3-matplotlib come from scripts/setup.sh: missing, they
// fail under CI=true (tests/prereq.h) and skip otherwise.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "prereq.h"

namespace {

using skipkv::e2e::CmdResult;
using skipkv::e2e::kBinary;
using skipkv::e2e::ReadAll;

std::string Dir() {
  static const std::string dir = [] {
    const std::string d = ::testing::TempDir() + "/skipkv_report_e2e_" + std::to_string(::getpid());
    std::filesystem::create_directories(d + "/sweep");
    return d;
  }();
  return dir;
}

// Runs a shell command line, stdout/stderr to files.
CmdResult Shell(const std::string& cmd) { return skipkv::e2e::RunShell(Dir(), cmd); }

CmdResult Skipkv(const std::string& args) { return Shell(kBinary + " " + args); }

bool HasMatplotlib() { return Shell("/usr/bin/python3 -c 'import matplotlib'").exit_code == 0; }
bool HasChromium() { return Shell("command -v chromium").exit_code == 0; }

std::string Dataset() { return skipkv::e2e::WriteSixProblems(Dir()); }

// The sweep directory with rows, a traced generation and throughput, made once.
const std::string& SweepDir() {
  static const std::string dir = [] {
    const std::string d = Dir() + "/sweep";
    const CmdResult sweep =
        Skipkv("eval --dataset " + Dataset() +
               " --question-field q --answer-field a --id-field id --methods fullkv,rkv,skipkv "
               "--budgets 40,56 --set window=4 --set interval=16 --max-gen 96 --prompt raw "
               "--batch-size 3 -t 2 -q -o " +
               d + "/six.jsonl");
    EXPECT_EQ(sweep.exit_code, 0) << sweep.err;
    const CmdResult run = Skipkv(
        "run -p 'Once upon a time' -n 160 --temp 0 --kv-policy rkv --kv-budget 40 "
        "--kv-window 4 --kv-interval 16 -t 2 --json --kv-trace " +
        d + "/eviction_trace.jsonl");
    EXPECT_EQ(run.exit_code, 0) << run.err;
    std::ofstream(d + "/eviction_run.json") << run.out;
    const CmdResult tp = Skipkv(
        "bench throughput -m :default: --kv-memory 2MiB --methods fullkv,rkv --budget 64 "
        "--set window=4 --set interval=16 --gen 4 --max-length 256 --max-run-batch 3 "
        "--batches 1,2 -t 2 --json " +
        d + "/throughput.json");
    EXPECT_EQ(tp.exit_code, 0) << tp.err;
    EXPECT_NE(tp.out.find("max batch"), std::string::npos) << tp.out;
    return d;
  }();
  return dir;
}

TEST(BenchThroughputE2eTest, MaxBatchFollowsTheKvShape) {
  const auto doc = nlohmann::json::parse(ReadAll(SweepDir() + "/throughput.json"));
  const int64_t longest = doc.at("longest_prompt");
  ASSERT_GT(longest, 0);
  // stories260K: 5 layers, 4 KV heads, head_dim 8, f16 -> 2*5*4*8*2 = 640 bytes per position.
  const int64_t mem = 2 << 20;
  ASSERT_EQ(doc.at("methods").size(), 2u);
  const auto& full = doc.at("methods")[0];
  EXPECT_EQ(full.at("slots_per_sequence").get<int64_t>(), longest + 256);
  EXPECT_EQ(full.at("max_batch").get<int64_t>(), mem / ((longest + 256) * 640));
  const auto& rkv = doc.at("methods")[1];
  EXPECT_EQ(rkv.at("slots_per_sequence").get<int64_t>(), std::max<int64_t>(longest, 64 + 16));
  EXPECT_GT(rkv.at("max_batch").get<int64_t>(), full.at("max_batch").get<int64_t>());
  for (const auto& m : doc.at("methods")) {
    EXPECT_EQ(m.at("run_batch").get<int64_t>(), 3);
    EXPECT_EQ(m.at("batches").size(), 3u);  // 1, 2 and the run batch
    EXPECT_GT(m.at("tokens_per_s").get<double>(), 0.0);
  }
}

TEST(EvalReportE2eTest, WritesSummaryPlotsAndEvictionView) {
  if (!HasMatplotlib()) SKIPKV_MISSING_PREREQ("python3-matplotlib (Debian's /usr/bin/python3)");
  const std::string d = SweepDir();
  const CmdResult r = Skipkv("eval report " + d);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string md = ReadAll(d + "/summary.md");
  for (const char* row : {"| fullkv | 0 | 6 |", "| rkv | 40 | 6 |", "| rkv | 56 | 6 |", "| skipkv | 40 | 6 |",
                          "| skipkv | 56 | 6 |"})
    EXPECT_NE(md.find(row), std::string::npos) << row << "\n" << md;
  EXPECT_NE(md.find("## Throughput"), std::string::npos) << md;
  const std::string html = ReadAll(d + "/report.html");
  size_t imgs = 0;
  for (size_t p = html.find("<img class=\"plot\""); p != std::string::npos;
       p = html.find("<img class=\"plot\"", p + 1))
    ++imgs;
  // accuracy, length, sentence ratios (one results file) and throughput
  EXPECT_EQ(imgs, 4u) << html.substr(0, 2000);
  EXPECT_EQ(html.find("class=\"note\""), std::string::npos) << "a plot without data";
  for (const char* png : {"accuracy_0.png", "length_0.png", "sentences_0.png", "throughput.png"})
    EXPECT_TRUE(std::filesystem::exists(d + "/plots/" + png)) << png;
  EXPECT_TRUE(std::filesystem::exists(d + "/eviction.html"));

  // Bad input is named: a directory without rows, a trace without its run.
  std::filesystem::create_directories(Dir() + "/empty");
  const CmdResult empty = Skipkv("eval report " + Dir() + "/empty");
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_NE(empty.err.find("no result files"), std::string::npos) << empty.err;
  const CmdResult half = Skipkv("eval report " + d + " --out " + Dir() + "/half --trace " + d +
                                "/eviction_trace.jsonl --trace-run " + Dir() + "/six.jsonl --no-html");
  EXPECT_EQ(half.exit_code, 1);
  EXPECT_NE(half.err.find("no result line with \"index\": 0"), std::string::npos) << half.err;
}

// Headless Chromium: the DOM after load and a screenshot of each page.
TEST(EvalReportE2eTest, BothPagesRenderInHeadlessChromium) {
  if (!HasMatplotlib()) SKIPKV_MISSING_PREREQ("python3-matplotlib (Debian's /usr/bin/python3)");
  if (!HasChromium()) SKIPKV_MISSING_PREREQ("chromium (Debian's headless browser)");
  const std::string d = SweepDir();
  if (!std::filesystem::exists(d + "/report.html")) {
    ASSERT_EQ(Skipkv("eval report " + d).exit_code, 0);
  }
  const std::string chromium = "chromium --headless --no-sandbox --disable-gpu --hide-scrollbars ";

  const CmdResult dom = Shell(chromium + "--dump-dom file://" + d + "/report.html");
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  size_t loaded = 0;
  for (size_t p = dom.out.find("data-loaded=\"1\""); p != std::string::npos;
       p = dom.out.find("data-loaded=\"1\"", p + 1))
    ++loaded;
  EXPECT_EQ(loaded, 4u) << "every plot <img> must have loaded";

  const CmdResult ev = Shell(chromium + "--dump-dom file://" + d + "/eviction.html");
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  size_t compressions = 0;
  std::istringstream trace(ReadAll(d + "/eviction_trace.jsonl"));
  for (std::string line; std::getline(trace, line);) {
    const auto t = nlohmann::json::parse(line);
    compressions += t.at("seq") == 0 && t.at("layer") == 0;
  }
  ASSERT_GT(compressions, 2u);
  EXPECT_NE(ev.out.find("type=\"range\" id=\"slider\""), std::string::npos);
  EXPECT_NE(ev.out.find("max=\"" + std::to_string(compressions - 1) + "\""), std::string::npos)
      << "one slider position per compression";
  EXPECT_NE(ev.out.find("data-shown=\"0\""), std::string::npos) << "the view's script ran";
  EXPECT_NE(ev.out.find("class=\"tok kept\""), std::string::npos);
  EXPECT_NE(ev.out.find("class=\"tok evicted-now\""), std::string::npos);

  // Screenshots: not blank (pixel spread read back with matplotlib).
  for (const char* page : {"report", "eviction"}) {
    const std::string png = Dir() + "/" + page + ".png";
    const CmdResult shot = Shell(chromium + "--window-size=1000,1400 --screenshot=" + png + " file://" + d +
                                 "/" + page + ".html");
    ASSERT_EQ(shot.exit_code, 0) << shot.err;
    const CmdResult stat = Shell(
        "/usr/bin/python3 -c \"import matplotlib.image as m; a = m.imread('" + png +
        "'); print(a.shape[0], a.shape[1], float(a[..., :3].std()), float((a[..., :3] < 0.9).mean()))\"");
    ASSERT_EQ(stat.exit_code, 0) << stat.err;
    int h = 0, w = 0;
    double spread = 0, ink = 0;
    std::istringstream(stat.out) >> h >> w >> spread >> ink;
    EXPECT_EQ(w, 1000) << page;
    EXPECT_GT(spread, 0.05) << page << ": blank screenshot";
    EXPECT_GT(ink, 0.01) << page << ": almost nothing drawn";
  }
}

TEST(EvalFidelityE2eTest, FullKvAgreesAndASmallBudgetDoesNot) {
  const CmdResult r = Skipkv(
      "eval fidelity --text " + std::string(SKIPKV_DATA_DIR) +
      "/text/fidelity_story.txt --max-tokens 256 --methods fullkv,rkv --budgets 32,4096 --set window=4 "
      "--set interval=16 -t 2 -o " +
      Dir() + "/fidelity.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<nlohmann::json> rows;
  std::istringstream ss(r.out);
  for (std::string line; std::getline(ss, line);) rows.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].at("top1_agreement").get<double>(), 100.0);
  EXPECT_EQ(rows[1].at("budget"), 32);
  EXPECT_LT(rows[1].at("top1_agreement").get<double>(), 100.0);
  EXPECT_EQ(rows[2].at("budget"), 4096);
  EXPECT_EQ(rows[2].at("top1_agreement").get<double>(), 100.0);
  EXPECT_NE(r.err.find("top-1 %"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(ReadAll(Dir() + "/fidelity.json")).at("rows").size(), 3u);
  const CmdResult missing = Skipkv("eval fidelity --methods rkv --budgets 32");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("--text is required"), std::string::npos) << missing.err;
}

}  // namespace
