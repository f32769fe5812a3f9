// `skipkv steer-extract` end to end on a random tiny qwen2 model with the real
// Qwen byte-level BPE vocabulary: the written vectors equal (1e-5) the means
// this test computes itself from the forward pass's hidden states (its own
// segmentation and keyword classification of docs/spec.md §4.1), a stopped or killed
// run resumes to the same files, and the generation stage appends one line
// per problem and continues where it stopped.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "io/make_model.h"
#include "io/model_source.h"
#include "model/forward.h"
#include "model/model.h"
#include "steer/steering_vector.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace skipkv {
namespace {

namespace fs = std::filesystem;
const std::string kBinary = std::string(SKIPKV_BINARY_DIR) + "/apps/skipkv/skipkv";
const std::string kQwenTok = std::string(SKIPKV_DEPS_DIR) + "/npm/tokenizer-qwen3/models/tokenizer.json";
constexpr int kLayers = 4;

// Per process: ctest runs the tests of this file in parallel processes.
std::string Tmp(const std::string& name) {
  return ::testing::TempDir() + "/steer_extract_" + std::to_string(::getpid()) + "_" + name;
}

// Runs `cmd` (stdout to /dev/null unless `out` names a file); stderr into *err.
int Shell(const std::string& cmd, std::string* err = nullptr, const std::string& out = "/dev/null") {
  const std::string err_path = Tmp("stderr.txt");
  const int status = std::system((cmd + " >" + out + " 2>" + err_path).c_str());
  if (err) {
    std::ifstream in(err_path);
    std::stringstream ss;
    ss << in.rdbuf();
    *err = ss.str();
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const std::string& ModelPath() {
  static const std::string path = [] {
    MakeModelOptions o;
    o.preset = "tiny-qwen2";
    o.shape = *LookupModelPreset("tiny-qwen2");
    o.shape.hidden = 32;
    o.shape.heads = 2;
    o.shape.kv_heads = 1;
    o.shape.ffn = 48;
    o.shape.layers = kLayers;
    o.type = *ParseWeightType("f32");
    o.seed = 7;
    o.tokenizer_path = kQwenTok;
    o.output_path = Tmp("model.gguf");
    const Status st = MakeRandomModel(o);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return o.output_path;
  }();
  return path;
}

struct Loaded {
  std::unique_ptr<ModelSource> src;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
};

Loaded Load() {
  Loaded l;
  auto src = OpenModel(ModelPath());
  EXPECT_TRUE(src.ok()) << src.status().ToString();
  auto tok = Tokenizer::FromModelSource(**src);
  EXPECT_TRUE(tok.ok());
  l.tok = std::move(tok).value();
  std::shared_ptr<const ModelSource> shared(std::move(src).value());
  auto m = Model::Load(shared);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  l.model = std::move(m).value();
  return l;
}

// Hand-written thoughts: steps of every kind, a "\n\n" before <think> (not a
// step) and after </think> (not a step).
const char* kResponses[][2] = {
    {"Find 2+2.", "Start.\n\n2 + 2 = 4.\n\nWait, let me double-check: yes.\n\nSo it is 4.\n\n</think>\n\n\\boxed{4}"},
    {"Find 3*3.", "Hmm.\n\nAlternatively, add 3 three times.\n\nThat gives 9.\n\nLet me verify it.\n\n</think>\n\n9"},
    {"Find 1-1.", "Zero.\n\nAnother approach: count down.\n\nWait.\n\n</think>\n\nAnswer 0.\n\nDone"},
    {"Find 5/5.", "One.\n\nIt's correct.\n\nHence 1.\n\nThink differenly now.\n\nFinal."},
};

struct Resp {
  std::vector<int32_t> prompt, tokens;
  bool correct;
};

std::vector<Resp> MakeResponses(const Tokenizer& tok, const std::string& path) {
  EncodeOptions eo;
  eo.add_special = false;
  eo.parse_special = true;
  std::vector<Resp> out;
  std::ofstream f(path);
  for (int i = 0; i < 4; ++i) {
    Resp r;
    r.prompt = tok.Encode(std::string("<｜User｜>") + kResponses[i][0] + "\n\nThink.<｜Assistant｜><think>\n", eo);
    r.tokens = tok.Encode(kResponses[i][1], eo);
    r.correct = i % 2 == 0;
    nlohmann::json j = {{"prompt_tokens", r.prompt}, {"tokens", r.tokens}, {"correct", r.correct}};
    f << j.dump() << "\n";
    out.push_back(r);
  }
  return out;
}

// The test's own docs/spec.md §4.1: 0 execution, 1 reflection, 2 transition.
int Classify(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(s.begin());
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* k : {"verify", "make sure", "hold on", "think again", "'s correct", "'s incorrect",
                        "let me check", "seems right"}) {
    if (s.find(k) != std::string::npos) return 1;
  }
  if (s.rfind("wait", 0) == 0) return 1;
  if (s.rfind("alternatively", 0) == 0) return 2;
  for (const char* k : {"think differenly", "another way", "another approach", "another method", "another solution",
                        "another strategy", "another technique"}) {
    if (s.find(k) != std::string::npos) return 2;
  }
  return 0;
}

// Per category: sums [direction][D] of the residual at the input of layer
// direction + 1 (for the last direction: the last layer's output, the
// forward's hook call with layer = n_layers) at every step's SPLIT token, and
// counts.
struct Oracle {
  std::array<std::vector<std::vector<double>>, 3> sum;
  std::array<int, 3> count{};
};

Oracle ComputeOracle(Loaded& l, const std::vector<Resp>& resps) {
  const int D = l.model->config().d_model;
  Oracle o;
  for (auto& s : o.sum) s.assign(kLayers, std::vector<double>(D, 0.0));
  const int32_t think = l.tok->PieceToId("<think>"), end_think = l.tok->PieceToId("</think>");
  ThreadPool pool(1);
  for (const Resp& r : resps) {
    std::vector<int32_t> ids = r.prompt;
    ids.insert(ids.end(), r.tokens.begin(), r.tokens.end());
    size_t b = std::find(ids.begin(), ids.end(), think) - ids.begin() + 1;
    size_t e = std::find(ids.begin() + b, ids.end(), end_think) - ids.begin();
    std::vector<size_t> splits;
    for (size_t i = b; i < e; ++i) {
      if (std::string(l.tok->TokenBytes(ids[i])).find("\n\n") != std::string::npos) splits.push_back(i);
    }
    std::map<size_t, int> kind;
    for (size_t k = 0; k < splits.size(); ++k) {
      const size_t to = k + 1 < splits.size() ? splits[k + 1] : e;
      std::string text;
      for (size_t i = splits[k] + 1; i < to; ++i) text += l.tok->TokenBytes(ids[i]);
      kind[splits[k]] = Classify(text);
      ++o.count[kind[splits[k]]];
    }
    auto cache = std::make_unique<SequenceKvCache>(l.model->KvShape(KvDType::kF32, 8), ids.size(),
                                                   SequenceKvCache::kUnbounded);
    std::vector<int32_t> pos(ids.size());
    for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(i);
    SequenceInput in;
    in.cache = cache.get();
    in.tokens = ids;
    in.pos = pos;
    ForwardBatch batch;
    batch.seqs = std::span<const SequenceInput>(&in, 1);
    batch.residual_hook = [&](int layer, std::span<const BatchToken> rows, float* hidden) {
      if (layer == 0) return;
      for (size_t t = 0; t < rows.size(); ++t) {
        auto it = kind.find(static_cast<size_t>(rows[t].pos));
        if (it == kind.end()) continue;
        for (int i = 0; i < D; ++i) o.sum[it->second][layer - 1][i] += hidden[t * D + i];
      }
    };
    ForwardPass pass(*l.model);
    auto out = pass.Run(batch, pool);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
  }
  return o;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << what << "[" << i << "]";
  }
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class SteerExtractTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kQwenTok)) GTEST_SKIP() << "run scripts/setup.sh for " << kQwenTok;
  }
  std::string Run(const std::string& out_dir, const std::string& extra, int* rc, const std::string& prefix = "") {
    std::string err;
    *rc = Shell(prefix + kBinary + " steer-extract -m " + ModelPath() + " --responses " + Tmp("responses.jsonl") +
                    " -o " + out_dir + " -n 2 -t 2 --ubatch 4096 " + extra,
                &err);
    return err;
  }
};

