// ThreadPool: a fixed set of workers that run one parallel loop at a time.
// Contract: Run(n, fn) calls fn(task, worker) exactly once for each task in
// [0, n) and returns when all have finished; `worker` is in [0, num_threads())
// and identifies per-worker scratch (one thread per id). The calling thread is
// worker 0. Which worker runs which task varies, so a deterministic kernel must
// make each task's result independent of the worker (fixed chunking, no
// cross-task reductions in arrival order).
//
// Run waits for the tasks, not for the workers: a worker that has not woken up
// by the time the others have claimed every task (preempted by a neighbouring
// process, still asleep) is not waited for, and claims nothing when it does
// wake, because each claim is tagged with the loop it belongs to. On a core
// shared with another process the loop then runs on the threads that are
// actually running, instead of stalling for a scheduler time slice each time.
// Workers spin briefly before sleeping, so the many small loops of a decode
// step do not pay a futex wake-up each.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <string>
#include <mutex>
#include <thread>
#include <vector>

#include "util/status.h"

namespace skipkv {

class ThreadPool {
 public:
  // num_threads <= 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(int num_threads = 1);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  using TaskFn = std::function<void(int64_t task, int worker)>;
  void Run(int64_t num_tasks, const TaskFn& fn);

  // Test seam: called by a worker (1 .. num_threads()-1) when it wakes for a
  // loop, before it claims any task, so a test can hold a worker back the
  // way a preempting neighbour would. Set it before the first Run.
  void SetWorkerWakeHookForTest(std::function<void(int worker)> hook) { wake_hook_ = std::move(hook); }

  // Splits [0, n) into ceil(n / grain) contiguous chunks (the split depends
  // only on n and grain) and calls fn(begin, end, worker) for each.
  template <typename Fn>
  void ParallelFor(int64_t n, int64_t grain, Fn&& fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    const int64_t chunks = (n + grain - 1) / grain;
    if (chunks == 1 || num_threads_ == 1) {
      for (int64_t c = 0; c < chunks; ++c) fn(c * grain, std::min(n, (c + 1) * grain), 0);
      return;
    }
    Run(chunks, [&](int64_t c, int worker) { fn(c * grain, std::min(n, (c + 1) * grain), worker); });
  }

 private:
  // One loop's tasks, in claim_: the loop's sequence number (low 32 bits) in
  // the high half, the number of tasks not yet claimed in the low half. A
  // claim is a compare-exchange that takes one task only while the sequence
  // number still matches, so a late worker can never take (or read the
  // arguments of) another loop's task.
  static constexpr int kSeqShift = 32;
  static constexpr uint64_t kCountMask = (uint64_t{1} << kSeqShift) - 1;
  static constexpr int64_t kMaxTasksPerLoop = int64_t{1} << 31;

  void RunLoop(int64_t num_tasks, const TaskFn& fn);
  void WorkerLoop(int worker);
  // Claims and runs tasks of loop `seq` until none is left.
  void DrainTasks(uint64_t seq, int worker);
  void WaitForTasks();

  int num_threads_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable wake_;     // workers: a new loop (seq_ changed) or stop_
  std::condition_variable done_cv_;  // the caller: unfinished_ reached 0
  // Written by Run before the loop is published (release on claim_), read by a
  // worker only after it has claimed a task of that loop.
  const TaskFn* fn_ = nullptr;
  int64_t num_tasks_ = 0;
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> unfinished_{0};  // tasks of the current loop not yet finished
  std::atomic<uint64_t> seq_{0};        // the current loop's sequence number
  std::atomic<int> sleepers_{0};        // workers blocked (or about to block) on wake_
  std::atomic<bool> caller_sleeping_{false};
  std::function<void(int worker)> wake_hook_;
  std::atomic<bool> stop_{false};
};

// Thread counts a user or a file may ask for: 0 (or the library's "<= 0")
// means all hardware threads; otherwise 1 .. MaxThreads(), a generous
// kMaxThreadsPerCore x the hardware threads. Callers validate with
// ResolveThreadCount before building a pool, so a request like 100000 is a
// clear InvalidArgument (naming `what`) instead of a failed thread spawn.
inline constexpr int kMaxThreadsPerCore = 8;
int MaxThreads();
// `requested` 0 -> all hardware threads; 1..MaxThreads() -> itself; else an error.
StatusOr<int> ResolveThreadCount(int64_t requested, const std::string& what);

// Convenience: a process-wide default pool sized by SetDefaultThreads().
void SetDefaultThreads(int num_threads);
ThreadPool& DefaultThreadPool();

}  // namespace skipkv
