// End-to-end: `skipkv calibrate` on the embedded testbed's validation split (issue 39 item 1),
// reduced to 16 problems. The preset file must hold the calibrated presets, their settings must be
// the provenance's values, the provenance must reproduce both rules from its own figures (τ = the
// 5th percentile of the duplicates' PSS rounded down; α0 = the largest grid value within 1 point of
// FullKV, γ = α0 · 0.02), the τ rule recomputed here from the recorded traces (--traces) must give
// the same τ, and the recorded pairs must be the policy's own (its compared / ≥ 0.95 counts, from the
// FullKV rows' diagnostics). eval runs the file's presets with the calibrated values. Test splits and an
// existing rows file are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"

namespace skipkv {
namespace {

const nlohmann::json* FindPreset(const nlohmann::json& file, const std::string& name) {
  for (const auto& p : file.at("presets"))
    if (p.at("name") == name) return &p;
  return nullptr;
}

TEST(CalibrateE2e, TestbedValidationSplitWritesThePresets) {
  const std::string dir = e2e::TestDir("calibrate");
  const std::string out = dir + "/cal.json";
  const std::string traces = dir + "/traces.jsonl";
  const auto r =
      e2e::RunSkipkv(dir, {"calibrate", "--limit", "16", "-t", "1", "--traces", traces, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::printf("%s", r.out.c_str());
  EXPECT_NE(r.out.find("tau = the 5th percentile"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": equal"), std::string::npos) << "recorded PSS pairs differ from the policy's\n"
                                                      << r.out;

  const auto file = nlohmann::json::parse(e2e::ReadAll(out));
  EXPECT_EQ(file.at("format"), "skipkv-presets/1");
  const nlohmann::json* rkv = FindPreset(file, "rkv+sentence-cal");
  const nlohmann::json* skipkv = FindPreset(file, "skipkv-cal");
  ASSERT_NE(rkv, nullptr);
  ASSERT_NE(skipkv, nullptr);
  EXPECT_EQ(rkv->at("base"), "rkv+sentence");
  EXPECT_EQ(skipkv->at("base"), "skipkv");

  const auto& prov = skipkv->at("provenance");
  EXPECT_EQ(prov.at("split"), "validation");
  EXPECT_EQ(prov.at("dataset"), "testbed-val");
  EXPECT_EQ(prov.at("problems"), 16);
  EXPECT_NE(prov.at("command").get<std::string>().find("calibrate --limit 16"), std::string::npos);
  EXPECT_EQ(prov.at("paper").at("sim_threshold"), 0.95);

  // τ: the rule from its own figures, and the preset's setting.
  const auto& tau = prov.at("tau");
  const double t = tau.at("value");
  ASSERT_GT(tau.at("duplicate").at("pairs").get<int64_t>(), 0);
  EXPECT_GT(t, 0.0);
  EXPECT_LE(t, 1.0);
  EXPECT_NEAR(tau.at("exact_percentile").get<double>(), tau.at("duplicate").at("p5").get<double>(), 1e-9);
  EXPECT_DOUBLE_EQ(t, std::floor(tau.at("exact_percentile").get<double>() * 1000 + 1e-3) / 1000);
  // The interpolated 5th percentile flags 95 % of the duplicates, less at most one pair's share
  // (the interpolation point lies between two ranks) and the 4-digit rounding of the figure.
  const double n_dup = tau.at("duplicate").at("pairs").get<double>();
  EXPECT_GE(tau.at("duplicate_recall").get<double>(), 0.95 - 1.0 / n_dup - 1e-4);
  char setting[32];
  std::snprintf(setting, sizeof setting, "sim_threshold=%.3f", t);
  EXPECT_EQ(rkv->at("settings"), nlohmann::json::array({setting}));
  // The rule recomputed here from the recorded traces: every pair of one trace (16 traces hold far fewer
  // than K = 1024 sentences), duplicates = identical ids, same kind = same first id; the 5th percentile
  // by linear interpolation, rounded down to 0.001.
  std::vector<double> dup;
  int64_t same_kind = 0, lines = 0;
  std::istringstream tin(e2e::ReadAll(traces));
  for (std::string line; std::getline(tin, line); ++lines) {
    const auto sent = nlohmann::json::parse(line).at("sentences");
    for (size_t j = 0; j < sent.size(); ++j) {
      for (size_t i = 0; i < j; ++i) {
        const auto ti = sent[i].at("tokens").get<std::vector<int>>(),
                   tj = sent[j].at("tokens").get<std::vector<int>>();
        if (ti != tj) {
          same_kind += ti.front() == tj.front();
          continue;
        }
        const auto ei = sent[i].at("embedding").get<std::vector<float>>();
        const auto ej = sent[j].at("embedding").get<std::vector<float>>();
        double d = 0;
        for (size_t k = 0; k < ei.size(); ++k) d += static_cast<double>(ei[k]) * ej[k];
        dup.push_back(static_cast<float>(d));
      }
    }
  }
  EXPECT_EQ(lines, 16);
  ASSERT_EQ(static_cast<int64_t>(dup.size()), tau.at("duplicate").at("pairs").get<int64_t>());
  EXPECT_EQ(same_kind, tau.at("same_kind").at("pairs").get<int64_t>());
  std::sort(dup.begin(), dup.end());
  const double h = (dup.size() - 1) * 0.05;
  const size_t lo = static_cast<size_t>(h);
  const double p5 = dup[lo] + (h - lo) * (dup[lo + 1] - dup[lo]);
  EXPECT_NEAR(p5, tau.at("exact_percentile").get<double>(), 1e-4);
  EXPECT_DOUBLE_EQ(std::floor(p5 * 1000 + 1e-3) / 1000, t);

  // The recorder saw the policy's pairs.
  EXPECT_EQ(tau.at("policy_check").at("compared_pairs"), tau.at("compared_pairs"));
  EXPECT_EQ(tau.at("policy_check").at("pairs_pss_ge_0.95"), tau.at("pairs_pss_ge_0.95"));

  // α0: SEAL over the grid with the testbed's vector.
  const auto& alpha = prov.at("alpha0");
  const double full = prov.at("fullkv").at("accuracy");
  EXPECT_EQ(prov.at("fullkv").at("n"), 16);
  ASSERT_EQ(alpha.at("grid").size(), 4u);
  double best = -1;
  for (const auto& g : alpha.at("grid")) {
    EXPECT_EQ(g.at("n"), 16);
    if (g.at("accuracy").get<double>() >= full - 1.0) best = std::max(best, g.at("alpha0").get<double>());
  }
  ASSERT_GT(best, 0) << "some grid value stays within 1 point of FullKV on the testbed";
  EXPECT_DOUBLE_EQ(alpha.at("value").get<double>(), best);
  EXPECT_NEAR(alpha.at("gamma").get<double>(), best * 0.02, 1e-9);
  const auto& s = skipkv->at("settings");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0], setting);
  EXPECT_EQ(s[1].get<std::string>().rfind("steer_alpha0=", 0), 0u);
  EXPECT_DOUBLE_EQ(std::stod(s[1].get<std::string>().substr(13)), best);
  EXPECT_NEAR(std::stod(s[2].get<std::string>().substr(12)), best * 0.02, 1e-9);
  ASSERT_NE(FindPreset(file, "seal-cal"), nullptr);
  ASSERT_NE(FindPreset(file, "rkv+sentence+steering-cal"), nullptr);

  // The rows: FullKV and the four SEAL strengths, 16 problems each.
  std::map<std::string, int> rows;
  std::istringstream in(e2e::ReadAll(dir + "/cal.rows.jsonl"));
  for (std::string line; std::getline(in, line);) ++rows[nlohmann::json::parse(line).at("method")];
  EXPECT_EQ(rows["fullkv"], 16);
  EXPECT_EQ(rows["seal-a0p25"], 16);
  EXPECT_EQ(rows.size(), 5u);

  // eval reads the file: the rows run with the calibrated values.
  const std::string eval_rows = dir + "/eval.jsonl";
  const auto ev = e2e::RunSkipkv(dir, {"eval",
                                       "-m",
                                       ":testbed:",
                                       "--presets",
                                       out,
                                       "--methods",
                                       "rkv+sentence-cal,skipkv-cal",
                                       "--budgets",
                                       "300",
                                       "--dataset",
                                       "testbed-val",
                                       "--limit",
                                       "2",
                                       "--steer",
                                       std::string(SKIPKV_DATA_DIR) + "/models/testbed/steer_vector.gguf",
                                       "--steer-layer",
                                       "2",
                                       "-t",
                                       "1",
                                       "-q",
                                       "-o",
                                       eval_rows});
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  std::istringstream erows(e2e::ReadAll(eval_rows));
  int n_eval = 0;
  for (std::string line; std::getline(erows, line); ++n_eval) {
    const auto mc = nlohmann::json::parse(line).at("method_config");
    EXPECT_EQ(mc.at("preset_file"), out);
    EXPECT_NEAR(mc.at("skipkv.sim_threshold").get<double>(), t, 1e-6);
    if (mc.at("preset") == "skipkv-cal") {
      EXPECT_NEAR(mc.at("steer.alpha0").get<double>(), best, 1e-6);
      EXPECT_NEAR(mc.at("steer.gamma").get<double>(), best * 0.02, 1e-6);
    }
  }
  EXPECT_EQ(n_eval, 4);

  // A second run into the same rows file is refused (its traces would be resumed, not recorded).
  const auto again = e2e::RunSkipkv(dir, {"calibrate", "--limit", "2", "-t", "1", "-o", out});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("cal.rows.jsonl exists"), std::string::npos) << again.err;
}

TEST(CalibrateE2e, RefusesTestSplits) {
  const std::string dir = e2e::TestDir("calibrate_test_split");
  auto r = e2e::RunSkipkv(dir, {"calibrate", "--dataset", "testbed", "--limit", "2", "-o", dir + "/a.json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("validation split"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--allow-test-split"), std::string::npos) << r.err;
  r = e2e::RunSkipkv(dir, {"calibrate", "--dataset", "testbed2", "--model",
                           std::string(SKIPKV_DATA_DIR) + "/models/testbed-v2/testbed.gguf", "--limit", "2",
                           "-o", dir + "/a2.json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("a benchmark the results are reported on"), std::string::npos) << r.err;
  // A file with "test" as a word of its name.
  const std::string copy = dir + "/my_test.jsonl";
  std::ofstream(copy) << e2e::ReadAll(std::string(SKIPKV_DATA_DIR) + "/datasets/testbed_val.jsonl");
  r = e2e::RunSkipkv(dir, {"calibrate", "--dataset", copy, "--question-field", "prompt", "--limit", "2", "-o",
                           dir + "/b.json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("named as a test split"), std::string::npos) << r.err;
  // --allow-test-split runs it, with a warning (τ only: --steer none).
  r = e2e::RunSkipkv(dir, {"calibrate",
                           "--dataset",
                           copy,
                           "--question-field",
                           "prompt",
                           "--id-field",
                           "id",
                           "--prompt",
                           "plain",
                           "--max-gen",
                           "1536",
                           "--limit",
                           "4",
                           "-t",
                           "1",
                           "--steer",
                           "none",
                           "--allow-test-split",
                           "-q",
                           "-o",
                           dir + "/c.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("WARNING"), std::string::npos) << r.err;
  const auto file = nlohmann::json::parse(e2e::ReadAll(dir + "/c.json"));
  const nlohmann::json* skipkv = FindPreset(file, "skipkv-cal");
  ASSERT_NE(skipkv, nullptr);
  EXPECT_EQ(skipkv->at("settings").size(), 1u) << "without a vector only tau is calibrated";
  EXPECT_EQ(FindPreset(file, "seal-cal"), nullptr);
}

}  // namespace
}  // namespace skipkv
