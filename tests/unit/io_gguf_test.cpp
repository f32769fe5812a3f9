// GGUF reader/writer: exact round trips for every metadata and tensor type,
// the real vocabulary-only files, and hostile inputs (every truncation, bit
// flips, crafted counts, misaligned and overlapping tensors) that must give a
// Status, never a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "io/gguf.h"
#include "io/gguf_stream_writer.h"

namespace skipkv {
namespace {

GgufMetadata AllTypesMetadata() {
  GgufMetadata md;
  md.Set("general.architecture", GgufValue::Str("llama"));
  md.Set("t.u8", GgufValue::U8(250));
  md.Set("t.i8", GgufValue::I8(-120));
  md.Set("t.u16", GgufValue::U16(65000));
  md.Set("t.i16", GgufValue::I16(-32000));
  md.Set("t.u32", GgufValue::U32(4000000000u));
  md.Set("t.i32", GgufValue::I32(-2000000000));
  md.Set("t.u64", GgufValue::U64(18000000000000000000ull));
  md.Set("t.i64", GgufValue::I64(-9000000000000000000ll));
  md.Set("t.f32", GgufValue::F32(3.25f));
  md.Set("t.f64", GgufValue::F64(-1e-300));
  md.Set("t.bool", GgufValue::Bool(true));
  md.Set("t.str", GgufValue::Str(std::string("h\xC3\xA9llo\0x", 8)));
  md.Set("t.empty_str", GgufValue::Str(""));
  md.Set("t.str_arr", GgufValue::StrArr({"a", "", "\xE2\x96\x81the"}));
  md.Set("t.f32_arr", GgufValue::F32Arr({1.5f, -2.0f, 1e-7f}));
  md.Set("t.i32_arr", GgufValue::I32Arr({1, -2, 3}));
  md.Set("t.empty_arr", GgufValue::Arr(GgufType::kFloat64, {}));
  md.Set("t.bool_arr", GgufValue::Arr(GgufType::kBool, {GgufValue::Bool(false), GgufValue::Bool(true)}));
  md.Set("t.nested", GgufValue::Arr(GgufType::kArray,
                                    {GgufValue::I32Arr({1, 2}), GgufValue::Arr(GgufType::kUint8, {}),
                                     GgufValue::Arr(GgufType::kArray, {GgufValue::StrArr({"deep"})})}));
  return md;
}

// A small valid file with one tensor of each plain and quantised type.
StatusOr<std::vector<uint8_t>> SmallFile(const GgufMetadata& md, std::vector<std::vector<uint8_t>>* datas = nullptr) {
  GgufWriter w;
  w.metadata() = md;
  const DType types[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K};
  std::mt19937 rng(7);
  for (DType t : types) {
    const int64_t n0 = BlockSize(t) == 1 ? 5 : BlockSize(t);
    const std::vector<int64_t> ne = {n0, 3};
    std::vector<uint8_t> bytes(RowBytes(t, n0) * 3);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    SKIPKV_RETURN_IF_ERROR(w.AddTensor(std::string("w.") + DTypeName(t), t, ne, bytes.data(), bytes.size()));
    if (datas) datas->push_back(bytes);
  }
  return w.WriteToMemory();
}

TEST(GgufTest, MetadataRoundTripIsExactForEveryType) {
  const GgufMetadata md = AllTypesMetadata();
  std::vector<std::vector<uint8_t>> datas;
  auto bytes = SmallFile(md, &datas);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto f = GgufFile::FromMemory(bytes->data(), bytes->size(), "mem.gguf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->version(), 3u);
  ASSERT_EQ((*f)->metadata().entries().size(), md.entries().size());
  for (size_t i = 0; i < md.entries().size(); ++i) {
    EXPECT_EQ((*f)->metadata().entries()[i].first, md.entries()[i].first);
    EXPECT_TRUE((*f)->metadata().entries()[i].second == md.entries()[i].second) << md.entries()[i].first;
  }
  const GgufMetadata& got = (*f)->metadata();
  EXPECT_EQ(got.Find("t.empty_arr")->AsArray().elem_type, GgufType::kFloat64);
  EXPECT_EQ(got.Find("t.nested")->AsArray().items[2].AsArray().items[0].AsArray().items[0].AsString(), "deep");
  EXPECT_EQ(*got.GetInt("t.i64"), -9000000000000000000ll);
  EXPECT_EQ(got.GetInt("t.u64").status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(*got.GetFloat("t.f32"), 3.25);
  EXPECT_EQ(*got.GetString("t.str"), std::string("h\xC3\xA9llo\0x", 8));
  EXPECT_EQ((*got.GetStringArray("t.str_arr"))[2], "\xE2\x96\x81the");
  EXPECT_EQ(got.GetString("t.u8").status().code(), StatusCode::kCorruptData);
  EXPECT_NE(got.GetString("t.u8").status().message().find("t.u8"), std::string::npos);
  EXPECT_EQ(got.GetInt("missing").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(*got.GetIntOr("missing", 42), 42);

  ASSERT_EQ((*f)->tensors().size(), datas.size());
  for (size_t i = 0; i < datas.size(); ++i) {
    const TensorView& t = (*f)->tensors()[i];
    EXPECT_EQ(t.NumBytes(), datas[i].size()) << t.name;
    EXPECT_EQ(std::memcmp(t.data, datas[i].data(), datas[i].size()), 0) << t.name;
    EXPECT_EQ(static_cast<size_t>(t.data - bytes->data()) % 32, 0u) << t.name;
    EXPECT_EQ((*f)->FindTensor(t.name), &t);
  }
  EXPECT_EQ((*f)->FindTensor("w.q4_K")->type, DType::kQ4_K);
  EXPECT_EQ((*f)->FindTensor("w.q4_K")->ne[0], 256);
}

TEST(GgufTest, StreamWriterMatchesInMemoryWriterAndHonoursAlignment) {
  GgufMetadata md = AllTypesMetadata();
  md.Set("general.alignment", GgufValue::U32(64));
  auto mem = SmallFile(md);
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  auto f = GgufFile::FromMemory(mem->data(), mem->size(), "mem");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ((*f)->data_offset() % 64, 0u);

  std::vector<GgufTensorDecl> decls;
  for (const auto& t : (*f)->tensors()) decls.push_back({t.name, t.type, {t.ne[0], t.ne[1]}});
  const std::string path = (std::filesystem::temp_directory_path() / "skipkv_io_stream_test.gguf").string();
  auto w = GgufStreamWriter::Create(path, md, decls);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  for (const auto& t : (*f)->tensors()) {  // in two chunks each
    const size_t half = t.NumBytes() / 2;
    ASSERT_TRUE((*w)->Append(t.data, half).ok());
    ASSERT_TRUE((*w)->Append(t.data + half, t.NumBytes() - half).ok());
  }
  EXPECT_FALSE((*w)->Append("x", 1).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  auto disk = GgufFile::Open(path);
  ASSERT_TRUE(disk.ok()) << disk.status().ToString();
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> file_bytes((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(file_bytes, *mem);
  std::filesystem::remove(path);
}

TEST(GgufTest, StreamWriterRejectsIncompleteTensors) {
  const std::string path = (std::filesystem::temp_directory_path() / "skipkv_io_stream_short.gguf").string();
  auto w = GgufStreamWriter::Create(path, GgufMetadata(), {{"a", DType::kF32, {4}}});
  ASSERT_TRUE(w.ok());
  float x[4] = {1, 2, 3, 4};
  EXPECT_FALSE((*w)->Append(x, 20).ok());  // larger than the tensor
  ASSERT_TRUE((*w)->Append(x, 8).ok());
  const Status st = (*w)->Finish();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'a'"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(GgufTest, WriterRejectsBadTensors) {
  GgufWriter w;
  std::vector<uint8_t> d(1000);
  EXPECT_FALSE(w.AddTensor("q", DType::kQ8_0, {31, 1}, d.data(), 34).ok());  // not a block multiple
  EXPECT_FALSE(w.AddTensor("f", DType::kF32, {4}, d.data(), 15).ok());       // wrong byte count
  EXPECT_FALSE(w.AddTensor("z", DType::kF32, {0}, d.data(), 0).ok());
  ASSERT_TRUE(w.AddTensor("a", DType::kF32, {2}, d.data(), 8).ok());
  ASSERT_TRUE(w.AddTensor("a", DType::kF32, {2}, d.data(), 8).ok());
  EXPECT_FALSE(w.WriteToMemory().ok());  // duplicate name caught at serialisation
}

TEST(GgufTest, VocabularyOnlyFilesLoad) {
  for (const char* name : {"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf"}) {
    auto f = GgufFile::Open(std::string(SKIPKV_TEST_DATA_DIR) + "/tokenizer/" + name);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_TRUE((*f)->tensors().empty());
    auto tokens = (*f)->metadata().GetStringArray("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
    EXPECT_GT(tokens->size(), 30000u) << name;
    auto model = (*f)->metadata().GetString("tokenizer.ggml.model");
    ASSERT_TRUE(model.ok());
    EXPECT_EQ(*model, std::string(name).find("spm") != std::string::npos ? "llama" : "gpt2");
  }
}

TEST(GgufTest, LlamaCppControlVectorFilesLoad) {
  // Real files written by llama.cpp's tooling, with tensors.
  for (const char* cat : {"execution", "reflection", "transition"}) {
    const std::string path = std::string(SKIPKV_DATA_DIR) + "/steering/experiment-math-" + cat + "_avg_vector.gguf";
    auto f = GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(*(*f)->metadata().GetString("general.architecture"), "controlvector");
    EXPECT_GT(*(*f)->metadata().GetFloat("controlvector.num_vectors_averaged"), 1000.0);  // stored as float32
    ASSERT_EQ((*f)->tensors().size(), 28u);
    const TensorView* d = (*f)->FindTensor("direction.27");
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->type, DType::kF32);
    EXPECT_EQ(d->ShapeString(), "[1536]");
  }
}

// ---- hostile inputs ---------------------------------------------------------

std::vector<uint8_t> TinyValidFile() {
  GgufWriter w;
  w.SetMetadata("general.architecture", GgufValue::Str("llama"));
  w.SetMetadata("a.arr", GgufValue::Arr(GgufType::kArray, {GgufValue::StrArr({"x", "yz"})}));
  w.SetMetadata("a.b", GgufValue::Bool(true));
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_TRUE(w.AddTensor("t0", DType::kF32, {8}, x, sizeof(x)).ok());
  EXPECT_TRUE(w.AddTensor("t1", DType::kF32, {4, 2}, x, sizeof(x)).ok());
  return *w.WriteToMemory();
}

TEST(GgufHostileTest, EveryTruncationIsAnError) {
  const std::vector<uint8_t> full = TinyValidFile();
  ASSERT_TRUE(GgufFile::FromMemory(full.data(), full.size(), "full").ok());
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + n);  // own buffer: ASan sees over-reads
    auto f = GgufFile::FromMemory(cut.data(), cut.size(), "cut");
    EXPECT_FALSE(f.ok()) << "truncated at " << n;
    if (!f.ok()) EXPECT_FALSE(f.status().message().empty());
  }
}

TEST(GgufHostileTest, BitFlipsNeverCrash) {
  const std::vector<uint8_t> full = TinyValidFile();
  std::mt19937 rng(1234);
  int rejected = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    for (int bit : {0, 3, 7}) {
      std::vector<uint8_t> m = full;
      m[i] ^= static_cast<uint8_t>(1u << bit);
      auto f = GgufFile::FromMemory(m.data(), m.size(), "flip");
      if (!f.ok()) {
        ++rejected;
        continue;
      }
      for (const auto& t : (*f)->tensors()) {  // accepted files must have in-bounds tensors
        ASSERT_GE(t.data, m.data());
        ASSERT_LE(t.data + t.NumBytes(), m.data() + m.size());
      }
    }
  }
  for (int k = 0; k < 2000; ++k) {  // random multi-byte corruption
    std::vector<uint8_t> m = full;
    for (int j = 0; j < 4; ++j) m[rng() % m.size()] = static_cast<uint8_t>(rng());
    (void)GgufFile::FromMemory(m.data(), m.size(), "rand");
  }
  EXPECT_GT(rejected, 0);
}

// Hand-built images for precise cases.
struct Img {
  std::vector<uint8_t> b;
  template <typename T> Img& put(T x) {
    const size_t n = b.size();
    b.resize(n + sizeof(T));
    std::memcpy(b.data() + n, &x, sizeof(T));
    return *this;
  }
  Img& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Img& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    return put<uint32_t>(0x46554747).put<uint32_t>(version).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
  }
  Img& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) put<uint64_t>(d);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  Img& pad(size_t align, size_t extra = 0) {
    b.resize((b.size() + align - 1) / align * align + extra, 0);
    return *this;
  }
};

Status Parse(const Img& img) {
  auto f = GgufFile::FromMemory(img.b.data(), img.b.size(), "crafted.gguf");
  return f.status();
}

void ExpectError(const Img& img, const std::string& needle) {
  const Status st = Parse(img);
  ASSERT_FALSE(st.ok()) << "expected an error mentioning '" << needle << "'";
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("crafted.gguf"), std::string::npos) << st.message();
}

TEST(GgufHostileTest, CraftedHeadersGiveNamedErrors) {
  ExpectError(Img().put<uint32_t>(0x12345678).put<uint32_t>(3), "magic");
  ExpectError(Img().header(1, 0, 0), "version 1");
  ExpectError(Img().header(4, 0, 0), "version 4");
  ExpectError(Img().header(3, 0, ~0ull), "metadata count");
  ExpectError(Img().header(3, ~0ull >> 4, 0), "tensor count");
  ExpectError(Img().header(3, 0, 1).put<uint64_t>(~0ull).put<uint32_t>(0).put<uint64_t>(0), "string length");
  ExpectError(Img().header(3, 0, 1).str("k").put<uint32_t>(13).put<uint8_t>(0), "unknown value type 13");
  ExpectError(Img().header(3, 0, 1).str("k").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(1ull << 60), "array length");
  ExpectError(Img().header(3, 0, 1).str("k").put<uint32_t>(9).put<uint32_t>(77).put<uint64_t>(0), "element type 77");
  ExpectError(Img().header(3, 0, 1).str("k").put<uint32_t>(7).put<uint8_t>(2), "bool value 2");
  ExpectError(Img().header(3, 0, 2).str("k").put<uint32_t>(0).put<uint8_t>(1).str("k").put<uint32_t>(0).put<uint8_t>(1),
              "duplicate metadata key 'k'");
  ExpectError(Img().header(3, 0, 1).str("general.alignment").put<uint32_t>(4).put<uint32_t>(48), "general.alignment 48");
  {  // arrays nested too deeply
    Img img;
    img.header(3, 0, 1).str("deep").put<uint32_t>(9);
    for (int i = 0; i < 20; ++i) img.put<uint32_t>(9).put<uint64_t>(1);
    img.put<uint32_t>(0).put<uint64_t>(0);
    ExpectError(img, "nested deeper");
  }
}

TEST(GgufHostileTest, CraftedTensorTablesGiveNamedErrors) {
  auto one = [](std::vector<uint64_t> ne, uint32_t type, uint64_t offset, size_t data_bytes) {
    Img img;
    img.header(3, 1, 0).tensor("w", std::move(ne), type, offset).pad(32, data_bytes);
    return img;
  };
  ExpectError(one({4}, 0, 0, 8), "outside");                   // 16 bytes needed, 8 present
  ExpectError(one({}, 0, 0, 64), "n_dims 0");
  ExpectError(one({1, 1, 1, 1, 1}, 0, 0, 64), "n_dims 5");
  ExpectError(one({4, 0}, 0, 0, 64), "ne[1] = 0");
  ExpectError(one({1ull << 40, 1ull << 40}, 0, 0, 64), "overflow");
  ExpectError(one({4}, 99, 0, 64), "unknown ggml type 99");
  ExpectError(one({33}, 8, 0, 64), "block size");              // q8_0 needs multiples of 32
  ExpectError(one({4}, 0, 16, 64), "not a multiple of the alignment");
  ExpectError(one({4}, 0, ~0ull & ~31ull, 64), "outside");
  EXPECT_TRUE(Parse(one({4}, 0, 0, 16)).ok());
  {
    Img img;
    img.header(3, 2, 0).tensor("a", {16}, 0, 0).tensor("b", {4}, 0, 32).pad(32, 64);
    ExpectError(img, "overlap");
  }
  {
    Img img;
    img.header(3, 2, 0).tensor("a", {4}, 0, 0).tensor("a", {4}, 0, 32).pad(32, 64);
    ExpectError(img, "duplicate tensor 'a'");
  }
  {
    Img img;  // version 2 files parse too
    img.header(2, 1, 0).tensor("a", {4}, 0, 0).pad(32, 16);
    EXPECT_TRUE(Parse(img).ok());
  }
}

TEST(GgufHostileTest, MissingFileIsIoError) {
  auto f = GgufFile::Open("/nonexistent/dir/x.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kIoError);
  EXPECT_NE(f.status().message().find("/nonexistent/dir/x.gguf"), std::string::npos);
}

}  // namespace
}  // namespace skipkv
