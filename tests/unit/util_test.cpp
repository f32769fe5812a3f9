// Tests of src/util: Status plumbing, the thread pool's contract, fp16/bf16
// conversions on exactly representable values, and the dtype table.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <future>
#include <limits>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>
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

// A worker that has not woken up when the other threads have claimed every
// task -- held back here by the test seam, as a neighbouring process that
// preempts it would -- is not waited for, and when it does wake it takes
// nothing from the finished loop. (A pool that waited for every worker to
// check in would still be inside Run when the 20 s deadline passes.)
TEST(ThreadPool, DoesNotWaitForAWorkerThatHasNotWoken) {
  ThreadPool pool(2);
  std::mutex m;
  std::condition_variable cv;
  bool released = false;
  std::atomic<int> wakes{0};
  pool.SetWorkerWakeHookForTest([&](int) {
    if (wakes.fetch_add(1) != 0) return;  // hold the first wake-up only
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return released; });
  });
  constexpr int64_t kTasks = 64;
  std::vector<std::atomic<int>> hits(kTasks);
  std::atomic<int> by_held_worker{0};
  auto run = std::async(std::launch::async, [&] {
    pool.Run(kTasks, [&](int64_t t, int worker) {
      hits[t].fetch_add(1);
      if (worker == 1) by_held_worker.fetch_add(1);
    });
  });
  const bool returned = run.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  {
    std::lock_guard<std::mutex> lock(m);
    released = true;
  }
  cv.notify_all();
  run.wait();
  EXPECT_TRUE(returned) << "Run waited for a worker that held no task";
  EXPECT_EQ(by_held_worker.load(), 0);
  for (int64_t t = 0; t < kTasks; ++t) EXPECT_EQ(hits[t].load(), 1) << "task " << t;
  // The released worker joins later loops, which still run every task once.
  std::atomic<int64_t> sum{0};
  std::atomic<int> by_worker1{0};
  for (int i = 0; i < 300; ++i) {
    pool.Run(8, [&](int64_t t, int worker) {
      sum.fetch_add(t + 1);
      if (worker == 1) by_worker1.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(5));
    });
  }
  EXPECT_EQ(sum.load(), 300 * 36);
  EXPECT_GT(by_worker1.load(), 0) << "the released worker never ran a task";
}

// Workers woken late by random amounts (the seam sleeps 0-300 us) overlap the
// next loops; each task of each loop still runs exactly once, with its own
// loop's function.
TEST(ThreadPool, LateWorkersNeverRunAnotherLoopsTask) {
  for (int threads : {2, 4}) {
    ThreadPool pool(threads);
    std::atomic<uint32_t> rng{12345};
    pool.SetWorkerWakeHookForTest([&](int) {
      const uint32_t r = rng.fetch_add(2654435761u) >> 16;
      if (r % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(r % 300));
    });
    constexpr int kLoops = 400;
    std::vector<std::vector<std::atomic<int>>> hits(kLoops);
    for (int loop = 0; loop < kLoops; ++loop) {
      const int64_t n = 1 + loop % 13;
      hits[loop] = std::vector<std::atomic<int>>(n);
      pool.Run(n, [&, loop](int64_t t, int) { hits[loop][t].fetch_add(1); });
      for (int64_t t = 0; t < n; ++t) ASSERT_EQ(hits[loop][t].load(), 1) << "loop " << loop << " task " << t;
    }
    // Let stragglers of the last loop wake; they must find nothing to run.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    for (int loop = 0; loop < kLoops; ++loop) {
      for (size_t t = 0; t < hits[loop].size(); ++t) EXPECT_EQ(hits[loop][t].load(), 1);
    }
  }
}

// ---- Guarded loops (ThreadPool::RunGuarded) ----
// A guarded task here: staging = input[task] * 3 + task (an int64), and
// publish adds one to publishes[task] and stores the staged value in out[task].
struct GuardedTestCtx {
  int64_t* out;
  std::atomic<int>* publishes;
  int64_t compute_us;  // each run sleeps this long (so workers claim tasks)
};

void GuardedTestCompute(const void* ctx, const uint8_t* input, int64_t task, uint8_t* staging) {
  GuardedTestCtx c;
  std::memcpy(&c, ctx, sizeof c);
  if (c.compute_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(c.compute_us));
  int64_t v;
  std::memcpy(&v, input + task * 8, 8);
  v = v * 3 + task;
  std::memcpy(staging, &v, 8);
}

void GuardedTestPublish(const void* ctx, int64_t task, const uint8_t* staging) {
  GuardedTestCtx c;
  std::memcpy(&c, ctx, sizeof c);
  c.publishes[task].fetch_add(1);
  std::memcpy(&c.out[task], staging, 8);
}