TEST_F(SteerExtractTest, VectorEqualsTheMeanOfTheForwardHiddenStates) {
  Loaded l = Load();
  const auto resps = MakeResponses(*l.tok, Tmp("responses.jsonl"));
  const std::string dir = Tmp("full");
  fs::remove_all(dir);
  int rc = 0;
  const std::string err = Run(dir, "", &rc);
  ASSERT_EQ(rc, 0) << err;
  const Oracle o = ComputeOracle(l, resps);
  ASSERT_GT(o.count[0], 0);
  ASSERT_GT(o.count[1], 0);
  ASSERT_GT(o.count[2], 0);
  const char* names[3] = {"execution", "reflection", "transition"};
  for (int k = 0; k < 3; ++k) {
    auto cv = LoadControlVector(dir + "/" + names[k] + "_avg_vector.gguf");
    ASSERT_TRUE(cv.ok()) << cv.status().ToString();
    EXPECT_EQ(cv->num_vectors_averaged, o.count[k]) << names[k];
    EXPECT_EQ(cv->ModelDepth(), kLayers);
    EXPECT_EQ(cv->directions.count(0), 0u);  // llama.cpp layout
    EXPECT_EQ(cv->directions.size(), static_cast<size_t>(kLayers - 1));  // direction.1 .. direction.(n-1)
    for (int l = 1; l < kLayers; ++l) {
      std::vector<double> mean(o.sum[k][l]);
      for (double& x : mean) x /= o.count[k];
      ExpectNear(cv->directions.at(l), mean, std::string(names[k]) + " direction." + std::to_string(l));
    }
  }
  auto v = LoadControlVector(dir + "/steer_vector.gguf");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(ValidateControlVectorForModel(*v, "v", 1, kLayers, 32).ok());
  // The last direction (the last layer's output) is steerable too.
  EXPECT_TRUE(ValidateControlVectorForModel(*v, "v", kLayers - 1, kLayers, 32).ok());
  for (int l = 1; l < kLayers; ++l) {
    std::vector<double> want(32);
    const int no = o.count[1] + o.count[2];
    for (int i = 0; i < 32; ++i) {
      want[i] = o.sum[0][l][i] / o.count[0] - (o.sum[1][l][i] + o.sum[2][l][i]) / no;
    }
    ExpectNear(v->directions.at(l), want, "V direction." + std::to_string(l));
  }
}

