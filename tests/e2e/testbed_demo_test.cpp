// End-to-end: `skipkv demo` on the embedded testbed (issue 13), reduced to 16 test problems, with the
// testbed's steering vector (data/models/testbed/steer_vector.gguf, so SEAL runs and skipkv steers) and
// its calibrated presets (data/presets/testbed-calibrated.json: skipkv-cal, seal-cal).
// Asserts that every (method, budget) row is there, that every evicting method's cache stays within
// max(prompt, B + Δt) slots on every row, that FullKV answers (EOS after a \boxed answer) and meets the
// issue's floor of 95 % (15.2 of 16, so 16, less one: a flip of a near-tie on another CPU's kernels is
// allowed), and that it solves at least the number recorded for the committed model in
// data/models/testbed/expected.json, less one. The table is printed for the log.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_runner.h"

namespace skipkv {
namespace {

TEST(TestbedDemo, ReducedDemoMeetsTheInstrumentContract) {
  const std::string dir = e2e::TestDir("testbed_demo");
  const std::string rows_path = dir + "/demo.jsonl";
  const auto r = e2e::RunSkipkv(dir, {"demo", "--limit", "16", "--interval", "32", "-t", "1", "-o", rows_path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::printf("%s", r.out.c_str());
  EXPECT_NE(r.out.find("streaming"), std::string::npos) << "the table lists every method";
  // The calibrated presets (data/presets/testbed-calibrated.json) run beside the paper's values, and the
  // demo says so.
  EXPECT_NE(r.out.find("Calibrated presets from"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("skipkv-cal = skipkv with sim_threshold="), std::string::npos) << r.out;

  std::map<std::string, std::pair<int, int>> acc;  // "method@budget" -> (correct, rows)
  int full_answered = 0;                              // FullKV rows that end at EOS with a \boxed answer
  std::map<std::string, int64_t> smallest;          // method -> smallest budget
  std::istringstream in(e2e::ReadAll(rows_path));
  int n_rows = 0;
  for (std::string line; std::getline(in, line);) {
    const auto row = nlohmann::json::parse(line);
    ++n_rows;
    const std::string method = row.at("method");
    const int64_t budget = row.at("budget");
    const std::string key = method + "@" + std::to_string(budget);
    acc[key].first += row.at("correct").get<bool>() ? 1 : 0;
    acc[key].second += 1;
    if (method == "fullkv") {
      full_answered += row.at("finish") == "eos" && !row.at("extracted").get<std::string>().empty();
      continue;
    }
    if (budget == 0) continue;  // seal, seal-cal: FullKV's cache with steering, no budget
    if (!smallest.count(method) || budget < smallest[method]) smallest[method] = budget;
    const int64_t prompt = row.at("prompt_tokens");
    const int64_t interval = row.at("method_config").at("interval");
    EXPECT_LE(row.at("kv").at("peak_slots").get<int64_t>(), std::max(prompt, budget + interval))
        << key << " problem " << row.at("problem");
  }
  // FullKV, SEAL and seal-cal once + 7 methods x 3 budgets, 16 problems each.
  EXPECT_EQ(n_rows, 16 * (3 + 7 * 3));
  EXPECT_EQ(acc["seal@0"].second, 16) << "SEAL runs with the testbed's steering vector";
  EXPECT_EQ(acc["seal-cal@0"].second, 16) << "the calibrated SEAL runs beside it";
  EXPECT_EQ(smallest.size(), 7u) << "streaming, h2o, snapkv, rkv, rkv+pinned, skipkv and skipkv-cal ran";
  EXPECT_TRUE(smallest.count("rkv+pinned") && smallest.count("skipkv-cal"));
  const auto full = acc["fullkv@0"];
  ASSERT_EQ(full.second, 16);
  std::ifstream ef(std::string(SKIPKV_DATA_DIR) + "/models/testbed/expected.json");
  ASSERT_TRUE(ef.good()) << "data/models/testbed/expected.json is missing";
  const auto expected = nlohmann::json::parse(ef);
  EXPECT_GE(full_answered, expected.at("demo_limit16_fullkv_answered").get<int>() - 1)
      << "FullKV traces must end with a \\boxed answer and EOS, as the committed model's do";
  EXPECT_GE(full.first, expected.at("demo_limit16_fullkv_correct").get<int>() - 1)
      << "FullKV solved fewer of the 16 problems than the committed model does";
  EXPECT_GE(full.first, 15) << "the issue's FullKV floor: 95 % of 16 problems, less one near-tie flip";
}

// With the testbed's vector but no steering method among --methods, the second sweep (the methods)
// has no steering pair of its own; it writes the same results file as the first (FullKV and SEAL),
// so its provenance must still name the vector. This once failed with "written by a run with another
// configuration (field 'run.steer_digests')".
TEST(TestbedDemo, MethodsWithoutSteeringShareTheFileWithSeal) {
  const std::string dir = e2e::TestDir("testbed_demo_nosteer");
  const std::string rows_path = dir + "/demo.jsonl";
  const auto r = e2e::RunSkipkv(dir, {"demo", "--limit", "2", "--methods", "rkv", "--fractions", "0.5", "-t",
                                      "1", "-q", "-o", rows_path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, int> rows;
  std::istringstream in(e2e::ReadAll(rows_path));
  for (std::string line; std::getline(in, line);) ++rows[nlohmann::json::parse(line).at("method")];
  EXPECT_EQ(rows["fullkv"], 2);
  EXPECT_EQ(rows["seal"], 2);
  EXPECT_EQ(rows["rkv"], 2);
}

// --testbed 2 runs testbed v2: its model and test split (testbed2), its own steering vector (SEAL runs)
// and its calibrated presets (data/presets/testbed2-calibrated.json: seal-cal, skipkv-cal), and says so.
TEST(TestbedDemo, TestbedTwoUsesItsOwnModelVectorAndPresets) {
  const std::string dir = e2e::TestDir("testbed_demo_v2");
  const std::string rows_path = dir + "/demo.jsonl";
  const auto r = e2e::RunSkipkv(dir, {"demo", "--testbed", "2", "--limit", "2", "--methods", "skipkv",
                                      "--fractions", "0.5", "-t", "1", "-o", rows_path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("testbed2 problems"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("models/testbed-v2/steer_vector.gguf"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("presets/testbed2-calibrated.json"), std::string::npos) << r.out;
  std::map<std::string, int> rows;
  std::istringstream in(e2e::ReadAll(rows_path));
  for (std::string line; std::getline(in, line);) {
    const auto row = nlohmann::json::parse(line);
    ++rows[row.at("method")];
    EXPECT_EQ(row.at("dataset"), "testbed2");
    EXPECT_NE(row.at("problem").get<std::string>().find("testbed2"), std::string::npos) << row.at("problem");
  }
  for (const char* m : {"fullkv", "seal", "seal-cal", "skipkv", "skipkv-cal"}) EXPECT_EQ(rows[m], 2) << m;

  const auto bad = e2e::RunSkipkv(dir, {"demo", "--testbed", "3", "-q", "-o", dir + "/bad.jsonl"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("--testbed (3) must be 1 or 2"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace skipkv
