// Issue 43: every reader of outside JSON refuses nesting deeper than
// kMaxJsonDepth before building a document, with an error naming the file
// and line (or, for an HTTP body, the top-level field). 200,000 levels of
// '[' in a 400 KB request once overflowed the server's stack; the same depth
// here must come back as a Status, at 10^6 levels too. Each reader also
// accepts the same input at the limit, so the check is where the refusal is.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "eval/dataset.h"
#include "eval/jsonl.h"
#include "io/hf_checkpoint.h"
#include "io/hf_vocab.h"
#include "io/safetensors.h"
#include "serve/api_request.h"
#include "tokenizer/tokenizer.h"
#include "util/json_depth.h"

namespace skipkv {
namespace {
namespace fs = std::filesystem;

std::string Deep(int levels) { return std::string(levels, '[') + std::string(levels, ']'); }

void ExpectDeep(const Status& st, const std::string& where) {
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(where + ": JSON nested deeper than 512 levels"), std::string::npos)
      << "want '" << where << "' in: " << st.message();
}

fs::path TmpDir(const std::string& name) {
  const fs::path d =
      fs::path(::testing::TempDir()) / ("skipkv_deep_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void Write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

TEST(DeepJson, HttpBodyIs400NamingTheField) {
  using namespace serve;
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  struct Case {
    std::string body, param;
  };
  for (int levels : {200000, 1000000}) {
    const std::string d = Deep(levels);
    const Case cases[] = {{R"({"messages":)" + d + "}", "messages"},
                          {R"({"messages":[{"role":"user","content":)" + d + "}]}", "messages"},
                          {"{" + msgs + R"(,"stop":)" + d + "}", "stop"},
                          {"{" + msgs + R"(,"kv":{"policy":"rkv","budget":)" + d + "}}", "kv"},
                          {"[" + d + "]", ""}};
    for (const Case& c : cases) {
      const ParseOutcome o = ParseRequest(c.body, Endpoint::kChat, 64u << 20);
      ASSERT_FALSE(o.ok()) << c.param;
      EXPECT_EQ(o.error.http_status, 400);
      EXPECT_EQ(o.error.param, c.param);
      EXPECT_NE(o.error.message.find("deeper than 512 levels"), std::string::npos) << o.error.message;
    }
  }
  // At the limit the body parses (and is refused, if at all, for its content).
  const ParseOutcome at = ParseRequest("{" + msgs + R"(,"user":)" + Deep(511) + "}", Endpoint::kChat);
  EXPECT_TRUE(at.ok() || at.error.message.find("deeper") == std::string::npos) << at.error.message;
}

TEST(DeepJson, TokenizerJsonAndConfigNameFileAndLine) {
  const std::string tok = "{\n\"model\": {\"type\": \"BPE\", \"vocab\": " + Deep(200000) + "}}";
  ExpectDeep(Tokenizer::FromHfJson(tok, "", "models/tokenizer.json").status(), "models/tokenizer.json:2");
  ExpectDeep(Tokenizer::FromHfJson(R"({"model":{}})", "\n\n" + Deep(1000000), "t.json").status(),
             "tokenizer_config.json:3");
  const fs::path dir = TmpDir("tok");
  Write(dir / "tokenizer.json", tok);
  Write(dir / "tokenizer_config.json", Deep(600));
  ExpectDeep(Tokenizer::FromHfJsonFile((dir / "tokenizer.json").string()).status(),
             (dir / "tokenizer.json").string() + ":2");
  ExpectDeep(
      Tokenizer::FromHfJsonFile((dir / "tokenizer.json").string(), (dir / "tokenizer_config.json").string())
          .status(),
      (dir / "tokenizer_config.json").string() + ":1");
  // convert's reader of the same file.
  GgufMetadata md;
  ExpectDeep(AddGpt2TokenizerMetadataFromJson(tok, "dir/tokenizer.json", {}, &md), "dir/tokenizer.json:2");
  // At the limit: parsed, and refused for its content instead.
  const Status at = Tokenizer::FromHfJson("{\"model\": {\"type\": \"BPE\", \"vocab\": " + Deep(510) + "}}",
                                          "", "models/tokenizer.json")
                        .status();
  EXPECT_FALSE(at.ok());
  EXPECT_EQ(at.message().find("deeper"), std::string::npos) << at.message();
}

TEST(DeepJson, CheckpointConfigIndexAndSafetensorsHeader) {
  const fs::path dir = TmpDir("hf");
  Write(dir / "config.json", "{\"architectures\": " + Deep(200000) + "}");
  ExpectDeep(OpenHfCheckpoint(dir.string()).status(), (dir / "config.json").string() + ":1");
  // The safetensors header: 8-byte length, then the JSON.
  const std::string header = "{\"__metadata__\": " + Deep(200000) + "}";
  std::string file(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  file += header;
  ExpectDeep(
      ParseSafetensorsHeader(reinterpret_cast<const uint8_t*>(file.data()), file.size(), "m.safetensors")
          .status(),
      "m.safetensors (JSON header):1");
}

TEST(DeepJson, JsonlLinesAndDatasetsNameTheLine) {
  const fs::path dir = TmpDir("jsonl");
  const std::string good = R"({"question":"1+1?","answer":"2","prediction":"2","reference":"2"})";
  Write(dir / "grade.jsonl", good + "\n" + good + "\n{\"prediction\": " + Deep(200000) + "}\n");
  ExpectDeep(eval::ReadJsonl((dir / "grade.jsonl").string()).status(), (dir / "grade.jsonl").string() + ":3");
  // Not a torn tail to drop, even when the last line is unterminated.
  Write(dir / "results.jsonl", good + "\n" + Deep(1000000));
  ExpectDeep(eval::ReadJsonl((dir / "results.jsonl").string(), {.tolerate_torn_tail = true}).status(),
             (dir / "results.jsonl").string() + ":2");
  eval::DatasetSpec spec;
  spec.name = "deep";
  spec.path = (dir / "grade.jsonl").string();
  spec.question_field = "question";
  spec.answer_field = "answer";
  ExpectDeep(eval::LoadDataset(spec, /*skip_bad=*/false).status(), spec.path + ":3");
  // With skip_bad the line is skipped and named; the good rows load.
  auto loaded = eval::LoadDataset(spec, /*skip_bad=*/true);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->problems.size(), 2u);
  ASSERT_EQ(loaded->skipped.size(), 1u);
  EXPECT_NE(loaded->skipped[0].find(spec.path + ":3: JSON nested deeper"), std::string::npos)
      << loaded->skipped[0];
}

}  // namespace
}  // namespace skipkv
