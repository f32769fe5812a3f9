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
//
// A worker preempted in the middle of a task still stalls an ordinary loop
// for the rest of its time slice. Guarded loops (RunGuarded, below) remove
// that stall too: the caller runs the unfinished task again itself.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <mutex>
#include <thread>
#include <vector>

#include "util/aligned_buffer.h"
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

  // ---- Guarded loops: backup execution of a preempted worker's task ----
  // On a core shared with another process a worker can be preempted in the
  // middle of a task and stay off its core for a scheduler slice
  // (milliseconds), and Run waits for it. RunGuarded does not: once the
  // caller has run out of tasks to claim and has waited longer than twice its
  // own longest task of the loop (at least kBackupMinWait), it runs every
  // unfinished task again itself. The run of a task that finishes first
  // publishes its result; the other is discarded. Hence the contract:
  //  - compute(ctx, input, task, staging) writes only `staging` (the running
  //    worker's private buffer of staging_bytes). It reads `ctx` (a private
  //    copy of the loop's ctx_bytes), `input` (the pool's copy of the input
  //    parts, each at its offset) and memory reached through pointers in ctx.
  //    It is deterministic in those, so both runs of a task give the same
  //    bytes, and it must not fault on arbitrary input bytes (see below).
  //  - publish(ctx, task, staging) copies a finished task's result out. It
  //    runs exactly once per task, before RunGuarded returns.
  // A losing run (a preempted worker whose task was redone) may still be
  // computing after RunGuarded has returned. The pool keeps its input copy
  // unchanged until it ends (the copies rotate through num_threads() + 1
  // slots, and a later loop writes only a slot no run is reading), but memory
  // reached through ctx must stay mapped until WaitForGuardedTasks() returns
  // or the pool is destroyed: destroy the pool before the weights it
  // multiplies. Such memory may change meanwhile (the late result is
  // discarded), and compute must not fault on any contents of it.
  // Returns false, having run nothing, when guarded loops are off (the
  // default; see SetBackupExecution), the pool has one thread, num_tasks
  // exceeds kMaxGuardedTasks, ctx_bytes exceeds kGuardedCtxBytes, or the
  // pool's buffers must grow while a losing run still uses them; the caller
  // then uses Run.
  struct InputPart {
    const void* data = nullptr;
    size_t bytes = 0;
    size_t offset = 0;  // where compute finds it in `input`
  };
  struct GuardedLoop {
    void (*compute)(const void* ctx, const uint8_t* input, int64_t task, uint8_t* staging) = nullptr;
    void (*publish)(const void* ctx, int64_t task, const uint8_t* staging) = nullptr;
    const void* ctx = nullptr;  // trivially copyable bytes
    size_t ctx_bytes = 0;
    std::span<const InputPart> input;
    size_t input_bytes = 0;  // >= every part's offset + bytes
    size_t staging_bytes = 0;
    int64_t num_tasks = 0;
  };
  static constexpr int64_t kMaxGuardedTasks = 4096;
  static constexpr size_t kGuardedCtxBytes = 512;
  static constexpr std::chrono::microseconds kBackupMinWait{50};
  bool RunGuarded(const GuardedLoop& loop);
  // Guarded loops are off by default because of the lifetime contract above;
  // an owner that destroys the pool before the memory its guarded tasks read
  // (Engine, ForwardBench) turns them on. Call between loops. With them on,
  // the pool also keeps its workers off the CPU the caller runs on (on Linux,
  // when the process may use at least as many CPUs as the pool has threads):
  // each loop compares the caller's CPU with the last one seen and, when it
  // moved, sets the workers' affinity to the other allowed CPUs. A worker on
  // the caller's CPU only takes time from the caller, which is always busy;
  // on a core shared with another process the caller, which no one can
  // replace, then keeps a core to itself and a worker shares the neighbour's.
  void SetBackupExecution(bool on) { backup_ = on; }
  bool backup_execution() const { return backup_ && num_threads_ > 1; }
  // Returns when no run of a guarded task is in progress (losing runs finish
  // within a scheduler slice of their worker being resumed).
  void WaitForGuardedTasks();
  // Test seam: called by a worker (not the caller) inside a guarded task,
  // after it has claimed it and before it computes, so a test can hold it the
  // way a preempting neighbour would. Set it before the first loop.
  void SetGuardedTaskHookForTest(std::function<void(int worker, int64_t task)> hook) {
    guarded_hook_ = std::move(hook);
  }
  // Tasks run again by the caller since construction (for tests and statistics).
  int64_t backup_runs() const { return backup_runs_.load(std::memory_order_relaxed); }

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
  // the high half, the number of tasks not yet claimed in bits 0-30. A
  // claim is a compare-exchange that takes one task only while the sequence
  // number still matches, so a late worker can never take (or read the
  // arguments of) another loop's task.
  // Bit 31 of the low half marks a guarded loop.
  static constexpr int kSeqShift = 32;
  static constexpr uint64_t kTagMask = ~((uint64_t{1} << kSeqShift) - 1);
  static constexpr uint64_t kGuardedBit = uint64_t{1} << 31;
  static constexpr uint64_t kCountMask = kGuardedBit - 1;
  static constexpr int64_t kMaxTasksPerLoop = int64_t{1} << 30;
  static constexpr uint64_t Tag(uint64_t seq) { return (seq & 0xffffffffu) << kSeqShift; }

  void RunLoop(int64_t num_tasks, const TaskFn& fn);
  void WorkerLoop(int worker);
  // Claims and runs tasks of loop `seq` until none is left.
  void DrainTasks(uint64_t seq, int worker);
  // A task of guarded loop `seq` claimed with `left` tasks unclaimed before the
  // claim. False: the loop had already ended (its spec was replaced).
  bool RunGuardedTask(uint64_t seq, uint64_t left, int worker);
  bool TryPublish(uint64_t seq, int64_t task);
  // Counts a finished task; the last one wakes a sleeping caller.
  void FinishTask(int worker);
  void WaitForTasks();
  void WaitWithBackup(uint64_t seq, const GuardedLoop& loop, const uint8_t* input);

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

  // The current guarded loop, a seqlock: spec_seq_ is the loop's sequence
  // number while spec_ holds it, 0 while the caller rewrites it. Header
  // words: compute, publish, num_tasks, input slot; then the ctx bytes.
  static constexpr int kSpecHeaderWords = 4;
  static constexpr int kSpecWords = kSpecHeaderWords + static_cast<int>(kGuardedCtxBytes / 8);
  std::atomic<uint64_t> spec_[kSpecWords] = {};
  std::atomic<uint64_t> spec_seq_{0};
  // Runs of guarded tasks in progress, losing ones included. The buffers below
  // are resized only while it is 0 (and the spec is invalid).
  std::atomic<int> guarded_running_{0};
  // Input copies, one per slot, and the runs reading each (see RunGuarded).
  std::vector<AlignedBuffer> inputs_;
  std::unique_ptr<std::atomic<int>[]> input_readers_;
  size_t input_bytes_ = 0;
  std::vector<AlignedBuffer> staging_;  // one per worker
  size_t staging_bytes_ = 0;
  // published_[task]: the sequence number of the last guarded loop whose
  // `task` has been published.
  std::unique_ptr<std::atomic<uint64_t>[]> published_;
  int64_t caller_longest_task_ns_ = 0;  // this guarded loop's, caller only
  bool backup_ = false;
  std::atomic<int64_t> backup_runs_{0};
  std::function<void(int worker, int64_t task)> guarded_hook_;
  // Keeping workers off the caller's CPU (see SetBackupExecution).
  void KeepWorkersOffCallerCpu();
  std::vector<int> allowed_cpus_;  // empty: not done
  int caller_cpu_ = -1;
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

}  // namespace skipkv
