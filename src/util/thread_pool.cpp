// ThreadPool: the workers and the hand-off of one parallel loop at a time; see thread_pool.h.
#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <memory>

namespace skipkv {

namespace {
int HardwareThreads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }
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
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::DrainTasks(int worker) {
  for (;;) {
    const int64_t t = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (t >= num_tasks_) break;
    (*fn_)(t, worker);
  }
}

void ThreadPool::Run(int64_t num_tasks, const TaskFn& fn) {
  if (num_tasks <= 0) return;
  if (num_threads_ == 1 || num_tasks == 1) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    num_tasks_ = num_tasks;
    next_task_.store(0);
    active_.store(num_threads_ - 1);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  DrainTasks(0);
  // Wait for the workers to leave DrainTasks: spin for at most kCallerSpin,
  // then sleep. The bound is in time, not iterations: on a core shared with
  // another process a worker can be preempted in the middle of its task, and
  // a caller that keeps spinning keeps its own core busy, so the scheduler
  // cannot move the preempted worker there (a count of 20,000 yields spun
  // for milliseconds; decode with `yes` on the other core ran at 8-11 tokens/s
  // instead of 14-15, BENCHMARKS.md). Sleeping frees the core at once. On a
  // quiet machine the workers finish within a few microseconds of the caller.
  constexpr auto kCallerSpin = std::chrono::microseconds(200);
  const auto spin_end = std::chrono::steady_clock::now() + kCallerSpin;
  for (int spin = 0; active_.load(std::memory_order_acquire) > 0; ++spin) {
    if ((spin & 15) == 0 && std::chrono::steady_clock::now() >= spin_end) break;
    std::this_thread::yield();
  }
  if (active_.load(std::memory_order_acquire) > 0) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return active_.load() == 0; });
  }
  fn_ = nullptr;
}

void ThreadPool::WorkerLoop(int worker) {
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly for the next loop, then sleep.
    for (int spin = 0; spin < 2000 && generation_.load(std::memory_order_acquire) == seen; ++spin) {
      std::this_thread::yield();
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      seen = generation_.load();
      if (stop_) return;
    }
    DrainTasks(worker);
    if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_all();
    }
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
