// ThreadPool: the workers and the hand-off of one parallel loop at a time; see thread_pool.h.
#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <memory>

namespace skipkv {

namespace {
int HardwareThreads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// One step of a busy wait: a yield, not a pause. Measured with a neighbour
// (`yes`) on one of two cores, yielding spins decoded at 18.6-20.3 tokens/s
// against 15.5-18.0 for pause spins, and the same quiet (BENCHMARKS.md,
// "Weights in huge pages; the pool under contention"): a spinning thread
// that yields lets the scheduler run whatever else is ready on its core.
inline void SpinStep() { std::this_thread::yield(); }
}  // namespace

int MaxThreads() { return kMaxThreadsPerCore * HardwareThreads(); }

StatusOr<int> ResolveThreadCount(int64_t requested, const std::string& what) {
  if (requested == 0) return HardwareThreads();
  if (requested < 0 || requested > MaxThreads()) {
    return InvalidArgument(what + " = " + std::to_string(requested) + " is outside [1, " +
                           std::to_string(MaxThreads()) + "] (" + std::to_string(kMaxThreadsPerCore) + " x the " +
                           std::to_string(HardwareThreads()) + " hardware threads; 0 = all of them)");
  }
  return static_cast<int>(requested);
}

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  num_threads_ = num_threads;
  for (int w = 1; w < num_threads_; ++w) threads_.emplace_back([this, w] { WorkerLoop(w); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    seq_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::DrainTasks(uint64_t seq, int worker) {
  const uint64_t tag = (seq & kCountMask) << kSeqShift;
  uint64_t c = claim_.load(std::memory_order_acquire);
  for (;;) {
    if ((c & ~kCountMask) != tag || (c & kCountMask) == 0) return;  // another loop's, or all claimed
    if (!claim_.compare_exchange_weak(c, c - 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // The task is ours, so its loop cannot end before we finish it: fn_ and
    // num_tasks_ are that loop's.
    const int64_t task = num_tasks_ - static_cast<int64_t>(c & kCountMask);
    (*fn_)(task, worker);
    // seq_cst on both sides of the caller_sleeping_ hand-off (see WaitForTasks):
    // a finisher that reads false is ordered before the caller's own check.
    if (unfinished_.fetch_sub(1, std::memory_order_seq_cst) == 1 && worker != 0 &&
        caller_sleeping_.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_all();
    }
    c = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::Run(int64_t num_tasks, const TaskFn& fn) {
  if (num_tasks <= 0) return;
  if (num_threads_ == 1 || num_tasks == 1) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  // One loop takes at most kMaxTasksPerLoop (2^31) tasks; larger counts run as several loops.
  for (int64_t base = 0; base < num_tasks; base += kMaxTasksPerLoop) {
    const int64_t n = std::min(kMaxTasksPerLoop, num_tasks - base);
    if (base == 0 && n == num_tasks) {
      RunLoop(n, fn);
    } else {
      RunLoop(n, [&](int64_t t, int worker) { fn(base + t, worker); });
    }
  }
}

void ThreadPool::RunLoop(int64_t num_tasks, const TaskFn& fn) {
  fn_ = &fn;
  num_tasks_ = num_tasks;
  unfinished_.store(num_tasks, std::memory_order_relaxed);
  const uint64_t seq = seq_.load(std::memory_order_relaxed) + 1;
  // Publish the tasks, then the sequence number the workers wait on.
  claim_.store(((seq & kCountMask) << kSeqShift) | static_cast<uint64_t>(num_tasks), std::memory_order_release);
  seq_.store(seq, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    // A worker that checked seq_ under the lock before this store is waiting
    // by the time we hold the lock, so the notification reaches it.
    { std::lock_guard<std::mutex> lock(mu_); }
    wake_.notify_all();
  }
  DrainTasks(seq, 0);
  WaitForTasks();
}

void ThreadPool::WaitForTasks() {
  // Every task is claimed; wait for the ones other workers are still running.
  // Spin for at most kCallerSpin, then sleep. The bound is in time, not
  // iterations: on a core shared with another process a worker can be
  // preempted in the middle of its task, and a caller that keeps spinning
  // keeps its own core busy, so the scheduler cannot move the preempted worker
  // there. Sleeping frees the core at once. On a quiet machine the workers
  // finish within a few microseconds of the caller.
  constexpr auto kCallerSpin = std::chrono::microseconds(200);
  if (unfinished_.load(std::memory_order_acquire) == 0) return;
  const auto spin_end = std::chrono::steady_clock::now() + kCallerSpin;
  for (int spin = 0; unfinished_.load(std::memory_order_acquire) > 0; ++spin) {
    if ((spin & 7) == 0 && std::chrono::steady_clock::now() >= spin_end) break;
    SpinStep();
  }
  if (unfinished_.load(std::memory_order_acquire) == 0) return;
  std::unique_lock<std::mutex> lock(mu_);
  caller_sleeping_.store(true, std::memory_order_seq_cst);
  done_cv_.wait(lock, [&] { return unfinished_.load(std::memory_order_seq_cst) == 0; });
  caller_sleeping_.store(false, std::memory_order_relaxed);
}

void ThreadPool::WorkerLoop(int worker) {
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly for the next loop (bounded in time, like the caller's
    // wait), then sleep.
    constexpr auto kWorkerSpin = std::chrono::microseconds(200);
    if (seq_.load(std::memory_order_acquire) == seen) {
      const auto spin_end = std::chrono::steady_clock::now() + kWorkerSpin;
      for (int spin = 0; seq_.load(std::memory_order_acquire) == seen; ++spin) {
        if ((spin & 7) == 0 && std::chrono::steady_clock::now() >= spin_end) break;
        SpinStep();
      }
    }
    if (seq_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      wake_.wait(lock, [&] { return seq_.load(std::memory_order_seq_cst) != seen; });
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = seq_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;  // set before the destructor's seq_ bump
    if (wake_hook_) wake_hook_(worker);
    DrainTasks(seen, worker);
  }
}

namespace {
std::unique_ptr<ThreadPool>& DefaultPoolStorage() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
}  // namespace

void SetDefaultThreads(int num_threads) { DefaultPoolStorage() = std::make_unique<ThreadPool>(num_threads); }

ThreadPool& DefaultThreadPool() {
  auto& pool = DefaultPoolStorage();
  if (!pool) pool = std::make_unique<ThreadPool>(1);
  return *pool;
}

}  // namespace skipkv
