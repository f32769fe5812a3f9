// Steering vectors on disk: the real SEAL category files of data/steering/,
// the SkipKV difference vector, the model-shape check and the llama.cpp
// layout of the files skipkv writes. The oracle reads the GGUF bytes with its
// own minimal parser (not skipkv's GGUF reader).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "steer/steering_vector.h"

namespace skipkv {
namespace {

const std::string kDir = std::string(SKIPKV_DATA_DIR) + "/steering";

// Minimal GGUF v3 parser: metadata keys as raw strings for strings, doubles
// for f32/u32/i32, and the f32 tensors by name.
struct RawGguf {
  std::map<std::string, double> nums;
  std::map<std::string, std::string> strs;
  std::map<std::string, std::vector<float>> tensors;
};

RawGguf ReadRaw(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t off = 0;
  auto rd = [&](void* dst, size_t n) {
    EXPECT_LE(off + n, b.size());
    std::memcpy(dst, b.data() + off, n);
    off += n;
  };
  auto u32 = [&] { uint32_t v; rd(&v, 4); return v; };
  auto u64 = [&] { uint64_t v; rd(&v, 8); return v; };
  auto str = [&] { std::string s(u64(), '\0'); rd(s.data(), s.size()); return s; };
  RawGguf g;
  EXPECT_EQ(u32(), 0x46554747u);  // "GGUF"
  EXPECT_EQ(u32(), 3u);
  const uint64_t nt = u64(), nkv = u64();
  for (uint64_t i = 0; i < nkv; ++i) {
    const std::string key = str();
    const uint32_t type = u32();
    if (type == 8) g.strs[key] = str();
    else if (type == 6) { float v; rd(&v, 4); g.nums[key] = v; }
    else if (type == 4) g.nums[key] = u32();
    else if (type == 5) { int32_t v; rd(&v, 4); g.nums[key] = v; }
    else ADD_FAILURE() << "unexpected metadata type " << type << " for " << key;
  }
  struct Info { std::string name; uint64_t ne0, offset; };
  std::vector<Info> infos;
  for (uint64_t i = 0; i < nt; ++i) {
    Info t;
    t.name = str();
    const uint32_t nd = u32();
    EXPECT_EQ(nd, 1u);
    t.ne0 = u64();
    EXPECT_EQ(u32(), 0u);  // f32
    t.offset = u64();
    infos.push_back(t);
  }
  const size_t data = (off + 31) / 32 * 32;
  for (const Info& t : infos) {
    std::vector<float> v(t.ne0);
    std::memcpy(v.data(), b.data() + data + t.offset, t.ne0 * 4);
    g.tensors[t.name] = v;
  }
  return g;
}

TEST(SteerVector, LoadsTheRealSealCategoryFiles) {
  const std::string path = kDir + "/experiment-math-reflection_avg_vector.gguf";
  auto cv = LoadControlVector(path);
  ASSERT_TRUE(cv.ok()) << cv.status().ToString();
  const RawGguf raw = ReadRaw(path);
  EXPECT_EQ(cv->width, 1536);
  EXPECT_EQ(cv->directions.size(), 28u);
  EXPECT_EQ(cv->layer_count, 28);
  EXPECT_EQ(cv->ModelDepth(), 28);  // EasySteer layout: direction.0..27 for 28 layers
  EXPECT_EQ(cv->model_hint, "qwen2");
  EXPECT_EQ(cv->num_vectors_averaged, 7868.0);
  for (const auto& [l, v] : cv->directions) {
    const auto& want = raw.tensors.at("direction." + std::to_string(l));
    ASSERT_EQ(v, want) << "direction." << l;
  }
}

TEST(SteerVector, DifferenceVectorIsExecutionMinusWeightedOthers) {
  auto v = LoadSteeringVector(kDir);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  const RawGguf e = ReadRaw(kDir + "/experiment-math-execution_avg_vector.gguf");
  const RawGguf r = ReadRaw(kDir + "/experiment-math-reflection_avg_vector.gguf");
  const RawGguf t = ReadRaw(kDir + "/experiment-math-transition_avg_vector.gguf");
  EXPECT_EQ(r.nums.at("controlvector.num_vectors_averaged"), 7868.0);
  EXPECT_EQ(t.nums.at("controlvector.num_vectors_averaged"), 2772.0);
  ASSERT_EQ(v->directions.size(), 28u);
  for (int l : {0, 19, 20, 27}) {
    const std::string name = "direction." + std::to_string(l);
    const auto& got = v->directions.at(l);
    for (size_t i = 0; i < got.size(); ++i) {
      const double want =
          e.tensors.at(name)[i] - (7868.0 * r.tensors.at(name)[i] + 2772.0 * t.tensors.at(name)[i]) / 10640.0;
      ASSERT_NEAR(got[i], want, 1e-5 * (1 + std::fabs(want))) << name << "[" << i << "]";
    }
  }
  // Not a degenerate vector: the categories really differ at layer 20.
  double norm = 0;
  for (float x : v->directions.at(20)) norm += double{x} * x;
  EXPECT_GT(norm, 1e-3);
}

TEST(SteerVector, ModelShapeMismatchNamesBothShapes) {
  auto v = LoadSteeringVector(kDir);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(ValidateControlVectorForModel(*v, kDir, 20, 28, 1536).ok());
  Status width = ValidateControlVectorForModel(*v, kDir, 20, 28, 896);
  ASSERT_FALSE(width.ok());
  EXPECT_NE(width.message().find("28 layers (direction.0..27) of width 1536"), std::string::npos) << width.message();
  EXPECT_NE(width.message().find("28 layers of width 896"), std::string::npos) << width.message();
  Status depth = ValidateControlVectorForModel(*v, kDir, 20, 24, 1536);
  ASSERT_FALSE(depth.ok());
  EXPECT_NE(depth.message().find("24 layers of width 1536"), std::string::npos) << depth.message();
  EXPECT_FALSE(ValidateControlVectorForModel(*v, kDir, 20, 32, 1536).ok());
  // direction.27 is the output of the last layer (added after it, before the
  // final norm); 28 is past the model.
  EXPECT_TRUE(ValidateControlVectorForModel(*v, kDir, 27, 28, 1536).ok());
  Status past = ValidateControlVectorForModel(*v, kDir, 28, 28, 1536);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.message().find("[0, 27]"), std::string::npos) << past.message();
  EXPECT_FALSE(ValidateControlVectorForModel(*v, kDir, -1, 28, 1536).ok());
}

TEST(SteerVector, WritesTheLlamaCppLayout) {
  auto v = LoadSteeringVector(kDir);
  ASSERT_TRUE(v.ok());
  v->model_hint = "qwen2";
  const std::string out = ::testing::TempDir() + "/steer_vector_test_out.gguf";
  ASSERT_TRUE(WriteControlVector(out, *v, 28).ok());
  const RawGguf raw = ReadRaw(out);
  EXPECT_EQ(raw.strs.at("general.architecture"), "controlvector");
  EXPECT_EQ(raw.strs.at("controlvector.model_hint"), "qwen2");
  EXPECT_EQ(raw.nums.at("controlvector.layer_count"), 27);  // as cvector-generator: n_layer - 1
  EXPECT_EQ(raw.tensors.count("direction.0"), 0u);          // llama.cpp rejects direction.0
  EXPECT_EQ(raw.tensors.size(), 27u);
  EXPECT_EQ(raw.tensors.at("direction.20"), v->directions.at(20));
  // Read back: same depth (layer_count + 1 without direction.0) and values.
  auto back = LoadControlVector(out);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ModelDepth(), 28);
  EXPECT_TRUE(ValidateControlVectorForModel(*back, out, 20, 28, 1536).ok());
  EXPECT_EQ(back->directions.at(5), v->directions.at(5));
  std::filesystem::remove(out);
}

TEST(SteerVector, BadFilesGiveClearErrors) {
  auto missing = LoadControlVector(kDir + "/nope.gguf");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope.gguf"), std::string::npos);
  auto not_a_dir = LoadSteeringVector(std::string(SKIPKV_DATA_DIR) + "/datasets");
  ASSERT_FALSE(not_a_dir.ok());
  EXPECT_NE(not_a_dir.status().message().find("execution_avg_vector.gguf"), std::string::npos)
      << not_a_dir.status().message();
  ControlVector e, r, t;
  e.width = r.width = t.width = 2;
  e.directions[1] = {1, 2};
  r.directions[1] = {0, 0};
  t.directions[1] = {0, 0};
  r.num_vectors_averaged = 1;  // transition count missing
  auto c = CombineSealCategories(e, r, t);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("transition 0"), std::string::npos) << c.status().message();
}

}  // namespace
}  // namespace skipkv
