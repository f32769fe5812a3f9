// ForwardBench's bandwidth figures (skipkv/bench.h): the bytes a decode step
// reads, checked against the embedded models' known shapes, and the read
// bandwidth's argument checks.
#include <cmath>

#include <gtest/gtest.h>

#include "skipkv/bench.h"

namespace skipkv {
namespace {

std::unique_ptr<ForwardBench> OpenBench(const std::string& path) {
  auto fb = ForwardBench::Open(path, KvDType::kF16, KvPolicyConfig{});
  EXPECT_TRUE(fb.ok()) << fb.status().ToString();
  return fb.ok() ? std::move(*fb) : nullptr;
}

TEST(ForwardBenchBandwidth, TiedEmbeddingsAreReadByTheHead) {
  // stories260K (llama2.c) shares its embedding table with the classifier:
  // a decode step reads every tensor.
  auto fb = OpenBench(":default:");
  ASSERT_NE(fb, nullptr);
  EXPECT_EQ(fb->decode_weight_bytes(), fb->weight_bytes());
}

TEST(ForwardBenchBandwidth, UntiedEmbeddingTableIsLeftOut) {
  // The testbed (data/models/testbed/README.md): untied head, f32, vocab 444,
  // d = 128, so a decode step skips the 444 x 128 x 4 bytes of token_embd.
  auto fb = OpenBench(":testbed:");
  ASSERT_NE(fb, nullptr);
  EXPECT_EQ(fb->weight_bytes() - fb->decode_weight_bytes(), size_t{444} * 128 * 4);
}

TEST(ForwardBenchBandwidth, ReadBandwidthMeasuresSomething) {
  auto fb = OpenBench(":default:");
  ASSERT_NE(fb, nullptr);
  for (int threads : {1, 2}) {
    ASSERT_TRUE(fb->SetThreads(threads).ok());
    auto gbs = fb->ReadBandwidthGBs(size_t{8} << 20, 3);
    ASSERT_TRUE(gbs.ok()) << gbs.status().ToString();
    EXPECT_TRUE(std::isfinite(*gbs));
    EXPECT_GT(*gbs, 0.05);  // any machine reads 8 MiB faster than in 0.16 s
  }
}

TEST(ForwardBenchBandwidth, ReadBandwidthRejectsTinyArraysAndNoPasses) {
  auto fb = OpenBench(":default:");
  ASSERT_NE(fb, nullptr);
  auto small = fb->ReadBandwidthGBs(4096, 5);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(small.status().message().find("4096 bytes"), std::string::npos) << small.status().message();
  auto none = fb->ReadBandwidthGBs(size_t{8} << 20, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("0 passes"), std::string::npos) << none.status().message();
}

}  // namespace
}  // namespace skipkv