TEST_F(SteerExtractTest, StoppedAndKilledRunsResumeToTheSameFiles) {
  Loaded l = Load();
  MakeResponses(*l.tok, Tmp("responses.jsonl"));
  const std::string full = Tmp("ref"), part = Tmp("part"), killed = Tmp("killed");
  for (const auto& d : {full, part, killed}) fs::remove_all(d);
  int rc = 0;
  ASSERT_EQ((Run(full, "", &rc), rc), 0);
  // Stop after 1 and then 2 teacher-forced responses, then finish.
  std::string err = Run(part, "--stop-after 1", &rc);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_NE(err.find("run again to continue"), std::string::npos) << err;
  EXPECT_TRUE(fs::exists(part + "/means.ckpt"));
  EXPECT_FALSE(fs::exists(part + "/steer_vector.gguf"));
  ASSERT_EQ((Run(part, "--stop-after 1", &rc), rc), 0);
  ASSERT_EQ((Run(part, "", &rc), rc), 0);
  // A SIGKILL at an arbitrary moment, then a plain rerun.
  Run(killed, "", &rc, "timeout -s KILL 0.2 ");
  err = Run(killed, "", &rc);
  ASSERT_EQ(rc, 0) << err;
  for (const char* f : {"steer_vector.gguf", "execution_avg_vector.gguf", "reflection_avg_vector.gguf",
                        "transition_avg_vector.gguf"}) {
    const std::string want = Bytes(full + "/" + f);
    ASSERT_FALSE(want.empty()) << f;
    EXPECT_EQ(Bytes(part + "/" + f), want) << f;
    EXPECT_EQ(Bytes(killed + "/" + f), want) << f;
  }
}

