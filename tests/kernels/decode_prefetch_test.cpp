// The decode kernels' two switches (kernels/decode_switches.cpp: the
// interleaved Q8_0, Q4_K and Q6_K kernels): the prefetch distance
// (SKIPKV_DECODE_PREFETCH: its syntax, its rounding to whole blocks, and that
// no distance changes a result on any compiled target, a prefetch only; the
// kernels' loads must not follow the prefetch pointer) and the weight streams
// (SKIPKV_DECODE_STREAMS: its syntax, and that no stream count changes a
// result on any compiled target, whatever the groups left over and the rows
// of each thread).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "kernels/simd_internal.h"
#include "simd_targets.h"
#include "test_weights.h"

namespace skipkv {
namespace {

using kernels::internal::DecodePrefetch;
using kernels::internal::DecodePrefetchBlocks;
using kernels::internal::DecodeStreamCount;
using kernels::internal::DecodeStreams;
using kernels::internal::ParseDecodePrefetch;
using kernels::internal::ParseDecodeStreams;

struct ResetPrefetch {
  ~ResetPrefetch() { kernels::internal::ResetDecodePrefetchForTesting(); }
};
struct ResetStreams {
  ~ResetStreams() { kernels::internal::ResetDecodeStreamsForTesting(); }
};

TEST(DecodePrefetch, ParsesOneDistanceOrOnePerType) {
  // A type left out keeps its default: Q8_0x16 none, Q4_Kx16 two 2,304-byte blocks,
  // Q6_Kx16 two 3,360-byte ones.
  const struct {
    const char* text;
    int64_t q8_0, q4_k, q6_k;
  } good[] = {
      {"4096", 4096, 4096, 4096},
      {"0", 0, 0, 0},
      {"1048576", 1 << 20, 1 << 20, 1 << 20},
      {"q8_0=1024,q4_k=0,q6_k=840", 1024, 0, 840},
      {"q8_0=2048", 2048, 4608, 6720},
      {"q6_k=2100,q4_k=9216", 0, 9216, 2100},
  };
  for (const auto& g : good) {
    SCOPED_TRACE(g.text);
    DecodePrefetch p{-1, -1, -1};
    std::string why;
    ASSERT_TRUE(ParseDecodePrefetch(g.text, &p, &why)) << why;
    EXPECT_EQ(p.q8_0_bytes, g.q8_0);
    EXPECT_EQ(p.q4_k_bytes, g.q4_k);
    EXPECT_EQ(p.q6_k_bytes, g.q6_k);
  }
}

TEST(DecodePrefetch, RejectsMalformedValuesWithTheReason) {
  const struct {
    const char* text;
    const char* reason;  // a part of the message
  } bad[] = {
      {"", "'' is not a byte count"},
      {"abc", "'abc' is not a byte count"},
      {"-5", "'-5' is not a byte count"},
      {"4k", "'4k' is not a byte count"},
      {"1048577", "beyond the largest distance, 1048576"},
      {"q5_0=64", "unknown type 'q5_0' (q8_0, q4_k or q6_k)"},
      {"q8_0=", "'' is not a byte count"},
      {"q8_0=64,", "trailing ','"},
      {"q8_0=64,q8_0=128", "'q8_0' given twice"},
      {"q6_k=0,q4_k=1,q6_k=2", "'q6_k' given twice"},
      {"q8_0=64,q4_k", "'q4_k' is not TYPE=BYTES"},
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(b.text);
    DecodePrefetch p{123, 456, 789};
    std::string why;
    EXPECT_FALSE(ParseDecodePrefetch(b.text, &p, &why));
    EXPECT_NE(why.find(b.reason), std::string::npos) << why;
    EXPECT_EQ(p.q8_0_bytes, 123) << "a rejected value leaves the output as it was";
    EXPECT_EQ(p.q4_k_bytes, 456);
    EXPECT_EQ(p.q6_k_bytes, 789);
  }
}

TEST(DecodePrefetch, RoundsUpToWholeBlocksAndSaysWhatIsInForce) {
  ResetPrefetch reset;
  kernels::internal::ResetDecodePrefetchForTesting();
  EXPECT_EQ(DecodePrefetchBlocks(DType::kQ8_0x16), 0);
  EXPECT_EQ(DecodePrefetchBlocks(DType::kQ4_Kx16), 2);
  EXPECT_EQ(DecodePrefetchBlocks(DType::kQ6_Kx16), 2);
  EXPECT_EQ(kernels::DecodePrefetchStatus(),
            "Q8_0x16 none, Q4_Kx16 4608 B (2 blocks), Q6_Kx16 6720 B (2 blocks)");
  // Blocks: 544, 2,304 and 3,360 bytes.
  kernels::internal::SetDecodePrefetchForTesting({1, 2305, 3361});
  EXPECT_EQ(DecodePrefetchBlocks(DType::kQ8_0x16), 1);
  EXPECT_EQ(DecodePrefetchBlocks(DType::kQ4_Kx16), 2);
  EXPECT_EQ(DecodePrefetchBlocks(DType::kQ6_Kx16), 2);
  EXPECT_EQ(DecodePrefetchBlocks(DType::kQ8_0), 0) << "the file layouts take no setting";
  EXPECT_EQ(DecodePrefetchBlocks(DType::kQ4_K), 0);
  EXPECT_EQ(DecodePrefetchBlocks(DType::kQ6_K), 0);
  EXPECT_EQ(kernels::DecodePrefetchStatus(),
            "Q8_0x16 1 B (1 block), Q4_Kx16 2305 B (2 blocks), Q6_Kx16 3361 B (2 blocks)");
  kernels::internal::SetDecodePrefetchForTesting({545, 0, 420});
  EXPECT_EQ(DecodePrefetchBlocks(DType::kQ8_0x16), 2);
  EXPECT_EQ(DecodePrefetchBlocks(DType::kQ4_Kx16), 0);
  EXPECT_EQ(DecodePrefetchBlocks(DType::kQ6_Kx16), 1);
  EXPECT_EQ(kernels::DecodePrefetchStatus(),
            "Q8_0x16 545 B (2 blocks), Q4_Kx16 none, Q6_Kx16 420 B (1 block)");
}

// Decode (1 token) and a batch ending in a lone token (5 = a 4-token tile and
// a 1-token one), 1 and 2 threads, on every compiled target, for Q8_0x16,
// Q4_Kx16 and Q6_Kx16: the same
// bits with the prefetch off, one block ahead, far ahead, and at the largest
// distance (most prefetches past the end of the matrix, which never fault).
class DecodePrefetchTargets : public testing::SimdTargetTest {};

TEST_P(DecodePrefetchTargets, NoDistanceChangesAResult) {
  ResetPrefetch reset;
  const int64_t in = 1536, rows = 48;
  for (const DType type : {DType::kQ8_0x16, DType::kQ4_Kx16, DType::kQ6_Kx16}) {
    const testing::Weights w = testing::MakeWeights(type, in, rows, 91);
    for (const int64_t n : {1, 5}) {
      std::mt19937 rng(92);
      std::normal_distribution<float> nd(0.f, 0.5f);
      std::vector<float> x(static_cast<size_t>(in * n));
      for (auto& v : x) v = nd(rng);
      for (const int threads : {1, 2}) {
        SCOPED_TRACE(std::string(DTypeName(type)) + " n=" + std::to_string(n) +
                     " threads=" + std::to_string(threads));
        ThreadPool pool(threads);
        kernels::internal::ResetDecodePrefetchForTesting();
        std::vector<float> want(static_cast<size_t>(rows * n));
        kernels::MatMul(w.view, x.data(), n, want.data(), pool);
        for (const int64_t bytes :
             {int64_t{0}, int64_t{1}, int64_t{8192}, kernels::internal::kMaxDecodePrefetchBytes}) {
          kernels::internal::SetDecodePrefetchForTesting({bytes, bytes, bytes});
          std::vector<float> y(want.size(), -1.f);
          kernels::MatMul(w.view, x.data(), n, y.data(), pool);
          EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float)))
              << bytes << " bytes ahead";
        }
      }
    }
  }
}

