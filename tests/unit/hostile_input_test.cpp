// Hostile input (issue 16): each case here once crashed the process or was
// silently misread. Wrongly typed JSON fields become a Status naming the file
// and the field; config.json integers are range-checked as written instead of
// being narrowed to 32 bits; GGUF integer arrays are not narrowed either;
// thread counts and engine sizes have checked ranges with clear messages.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "io/gguf.h"
#include "io/hf_checkpoint.h"
#include "io/hf_vocab.h"
#include "io/make_model.h"
#include "skipkv/engine.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace skipkv {
namespace {
using json = nlohmann::json;

// A minimal valid byte-level BPE tokenizer.json.
json TinyTokenizer() {
  return {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}}, {"merges", {"a b"}}}},
          {"added_tokens", {{{"id", 3}, {"content", "<|end|>"}, {"special", true}}}}};
}

Status Gpt2(const json& j) {
  GgufMetadata md;
  return AddGpt2TokenizerMetadataFromJson(j.dump(), "dir/tokenizer.json", Gpt2VocabOptions{}, &md);
}

void ExpectNames(const Status& st, const std::vector<std::string>& parts) {
  EXPECT_FALSE(st.ok());
  for (const auto& p : parts)
    EXPECT_NE(st.message().find(p), std::string::npos) << "'" << p << "' in " << st.message();
}

TEST(HostileTokenizerJson, TinyTokenizerIsAccepted) {
  GgufMetadata md;
  ASSERT_TRUE(AddGpt2TokenizerMetadataFromJson(TinyTokenizer().dump(), "t.json", {}, &md).ok());
  EXPECT_EQ(md.GetStringArray("tokenizer.ggml.tokens")->size(), 4u);
}

// Both used to throw nlohmann::type_error out of convert / make-model (SIGABRT).
TEST(HostileTokenizerJson, WrongTypesNameFileAndField) {
  json j = TinyTokenizer();
  j["model"]["type"] = 5;
  ExpectNames(Gpt2(j), {"dir/tokenizer.json", "model.type", "5"});
  j = TinyTokenizer();
  j["added_tokens"][0]["special"] = "yes";
  ExpectNames(Gpt2(j), {"dir/tokenizer.json", "special", "\"yes\""});
  j = TinyTokenizer();
  j["model"]["vocab"]["a"] = "zero";
  ExpectNames(Gpt2(j), {"dir/tokenizer.json", "'a'"});
}

TEST(HostileTokenizerJson, FileReaderNamesTheFile) {
  const std::string path = ::testing::TempDir() + "/hostile_tokenizer.json";
  json j = TinyTokenizer();
  j["model"]["type"] = json::array();
  std::ofstream(path) << j.dump();
  GgufMetadata md;
  ExpectNames(AddGpt2TokenizerMetadata(path, {}, &md), {path, "model.type"});
  std::filesystem::remove(path);
}

// The tokenizer loader (Tokenizer::FromHfJson) names the file and the field,
// both for the checks it makes and for type errors only the catch sees.
TEST(HostileTokenizerJson, TokenizerLoaderNamesFileAndField) {
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  json good = TinyTokenizer();
  good["pre_tokenizer"] = byte_level;
  good["decoder"] = {{"type", "ByteLevel"}};
  auto ok = Tokenizer::FromHfJson(good.dump(), "", "models/tokenizer.json");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  json j = good;
  j["added_tokens"][0]["special"] = "yes";
  auto t = Tokenizer::FromHfJson(j.dump(), "", "models/tokenizer.json");
  ASSERT_FALSE(t.ok());
  ExpectNames(t.status(), {"models/tokenizer.json", "'special' = \"yes\""});
  j = good;
  j["model"]["ignore_merges"] = "no";
  t = Tokenizer::FromHfJson(j.dump(), "", "models/tokenizer.json");
  ASSERT_FALSE(t.ok());
  ExpectNames(t.status(), {"models/tokenizer.json", "/model/ignore_merges"});
}

json QwenConfig() {
  return {{"architectures", {"Qwen2ForCausalLM"}},
          {"hidden_size", 8},
          {"intermediate_size", 16},
          {"num_hidden_layers", 1},
          {"num_attention_heads", 2},
          {"num_key_value_heads", 1},
          {"max_position_embeddings", 128},
          {"vocab_size", 10},
          {"rope_theta", 1000000.0}};
}

Status Config(const json& c, GgufMetadata* md = nullptr) {
  GgufMetadata local;
  return HfConfigToMetadata(c, "ckpt/config.json", md ? md : &local);
}