TEST_F(SteerExtractTest, GenerationStageAppendsAndContinues) {
  const std::string data = Tmp("problems.jsonl"), dir = Tmp("gen");
  fs::remove_all(dir);
  {
    std::ifstream in(std::string(SKIPKV_DATA_DIR) + "/datasets/math_train_prm800k_first1000.jsonl");
    std::ofstream out(data);
    std::string line;
    for (int i = 0; i < 3 && std::getline(in, line); ++i) out << line << "\n";
  }
  const std::string cmd = kBinary + " steer-extract -m " + ModelPath() + " --dataset " + data + " -o " + dir +
                          " -n 2 -t 2 --batch 1 --max-tokens 8";
  std::string err;
  ASSERT_EQ(Shell(cmd + " --stop-after 1", &err), 0) << err;
  auto lines = [&] {
    std::vector<nlohmann::json> v;
    std::ifstream in(dir + "/generations.jsonl");
    for (std::string s; std::getline(in, s);) v.push_back(nlohmann::json::parse(s));
    return v;
  };
  ASSERT_EQ(lines().size(), 1u);
  Shell(cmd, &err);  // may end without a vector: a random model writes no SPLIT tokens
  const auto all = lines();
  ASSERT_EQ(all.size(), 3u) << err;
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i]["index"].get<size_t>(), i);
    EXPECT_TRUE(all[i]["correct"].is_boolean());
    EXPECT_FALSE(all[i]["prompt_tokens"].empty());
    EXPECT_LE(all[i]["tokens"].size(), 8u);
  }
  EXPECT_NE(err.find("the dataset ran out"), std::string::npos) << err;
}

