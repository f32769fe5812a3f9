// How weight files reach memory (util/mapped_file.h): mapped, or read into
// anonymous memory with huge pages advised. Reading must give exactly the
// bytes mapping gives, for every loader (GGUF, HF safetensors directory,
// llama2.c), so a model computes the same either way; auto picks read only
// when the file fits in 3/4 of MemAvailable; errors name the path.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/model_source.h"
#include "util/mapped_file.h"

namespace skipkv {
namespace {
namespace fs = std::filesystem;

std::string TempPath(const std::string& name) {
  return (fs::temp_directory_path() / ("skipkv_load_" + std::to_string(::getpid()) + "_" + name)).string();
}

// The smaps block of the mapping that contains `p`, or "" if none does.
std::string SmapsBlockOf(const void* p) {
  std::ifstream in("/proc/self/smaps");
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  std::string line, block;
  bool inside = false;
  while (std::getline(in, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find('-')) {
      if (inside) return block;
      inside = addr >= lo && addr < hi;
      block.clear();
    }
    if (inside) block += line + "\n";
  }
  return inside ? block : "";
}

// The number after `key` in an smaps block ("THPeligible:           1"), or -1.
long SmapsField(const std::string& block, const std::string& key) {
  const size_t at = block.find(key);
  if (at == std::string::npos) return -1;
  return std::strtol(block.c_str() + at + key.size(), nullptr, 10);
}

bool TransparentHugePagesOff() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s((std::istreambuf_iterator<char>(in)), {});
  return s.empty() || s.find("[never]") != std::string::npos;
}

TEST(FileLoad, NamesParseAndAutoReadsWhatFitsInThreeQuartersOfAvailableMemory) {
  EXPECT_EQ(*ParseFileLoad("map"), FileLoad::kMap);
  EXPECT_EQ(*ParseFileLoad("mmap"), FileLoad::kMap);
  EXPECT_EQ(*ParseFileLoad("read"), FileLoad::kRead);
  EXPECT_EQ(*ParseFileLoad("auto"), FileLoad::kAuto);
  StatusOr<FileLoad> bad = ParseFileLoad("huge");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'huge'"), std::string::npos) << bad.status().message();

  EXPECT_EQ(ResolveFileLoad(FileLoad::kAuto, 750, 1000), FileLoad::kRead);
  EXPECT_EQ(ResolveFileLoad(FileLoad::kAuto, 751, 1000), FileLoad::kMap);
  EXPECT_EQ(ResolveFileLoad(FileLoad::kAuto, 1, -1), FileLoad::kMap);  // MemAvailable unknown
  EXPECT_EQ(ResolveFileLoad(FileLoad::kMap, 1, 1000), FileLoad::kMap);
  EXPECT_EQ(ResolveFileLoad(FileLoad::kRead, 5000, 1000), FileLoad::kRead);  // asked for: no second guess
  EXPECT_GT(MemAvailableBytes(), 0);
}

// A file of 3 MiB + 4097 bytes: two huge pages, the second partly used, and a
// size that is not a multiple of 4 KiB.
TEST(MappedFile, ReadGivesTheMappedBytesInAlignedHugePageMemory) {
  const std::string path = TempPath("pattern.bin");
  std::vector<uint8_t> bytes((size_t{3} << 20) + 4097);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());

  auto mapped = MappedFile::Open(path, FileLoad::kMap);
  auto read = MappedFile::Open(path, FileLoad::kRead);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ((*mapped)->load(), FileLoad::kMap);
  EXPECT_EQ((*read)->load(), FileLoad::kRead);
  ASSERT_EQ((*read)->size(), bytes.size());
  EXPECT_EQ(std::memcmp((*read)->data(), bytes.data(), bytes.size()), 0);
  EXPECT_EQ(std::memcmp((*mapped)->data(), (*read)->data(), bytes.size()), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*read)->data()) % (uintptr_t{2} << 20), 0u);

  // The kernel took the advice: the region is eligible for huge pages (where
  // THP is on at all), and it is anonymous memory, not the file.
  const std::string smaps = SmapsBlockOf((*read)->data());
  ASSERT_FALSE(smaps.empty());
  EXPECT_EQ(smaps.find(path), std::string::npos) << smaps;
  if (!TransparentHugePagesOff()) {
    EXPECT_EQ(SmapsField(smaps, "THPeligible:"), 1) << smaps;
  }
  fs::remove(path);
}

TEST(MappedFile, EmptyFilesAndMissingPaths) {
  const std::string empty = TempPath("empty.bin");
  std::ofstream(empty, std::ios::binary).close();
  for (FileLoad load : {FileLoad::kMap, FileLoad::kRead, FileLoad::kAuto}) {
    auto f = MappedFile::Open(empty, load);
    ASSERT_TRUE(f.ok()) << static_cast<int>(load);
    EXPECT_EQ((*f)->size(), 0u);
    EXPECT_EQ((*f)->data(), nullptr);
    auto missing = MappedFile::Open(empty + ".missing", load);
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.status().message().find(empty + ".missing"), std::string::npos);
  }
  fs::remove(empty);
}

// Every loader: the tensors read into memory are the mapped tensors, byte for
// byte, under the same names, types and shapes, with the same metadata.
void ExpectSameModelBothWays(const std::string& path) {
  SCOPED_TRACE(path);
  auto mapped = OpenModel(path, "", FileLoad::kMap);
  auto read = OpenModel(path, "", FileLoad::kRead);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const ModelSource& m = **mapped;
  const ModelSource& r = **read;
  EXPECT_EQ(m.weights_load, FileLoad::kMap);
  EXPECT_EQ(r.weights_load, FileLoad::kRead);
  EXPECT_EQ(WeightsLoadDescription(r), "read into memory (huge pages advised)");
  EXPECT_EQ(m.metadata.entries().size(), r.metadata.entries().size());
  for (const auto& [k, v] : m.metadata.entries()) {
    const GgufValue* got = r.metadata.Find(k);
    ASSERT_NE(got, nullptr) << k;
    EXPECT_TRUE(*got == v) << k;
  }
  ASSERT_EQ(m.tensors.size(), r.tensors.size());
  ASSERT_FALSE(m.tensors.empty());
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const TensorView& a = m.tensors[i];
    const TensorView& b = r.tensors[i];
    ASSERT_EQ(a.name, b.name);
    EXPECT_EQ(a.type, b.type) << a.name;
    EXPECT_EQ(a.ne, b.ne) << a.name;
    EXPECT_EQ(std::memcmp(a.data, b.data, a.NumBytes()), 0) << a.name;
  }
}

TEST(WeightsLoad, GgufFileReadEqualsMapped) {
  ExpectSameModelBothWays(std::string(SKIPKV_DATA_DIR) + "/models/testbed/testbed.gguf");
}
TEST(WeightsLoad, HfDirectoryReadEqualsMapped) {
  ExpectSameModelBothWays(std::string(SKIPKV_TEST_DATA_DIR) + "/testbed_tiny");
}
TEST(WeightsLoad, Llama2cCheckpointReadEqualsMapped) {
  ExpectSameModelBothWays(std::string(SKIPKV_DATA_DIR) + "/models/stories260K/stories260K.bin");
}

}  // namespace
}  // namespace skipkv