TEST(DecodeStreams, ParsesOneCountOrOnePerType) {
  // A type left out keeps its default: Q8_0x16 2, Q4_Kx16 and Q6_Kx16 1.
  const struct {
    const char* text;
    int64_t q8_0, q4_k, q6_k;
  } good[] = {
      {"1", 1, 1, 1},
      {"8", 8, 8, 8},
      {"q8_0=4,q4_k=2,q6_k=8", 4, 2, 8},
      {"q4_k=4", 2, 4, 1},
      {"q6_k=2,q8_0=1", 1, 1, 2},
  };
  for (const auto& g : good) {
    SCOPED_TRACE(g.text);
    DecodeStreams p{-1, -1, -1};
    std::string why;
    ASSERT_TRUE(ParseDecodeStreams(g.text, &p, &why)) << why;
    EXPECT_EQ(p.q8_0, g.q8_0);
    EXPECT_EQ(p.q4_k, g.q4_k);
    EXPECT_EQ(p.q6_k, g.q6_k);
  }
  const struct {
    const char* text;
    const char* reason;
  } bad[] = {
      {"", "'' is not a stream count (1, 2, 4 or 8"},
      {"0", "'0' is not a stream count"},
      {"3", "'3' is not a stream count"},
      {"16", "'16' is not a stream count"},
      {"-2", "'-2' is not a stream count"},
      {"2x", "'2x' is not a stream count"},
      {"q8_0=2,q4_k", "'q4_k' is not TYPE=N (TYPE q8_0, q4_k or q6_k)"},
      {"q5_k=2", "unknown type 'q5_k'"},
      {"q4_k=2,q4_k=4", "'q4_k' given twice"},
      {"q4_k=2,", "trailing ','"},
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(b.text);
    DecodeStreams p{5, 6, 7};
    std::string why;
    EXPECT_FALSE(ParseDecodeStreams(b.text, &p, &why));
    EXPECT_NE(why.find(b.reason), std::string::npos) << why;
    EXPECT_EQ(p.q8_0, 5) << "a rejected value leaves the output as it was";
    EXPECT_EQ(p.q4_k, 6);
    EXPECT_EQ(p.q6_k, 7);
  }
}

