// Tests of src/util: Status plumbing, the thread pool's contract, fp16/bf16
// conversions on exactly representable values, and the dtype table.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <vector>

#include "tensor/dtype.h"
#include "util/fp16.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace skipkv {
namespace {

StatusOr<int> ParsePositive(int x) {
  if (x <= 0) return InvalidArgument("value " + std::to_string(x) + " must be positive");
  return x;
}

Status UsesMacros(int x, int* out) {
  SKIPKV_ASSIGN_OR_RETURN(int v, ParsePositive(x));
  *out = v * 2;
  return Status::Ok();
}

TEST(Status, CarriesCodeAndMessage) {
  Status s = CorruptData("file.gguf: tensor count 99 exceeds file size");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorruptData);
  EXPECT_EQ(s.ToString(), "corrupt data: file.gguf: tensor count 99 exceeds file size");
  EXPECT_EQ(s.WithContext("loading").message(), "loading: file.gguf: tensor count 99 exceeds file size");
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(Status, MacrosPropagate) {
  int out = 0;
  EXPECT_TRUE(UsesMacros(4, &out).ok());
  EXPECT_EQ(out, 8);
  Status s = UsesMacros(-1, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("-1"), std::string::npos);
}

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> bad_worker{0};
      pool.Run(n, [&](int64_t t, int worker) {
        hits[t].fetch_add(1);
        if (worker < 0 || worker >= threads) bad_worker.fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "threads " << threads << " task " << i;
      EXPECT_EQ(bad_worker.load(), 0);
    }
  }
}

TEST(ThreadPool, ParallelForCoversRangeWithFixedChunks) {
  ThreadPool pool(3);
  std::vector<int> owner(103, -1);
  std::vector<std::pair<int64_t, int64_t>> chunks(11);
  pool.ParallelFor(103, 10, [&](int64_t b, int64_t e, int) {
    chunks[b / 10] = {b, e};
    for (int64_t i = b; i < e; ++i) owner[i] = static_cast<int>(b / 10);
  });
  for (int i = 0; i < 103; ++i) EXPECT_EQ(owner[i], i / 10);
  EXPECT_EQ(chunks[10], (std::pair<int64_t, int64_t>{100, 103}));
}

TEST(ThreadPool, ManySmallLoopsDoNotDeadlock) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int i = 0; i < 5000; ++i) pool.Run(3, [&](int64_t t, int) { sum.fetch_add(t + 1); });
  EXPECT_EQ(sum.load(), 5000 * 6);
}

TEST(Fp16, ExactValuesRoundTrip) {
  for (float f : {0.f, -0.f, 1.f, -2.f, 0.5f, 65504.f, 6.103515625e-05f /* min normal */,
                  5.960464477539063e-08f /* min subnormal */, 1.5f, 3.140625f}) {
    EXPECT_EQ(F16ToF32(F32ToF16(f)), f) << f;
  }
  EXPECT_EQ(F32ToF16(1.f), 0x3c00);
  EXPECT_EQ(F32ToF16(-2.f), 0xc000);
  EXPECT_EQ(F32ToF16(65520.f), 0x7c00);  // rounds to +inf
  EXPECT_TRUE(std::isinf(F16ToF32(0x7c00)));
  EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(std::numeric_limits<float>::quiet_NaN()))));
  // Round to nearest even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(F32ToF16(1.f + 1.f / 2048), 0x3c00);
  EXPECT_EQ(F32ToF16(1.f + 3.f / 2048), 0x3c02);
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(F32ToBF16(1.f), 0x3f80);
  EXPECT_EQ(BF16ToF32(0x3f80), 1.f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(F32ToBF16(1.f + 1.f / 256), 0x3f80);
  EXPECT_EQ(F32ToBF16(1.f + 3.f / 256), 0x3f82);
  EXPECT_TRUE(std::isnan(BF16ToF32(F32ToBF16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, SizesMatchGgml) {
  EXPECT_EQ(RowBytes(DType::kQ8_0, 64), 68u);
  EXPECT_EQ(RowBytes(DType::kQ4_K, 512), 288u);
  EXPECT_EQ(RowBytes(DType::kQ6_K, 256), 210u);
  EXPECT_EQ(RowBytes(DType::kBF16, 3), 6u);
  EXPECT_FALSE(LookupDType(4).has_value());  // removed Q4_2
  EXPECT_FALSE(LookupDType(999).has_value());
  EXPECT_EQ(DTypeFromName("Q4_K"), DType::kQ4_K);
  EXPECT_EQ(DTypeFromName("nope"), std::nullopt);
}

}  // namespace
}  // namespace skipkv