struct GuardedTestLoop {
  std::vector<int64_t> input, out;
  std::vector<std::atomic<int>> publishes;
  GuardedTestCtx ctx;
  ThreadPool::InputPart part;
  ThreadPool::GuardedLoop loop;
  GuardedTestLoop(int64_t n, int64_t salt, int64_t compute_us, size_t staging_bytes = 8)
      : input(n), out(n, -1), publishes(n) {
    for (int64_t t = 0; t < n; ++t) input[t] = salt * 1000 + t;
    ctx = {out.data(), publishes.data(), compute_us};
    part = {input.data(), static_cast<size_t>(n) * 8, 0};
    loop.compute = GuardedTestCompute;
    loop.publish = GuardedTestPublish;
    loop.ctx = &ctx;
    loop.ctx_bytes = sizeof ctx;
    loop.input = std::span<const ThreadPool::InputPart>(&part, 1);
    loop.input_bytes = part.bytes;
    loop.staging_bytes = staging_bytes;
    loop.num_tasks = n;
  }
  void ExpectDone(const std::string& what) const {
    for (size_t t = 0; t < out.size(); ++t) {
      EXPECT_EQ(out[t], input[t] * 3 + static_cast<int64_t>(t)) << what << " task " << t;
      EXPECT_EQ(publishes[t].load(), 1) << what << " task " << t;
    }
  }
};

TEST(ThreadPool, GuardedLoopsAreOffUnlessEnabled) {
  ThreadPool pool(2);
  GuardedTestLoop l(8, 1, 0);
  EXPECT_FALSE(pool.backup_execution());
  EXPECT_FALSE(pool.RunGuarded(l.loop));
  for (int64_t t = 0; t < 8; ++t) EXPECT_EQ(l.publishes[t].load(), 0);
  ThreadPool single(1);
  single.SetBackupExecution(true);
  EXPECT_FALSE(single.backup_execution());
  EXPECT_FALSE(single.RunGuarded(l.loop));
}

TEST(ThreadPool, GuardedLoopsPublishEveryTaskOnce) {
  for (int threads : {2, 3, 5}) {
    ThreadPool pool(threads);
    pool.SetBackupExecution(true);
    // Random delays inside workers' tasks: some are redone by the caller.
    std::atomic<uint32_t> rng{99};
    pool.SetGuardedTaskHookForTest([&](int, int64_t) {
      const uint32_t r = rng.fetch_add(2654435761u) >> 16;
      if (r % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(r % 400));
    });
    // The largest loop first: later ones then never need larger buffers (which
    // the pool refuses to grow while a late run is in progress).
    for (int i = 16; i < 216; ++i) {
      GuardedTestLoop l(1 + i % 17, i, i % 3 == 0 ? 20 : 0);
      ASSERT_TRUE(pool.RunGuarded(l.loop));
      l.ExpectDone("threads " + std::to_string(threads) + " loop " + std::to_string(i));
      if (::testing::Test::HasFailure()) return;
    }
    pool.WaitForGuardedTasks();  // late runs read the loops' memory: let them end first
  }
}

// A worker held inside its task (as a neighbouring process would preempt it)
// does not hold up the loop: the caller redoes the task. When the worker
// resumes, its late result is discarded, and while its run is in progress
// the pool does not grow the buffers it uses (that loop falls back).
TEST(ThreadPool, GuardedLoopRedoesAHeldWorkersTask) {
  ThreadPool pool(2);
  pool.SetBackupExecution(true);
  std::mutex m;
  std::condition_variable cv;
  bool released = false;
  std::atomic<bool> held{false};
  pool.SetGuardedTaskHookForTest([&](int, int64_t) {
    if (held.exchange(true)) return;  // hold the first run only
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return released; });
  });
  // Tasks take 1 ms each, so the worker claims one within the first loops.
  std::vector<std::unique_ptr<GuardedTestLoop>> loops;
  bool returned = true;
  for (int i = 0; i < 50 && !held.load(); ++i) {
    loops.push_back(std::make_unique<GuardedTestLoop>(8, i, 1000));
    auto run = std::async(std::launch::async, [&] { return pool.RunGuarded(loops.back()->loop); });
    if (run.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      returned = false;
      break;
    }
    EXPECT_TRUE(run.get());
  }
  ASSERT_TRUE(held.load()) << "the worker never claimed a task";
  EXPECT_TRUE(returned) << "RunGuarded waited for the held worker";
  EXPECT_GE(pool.backup_runs(), 1);
  for (const auto& l : loops) l->ExpectDone("before release");
  // The held run is still in progress: a loop that needs larger buffers is refused.
  GuardedTestLoop big(8, 77, 0, /*staging_bytes=*/1 << 20);
  EXPECT_FALSE(pool.RunGuarded(big.loop));
  // Overwrite the results, release the worker, let its run end: nothing is republished.
  for (auto& l : loops) std::fill(l->out.begin(), l->out.end(), -7);
  {
    std::lock_guard<std::mutex> lock(m);
    released = true;
  }
  cv.notify_all();
  pool.WaitForGuardedTasks();
  for (const auto& l : loops) {
    for (size_t t = 0; t < l->out.size(); ++t) {
      EXPECT_EQ(l->out[t], -7) << "a late run published task " << t;
      EXPECT_EQ(l->publishes[t].load(), 1);
    }
  }
  EXPECT_TRUE(pool.RunGuarded(big.loop));
  big.ExpectDone("after release");
  // Ordinary loops still work beside guarded ones.
  std::atomic<int64_t> sum{0};
  pool.Run(10, [&](int64_t t, int) { sum.fetch_add(t); });
  EXPECT_EQ(sum.load(), 45);
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