TEST(DecodeStreams, SaysWhatIsInForce) {
  ResetStreams reset;
  kernels::internal::ResetDecodeStreamsForTesting();
  EXPECT_EQ(DecodeStreamCount(DType::kQ8_0x16), 2);
  EXPECT_EQ(DecodeStreamCount(DType::kQ4_Kx16), 1);
  EXPECT_EQ(DecodeStreamCount(DType::kQ6_Kx16), 1);
  EXPECT_EQ(kernels::DecodeStreamsStatus(), "Q8_0x16 2, Q4_Kx16 1, Q6_Kx16 1");
  kernels::internal::SetDecodeStreamsForTesting({8, 4, 2});
  EXPECT_EQ(DecodeStreamCount(DType::kQ8_0x16), 8);
  EXPECT_EQ(DecodeStreamCount(DType::kQ4_Kx16), 4);
  EXPECT_EQ(DecodeStreamCount(DType::kQ6_Kx16), 2);
  EXPECT_EQ(DecodeStreamCount(DType::kQ8_0), 1) << "the file layouts read one stream";
  EXPECT_EQ(DecodeStreamCount(DType::kF16), 1);
  EXPECT_EQ(kernels::DecodeStreamsStatus(), "Q8_0x16 8, Q4_Kx16 4, Q6_Kx16 2");
}

// Decode on every compiled target, for the three types, 1 to 3 threads and
// row counts whose groups do not divide evenly (7 and 37 groups: parts of
// unequal remainders, and threads with fewer groups than streams): every
// stream count gives the bits of one stream, with and without the prefetch.
class DecodeStreamsTargets : public testing::SimdTargetTest {};

TEST_P(DecodeStreamsTargets, NoStreamCountChangesAResult) {
  ResetPrefetch reset_prefetch;
  ResetStreams reset_streams;
  const int64_t in = 1536;
  for (const DType type : {DType::kQ8_0x16, DType::kQ4_Kx16, DType::kQ6_Kx16}) {
    for (const int64_t rows : {int64_t{16} * 7, int64_t{16} * 37}) {
      const testing::Weights w = testing::MakeWeights(type, in, rows, 93);
      std::mt19937 rng(94);
      std::normal_distribution<float> nd(0.f, 0.5f);
      std::vector<float> x(static_cast<size_t>(in));
      for (auto& v : x) v = nd(rng);
      for (const int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        for (const int64_t bytes : {int64_t{0}, int64_t{4096}}) {
          SCOPED_TRACE(std::string(DTypeName(type)) + " rows=" + std::to_string(rows) +
                       " threads=" + std::to_string(threads) + " prefetch=" + std::to_string(bytes));
          kernels::internal::SetDecodePrefetchForTesting({bytes, bytes, bytes});
          kernels::internal::SetDecodeStreamsForTesting({1, 1, 1});
          std::vector<float> want(static_cast<size_t>(rows));
          kernels::MatMul(w.view, x.data(), 1, want.data(), pool);
          for (const int64_t n : {2, 4, 8}) {
            kernels::internal::SetDecodeStreamsForTesting({n, n, n});
            std::vector<float> y(want.size(), -1.f);
            kernels::MatMul(w.view, x.data(), 1, y.data(), pool);
            EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float))) << n << " streams";
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, DecodeStreamsTargets, ::testing::ValuesIn(testing::CompiledMatMulTargets()),
                         testing::TargetParamName);

INSTANTIATE_TEST_SUITE_P(Targets, DecodePrefetchTargets,
                         ::testing::ValuesIn(testing::CompiledMatMulTargets()), testing::TargetParamName);

}  // namespace
}  // namespace skipkv
