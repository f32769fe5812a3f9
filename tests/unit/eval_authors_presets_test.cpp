// The SkipKV authors' presets (issue 38 item 3; src/eval/presets.h):
// fullkv-authors, rkv-authors and skipkv-authors carry the settings of the
// authors' code, τ and the steering strength come from their scripts/run.sh
// table per (model, dataset, B), --set still wins, every setting is a switch
// of its own, and the provenance (PresetJson) shows them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "skipkv/presets.h"

namespace skipkv::eval {
namespace {

TEST(EvalAuthorsPresetsTest, TableLookup) {
  const AuthorsRun* r = FindAuthorsRun("/models/DeepSeek-R1-Distill-Qwen-7B-Q8_0.gguf", "aime24", 1536);
  ASSERT_NE(r, nullptr);
  EXPECT_FLOAT_EQ(r->tau, 0.98f);
  EXPECT_FLOAT_EQ(r->coef, -1.25f);
  EXPECT_EQ(r->layer, 20);
  r = FindAuthorsRun("deepseek-r1-distill-qwen-14b", "math500", 1024);  // math500 is their "math"
  ASSERT_NE(r, nullptr);
  EXPECT_FLOAT_EQ(r->tau, 0.97f);
  EXPECT_FLOAT_EQ(r->coef, -1.0f);
  EXPECT_EQ(r->layer, 35);
  EXPECT_EQ(FindAuthorsRun("DeepSeek-R1-Distill-Qwen-7B", "aime24", 1000), nullptr);  // no such budget
  EXPECT_EQ(FindAuthorsRun(":testbed:", "testbed", 1536), nullptr);
  EXPECT_GE(AuthorsRuns().size(), 29u);
  for (const AuthorsRun& run : AuthorsRuns()) {
    EXPECT_GE(run.tau, 0.95f) << run.model;
    EXPECT_LE(run.tau, 0.99f) << run.model;
  }
}

TEST(EvalAuthorsPresetsTest, SkipkvAuthorsCarriesTheAuthorsSettings) {
  auto p = MakePreset("skipkv-authors", 1536, {}, {}, {"DeepSeek-R1-Distill-Qwen-7B", "aime24"});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const SkipkvConfig& s = p->method.kv.skipkv;
  EXPECT_EQ(p->method.kv.policy, "skipkv");
  EXPECT_TRUE(p->grouping);
  EXPECT_FLOAT_EQ(s.sim_threshold, 0.98f);
  EXPECT_TRUE(s.pss_include_prompt);
  EXPECT_EQ(s.min_sentence_tokens, 1);
  EXPECT_EQ(s.range_min_slots, 2);
  EXPECT_TRUE(s.lambda_last);
  EXPECT_TRUE(p->method.kv.pad_mask_seen_tokens);
  EXPECT_EQ(s.nonexec_keywords, (std::vector<std::string>{"Alternatively", "Wait", "again"}));
  EXPECT_EQ(s.delimiters, (std::vector<std::string>{"\n", ".\n", ")\n", "\n\n", ".\n\n", ")\n\n", "?\n\n"}));
  EXPECT_EQ(p->authors_run, "DeepSeek-R1-Distill-Qwen-7B/aime24/1536");
  EXPECT_FALSE(p->method.steer.enabled);  // no vector given: no steering

  const nlohmann::json j = nlohmann::json::parse(PresetJson(*p));
  EXPECT_EQ(j.at("preset"), "skipkv-authors");
  EXPECT_EQ(j.at("grouping"), true);
  EXPECT_EQ(j.at("skipkv.sim_threshold").dump(), "0.98");
  EXPECT_EQ(j.at("skipkv.pss_include_prompt"), true);
  EXPECT_EQ(j.at("skipkv.nonexec_keywords"), nlohmann::json({"Alternatively", "Wait", "again"}));
  EXPECT_EQ(j.at("skipkv.range_min_slots"), 2);
  EXPECT_EQ(j.at("skipkv.pss_lambda_last"), true);
  EXPECT_EQ(j.at("pad_mask_seen_tokens"), true);
  EXPECT_EQ(j.at("authors_run"), "DeepSeek-R1-Distill-Qwen-7B/aime24/1536");
}

TEST(EvalAuthorsPresetsTest, TauDefaultsToTheirsAndSetWins) {
  auto p = MakePreset("skipkv-authors", 1000, {});
  ASSERT_TRUE(p.ok());
  EXPECT_FLOAT_EQ(p->method.kv.skipkv.sim_threshold, 0.95f);
  EXPECT_TRUE(p->authors_run.empty());
  EXPECT_FALSE(nlohmann::json::parse(PresetJson(*p)).contains("authors_run"));
  auto q = MakePreset("skipkv-authors", 1536, {"skipkv-authors.sim_threshold=0.9", "range_min_slots=1"}, {},
                      {"DeepSeek-R1-Distill-Qwen-7B", "aime24"});
  ASSERT_TRUE(q.ok());
  EXPECT_FLOAT_EQ(q->method.kv.skipkv.sim_threshold, 0.9f);
  EXPECT_EQ(q->method.kv.skipkv.range_min_slots, 1);
}

TEST(EvalAuthorsPresetsTest, SteeringStrengthFromTheTable) {
  SteeringConfig v;
  v.enabled = true;
  v.file = "/some/vector.gguf";
  v.layer = 19;
  auto p = MakePreset("skipkv-authors", 1024, {}, v, {"DeepSeek-R1-Distill-Qwen-14B", "math500"});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->method.steer.enabled);
  EXPECT_TRUE(p->method.steer.adaptive);
  EXPECT_FLOAT_EQ(p->method.steer.alpha0, 1.0f);  // coef -1 on H_O - H_E = +1 on H_E - H_O
  EXPECT_FLOAT_EQ(p->method.steer.gamma, 0.02f);
  auto q = MakePreset("skipkv-authors", 999, {}, v);
  ASSERT_TRUE(q.ok());
  EXPECT_FLOAT_EQ(q->method.steer.alpha0, 1.25f);
}

TEST(EvalAuthorsPresetsTest, BaselinesGroupAndUseTheAuthorsPadMask) {
  auto r = MakePreset("rkv-authors", 512, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->method.kv.policy, "rkv");
  EXPECT_TRUE(r->grouping);
  EXPECT_TRUE(r->method.kv.pad_mask_seen_tokens);
  EXPECT_EQ(nlohmann::json::parse(PresetJson(*r)).at("grouping"), true);
  auto f = MakePreset("fullkv-authors", 0, {});
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->full());
  EXPECT_TRUE(f->grouping);
  // The plain presets keep the project's defaults.
  auto plain = MakePreset("rkv", 512, {});
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->grouping);
  EXPECT_FALSE(plain->method.kv.pad_mask_seen_tokens);
  EXPECT_FALSE(nlohmann::json::parse(PresetJson(*plain)).contains("pad_mask_seen_tokens"));
}

// Each parity setting is a switch of its own on the ordinary presets.
TEST(EvalAuthorsPresetsTest, EverySwitchStandsAlone) {
  auto p = MakePreset("rkv+sentence", 512,
                      {"range_min_slots=2", "pss_lambda_last=true", "pad_mask_seen_tokens=true",
                       "nonexec_keywords=Wait", "sentence_delimiters=\\n,?\\n\\n", "pss_include_prompt=true"});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->method.kv.skipkv.range_min_slots, 2);
  EXPECT_TRUE(p->method.kv.skipkv.lambda_last);
  EXPECT_TRUE(p->method.kv.pad_mask_seen_tokens);
  EXPECT_EQ(p->method.kv.skipkv.nonexec_keywords, std::vector<std::string>{"Wait"});
  EXPECT_EQ(p->method.kv.skipkv.delimiters, (std::vector<std::string>{"\n", "?\n\n"}));
  auto bad = MakePreset("rkv+sentence", 512, {"range_min_slots=0"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("range_min_slots (0)"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace skipkv::eval