// `skipkv run` with a steering vector: --method seal steers the last prompt
// position (a "\n\n" token inside the assumed thought) with the fixed
// coefficient and changes the output against --no-steering; --kv-policy
// skipkv reports α = α0 + γ·N_o; options that would be ignored are refused.
TEST_F(SteerExtractTest, RunSteersWithSealAndSkipkv) {
  const std::string vec = Tmp("vec.gguf");
  ControlVector cv;
  cv.width = 32;
  uint64_t x = 12345;
  for (int l = 1; l < kLayers; ++l) {
    std::vector<float> v(32);
    for (float& f : v) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      f = static_cast<float>(static_cast<int64_t>(x >> 40) % 2001 - 1000) / 100.0f;
    }
    cv.directions[l] = v;
  }
  ASSERT_TRUE(WriteControlVector(vec, cv, kLayers).ok());
  const std::string base = kBinary + " run -m " + ModelPath() + " -t 2 --json -q -p 'Think.\n\nStep one.\n\n' ";
  auto run = [&](const std::string& extra, int* rc) {
    const std::string out = Tmp("run.json");
    std::string err;
    *rc = Shell(base + extra, &err, out);
    std::ifstream in(out);
    std::string line;
    std::getline(in, line);
    return std::make_pair(line.empty() ? nlohmann::json() : nlohmann::json::parse(line), err);
  };
  int rc = 0;
  auto [seal, e1] = run("-n 12 --method seal --steer " + vec + " --steer-layer 1 --steer-coef 3", &rc);
  ASSERT_EQ(rc, 0) << e1;
  EXPECT_EQ(seal["method"]["name"], "seal");
  EXPECT_EQ(seal["method"]["policy"], "full");
  EXPECT_GE(seal["diagnostics"]["steer.events"].get<double>(), 1.0);
  EXPECT_EQ(seal["diagnostics"]["steer.alpha"].get<double>(), 3.0);
  auto [plain, e2] = run("-n 12 --method seal --steer " + vec + " --steer-layer 1 --steer-coef 3 --no-steering", &rc);
  ASSERT_EQ(rc, 0) << e2;
  EXPECT_FALSE(plain["diagnostics"].contains("steer.events"));
  EXPECT_NE(seal["tokens"], plain["tokens"]);

  auto [sk, e3] = run("--kv-policy skipkv --kv-budget 16 --kv-window 4 --kv-interval 8 -n 48 --steer " + vec +
                          " --steer-layer 2 --steer-cadence sentence",
                      &rc);
  ASSERT_EQ(rc, 0) << e3;
  const auto& d = sk["diagnostics"];
  ASSERT_TRUE(d.contains("steer.nonexec")) << d.dump();
  EXPECT_NEAR(d["steer.alpha"].get<double>(), 1.0 + 0.02 * d["steer.nonexec"].get<double>(), 1e-6);
  EXPECT_EQ(sk["method"]["steer.mode"], "adaptive");

  // --method skipkv is --kv-policy skipkv: adaptive steering with the vector.
  auto [skp, e5] = run("--method skipkv --kv-budget 16 --kv-window 4 --kv-interval 8 -n 48 --steer " + vec +
                           " --steer-layer 2 --steer-cadence sentence",
                       &rc);
  ASSERT_EQ(rc, 0) << e5;
  EXPECT_EQ(skp["method"]["steer.mode"], "adaptive");
  EXPECT_EQ(skp["tokens"], sk["tokens"]);

  std::string err;
  EXPECT_NE(Shell(base + "--method rkv --steer " + vec + " --steer-layer 1", &err), 0);
  EXPECT_NE(err.find("does not steer"), std::string::npos) << err;
  EXPECT_NE(Shell(base + "--method seal --steer " + vec + " --steer-layer 1 --steer-alpha0 2", &err), 0);
  EXPECT_NE(err.find("--steer-alpha0 applies to"), std::string::npos) << err;
  EXPECT_NE(Shell(base + "--steer " + vec + " --steer-gamma 0.1", &err), 0);
  EXPECT_NE(err.find("--steer-gamma"), std::string::npos) << err;
  EXPECT_NE(Shell(base + "--steer-layer 1", &err), 0);
  EXPECT_NE(err.find("needs --steer FILE"), std::string::npos) << err;
  EXPECT_NE(Shell(base + "--method seal --steer " + vec + " --steer-layer 4", &err), 0);
  EXPECT_NE(err.find("[0, 3]"), std::string::npos) << err;
  // The last direction (the last layer's output, before the final norm) steers too.
  auto [last, e4] = run("-n 12 --method seal --steer " + vec + " --steer-layer 3 --steer-coef 3", &rc);
  ASSERT_EQ(rc, 0) << e4;
  EXPECT_GE(last["diagnostics"]["steer.events"].get<double>(), 1.0);
  EXPECT_EQ(last["diagnostics"]["steer.layer"].get<double>(), 3.0);
  EXPECT_NE(last["tokens"], plain["tokens"]);
  EXPECT_NE(Shell(base + "--method seal --steer " + std::string(SKIPKV_DATA_DIR) + "/steering", &err), 0);
  EXPECT_NE(err.find("width 1536"), std::string::npos) << err;

  // --method skipkv-authors without a dataset: no row of the authors' τ table, and run says so
  // (not under -q); a τ given on the command line needs no note.
  const std::string loud = kBinary + " run -m " + ModelPath() + " -t 2 --json -p 'Think.\n\n' -n 4 " +
                           "--method skipkv-authors --kv-budget 16 --kv-window 4 --kv-interval 8";
  ASSERT_EQ(Shell(loud, &err, Tmp("authors.json")), 0) << err;
  EXPECT_NE(err.find("no row of the authors' τ table"), std::string::npos) << err;
  ASSERT_EQ(Shell(loud + " --sim-threshold 0.9", &err, Tmp("authors.json")), 0) << err;
  EXPECT_EQ(err.find("no row of the authors"), std::string::npos) << err;
}

// Removes this process's files (the model is ~20 MB) after the tests.
class CleanUp : public ::testing::Environment {
 public:
  void TearDown() override {
    const std::string prefix = "steer_extract_" + std::to_string(::getpid()) + "_";
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(::testing::TempDir(), ec)) {
      if (e.path().filename().string().rfind(prefix, 0) == 0) fs::remove_all(e.path(), ec);
    }
  }
};
const auto* const kCleanUp = ::testing::AddGlobalTestEnvironment(new CleanUp);

}  // namespace
}  // namespace skipkv