// hidden_size 4294967304 = 2^32 + 8 used to be read as 8; 2^40 layers as 0.
TEST(HostileConfigJson, IntegersAreNotNarrowed) {
  GgufMetadata md;
  ASSERT_TRUE(Config(QwenConfig(), &md).ok());
  EXPECT_EQ(*md.GetInt("qwen2.embedding_length"), 8);
  json c = QwenConfig();
  c["hidden_size"] = 4294967304ull;
  Status st = Config(c);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.ToString();
  ExpectNames(st, {"ckpt/config.json", "'hidden_size' = 4294967304", "[1, 1048576]"});
  c = QwenConfig();
  c["num_hidden_layers"] = 1ull << 40;
  ExpectNames(Config(c), {"'num_hidden_layers' = 1099511627776"});
  c = QwenConfig();
  c["vocab_size"] = 18446744073709551615ull;  // would be -1 as int64
  ExpectNames(Config(c), {"'vocab_size' = 18446744073709551615"});
  c = QwenConfig();
  c["max_position_embeddings"] = (1ll << 30) + 1;
  ExpectNames(Config(c), {"'max_position_embeddings' = 1073741825"});
  c = QwenConfig();
  c["head_dim"] = 65537;
  ExpectNames(Config(c), {"'head_dim' = 65537"});
  c = QwenConfig();
  c["num_attention_heads"] = 0;
  ExpectNames(Config(c), {"'num_attention_heads' = 0"});
  c = QwenConfig();
  c["bos_token_id"] = 1ull << 33;  // used to become 0 via get<uint32_t>
  ExpectNames(Config(c), {"'bos_token_id' = 8589934592"});
  c = QwenConfig();
  c["rope_theta"] = 1e39;  // infinity as a float
  ExpectNames(Config(c), {"'rope_theta'", "32-bit float"});
}

TEST(HostileConfigJson, WrongTypesNameTheField) {
  json c = QwenConfig();
  c["hidden_size"] = "8";
  ExpectNames(Config(c), {"ckpt/config.json", "'hidden_size' = \"8\""});
  c = QwenConfig();
  c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", "x"}};
  ExpectNames(Config(c), {"factor"});
}

// GGUF integer arrays (token types) holding a uint64 above INT64_MAX used to
// come back negative.
TEST(HostileGguf, IntArraysAreNotNarrowed) {
  GgufMetadata md;
  md.Set("a", GgufValue::Arr(GgufType::kUint64, {GgufValue::U64(1), GgufValue::U64(~uint64_t{0})}));
  auto v = md.GetIntArray("a");
  ASSERT_FALSE(v.ok());
  ExpectNames(v.status(), {"'a'[1]", "18446744073709551615"});
}

const int kHw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

TEST(ThreadCounts, ZeroMeansAllAndOutOfRangeIsAnError) {
  EXPECT_EQ(*ResolveThreadCount(0, "threads"), kHw);
  EXPECT_EQ(*ResolveThreadCount(1, "threads"), 1);
  EXPECT_EQ(*ResolveThreadCount(MaxThreads(), "threads"), MaxThreads());
  EXPECT_EQ(MaxThreads(), kMaxThreadsPerCore * kHw);
  for (int64_t bad : {int64_t{-2}, int64_t{-1}, int64_t{MaxThreads()} + 1, int64_t{100000}}) {
    auto r = ResolveThreadCount(bad, "--threads");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    ExpectNames(r.status(),
                {"--threads = " + std::to_string(bad), "[1, " + std::to_string(MaxThreads()) + "]"});
  }
}

// -t 100000 used to spend ~20 s spawning threads, then abort; -t -2 meant "all".
TEST(EngineSizes, OutOfRangeOptionsFailBeforeLoading) {
  auto fails = [](EngineOptions o, const std::string& what) {
    o.model_path = "/no/such/model.gguf";  // validation must come first
    Status st = Engine::Create(o).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
  };
  EngineOptions o;
  o.threads = 100000;
  fails(o, "threads = 100000");
  o.threads = -2;
  fails(o, "threads = -2");
  o = {};
  o.n_ubatch = 1 << 20;
  o.n_batch = 1 << 20;
  fails(o, "n_ubatch must be in [1, 65536]");
  o = {};
  o.n_batch = 1 << 21;
  fails(o, "n_batch");
  o = {};
  o.kv.policy = "rkv";
  o.kv.budget = int64_t{1} << 40;
  fails(o, "budget (1099511627776) exceeds");
  o = {};
  o.kv.policy = "rkv";
  o.kv.interval = int64_t{1} << 31;
  fails(o, "interval (2147483648) exceeds");
}

// A huge max_new_tokens used to size the history reserve (and an unbounded
// cache's request) by itself; generation stops at the context anyway.
TEST(EngineSizes, HugeMaxNewTokensStopsAtTheContext) {
  EngineOptions o;
  o.threads = 1;
  o.n_ctx = 24;
  o.kv.policy = "rkv";
  o.kv.budget = int64_t{1} << 29;  // the budget alone would allocate GiBs
  o.kv.window = 4;
  auto e = Engine::Create(o);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  Request r;
  r.prompt = "Once upon a time";
  r.max_new_tokens = 2000000000;
  const std::vector<Request> reqs = {r};
  auto res = (*e)->Generate(reqs);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ((*res)[0].finish, FinishReason::kContext);
}

TEST(MakeModelSizes, ShapeBeyondTheLimitsIsRejected) {
  auto shape = LookupModelPreset("tiny-llama");
  ASSERT_TRUE(shape.ok());
  MakeModelOptions o;
  o.shape = *shape;
  o.shape.layers = 5000;
  o.output_path = ::testing::TempDir() + "/never_written.gguf";
  ExpectNames(MakeRandomModel(o), {"--layers = 5000", "[1, 4096]"});
  o.shape = *shape;
  o.threads = -2;
  ExpectNames(MakeRandomModel(o), {"threads = -2"});
  EXPECT_FALSE(std::filesystem::exists(o.output_path));
}

}  // namespace
}  // namespace skipkv
