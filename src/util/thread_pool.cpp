// ThreadPool: the workers and the hand-off of one parallel loop at a time; see thread_pool.h.
#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace skipkv {

namespace {
int HardwareThreads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// One step of a busy wait: a pause, not a yield. With backup execution (see
// RunGuarded) a worker sharing its core with another process should keep its
// share of that core: a yield hands the core to the neighbour for a whole
// time slice, and the worker missed most loops (BENCHMARKS.md, "The pool
// under contention, round 2"). A preempted worker no longer stalls a loop,
// so nothing is gained by yielding.
inline void SpinStep() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  std::this_thread::yield();
#endif
}
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
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) >= std::max(2, num_threads_)) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) allowed_cpus_.push_back(c);
    }
  }
#endif
}

void ThreadPool::KeepWorkersOffCallerCpu() {
#if defined(__linux__)
  if (allowed_cpus_.empty()) return;
  const int cpu = sched_getcpu();
  if (cpu < 0 || cpu == caller_cpu_) return;
  caller_cpu_ = cpu;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : allowed_cpus_) {
    if (c != cpu) CPU_SET(c, &set);
  }
  for (std::thread& t : threads_) pthread_setaffinity_np(t.native_handle(), sizeof set, &set);
#endif
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
  const uint64_t tag = Tag(seq);
  uint64_t c = claim_.load(std::memory_order_acquire);
  for (;;) {
    if ((c & kTagMask) != tag || (c & kCountMask) == 0) return;  // another loop's, or all claimed
    if (!claim_.compare_exchange_weak(c, c - 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    if ((c & kGuardedBit) != 0) {
      if (!RunGuardedTask(seq, c & kCountMask, worker)) return;
    } else {
      // The task is ours, so its loop cannot end before we finish it: fn_ and
      // num_tasks_ are that loop's.
      const int64_t task = num_tasks_ - static_cast<int64_t>(c & kCountMask);
      (*fn_)(task, worker);
      FinishTask(worker);
    }
    c = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::FinishTask(int worker) {
  // seq_cst on both sides of the caller_sleeping_ hand-off (see WaitForTasks):
  // a finisher that reads false is ordered before the caller's own check.
  if (unfinished_.fetch_sub(1, std::memory_order_seq_cst) == 1 && worker != 0 &&
      caller_sleeping_.load(std::memory_order_seq_cst)) {
    std::lock_guard<std::mutex> lock(mu_);
    done_cv_.notify_all();
  }
}

void ThreadPool::Run(int64_t num_tasks, const TaskFn& fn) {
  if (num_tasks <= 0) return;
  if (num_threads_ == 1 || num_tasks == 1) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  // One loop takes at most kMaxTasksPerLoop (2^30) tasks; larger counts run as several loops.
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
  if (backup_) KeepWorkersOffCallerCpu();
  fn_ = &fn;
  num_tasks_ = num_tasks;
  unfinished_.store(num_tasks, std::memory_order_relaxed);
  const uint64_t seq = seq_.load(std::memory_order_relaxed) + 1;
  // Publish the tasks, then the sequence number the workers wait on.
  claim_.store(Tag(seq) | static_cast<uint64_t>(num_tasks), std::memory_order_release);
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

// ---- Guarded loops ----------------------------------------------------------

bool ThreadPool::RunGuarded(const GuardedLoop& loop) {
  if (!backup_execution() || loop.num_tasks < 1 || loop.num_tasks > kMaxGuardedTasks ||
      loop.ctx_bytes > kGuardedCtxBytes) {
    return false;
  }
  KeepWorkersOffCallerCpu();
  const uint64_t seq = seq_.load(std::memory_order_relaxed) + 1;
  // Invalidate the spec, then look for runs in progress (the Dekker pair of
  // RunGuardedTask's increment-then-check): a run that passes its check is
  // counted here, and one that is not counted fails its check.
  spec_seq_.store(0, std::memory_order_seq_cst);
  const bool grow = input_bytes_ < loop.input_bytes || staging_bytes_ < loop.staging_bytes || !published_;
  if (grow) {
    if (guarded_running_.load(std::memory_order_seq_cst) != 0) return false;
    if (input_bytes_ < loop.input_bytes) {
      input_bytes_ = std::max(loop.input_bytes, input_bytes_ * 3 / 2);
      inputs_.resize(static_cast<size_t>(num_threads_) + 1);
      for (AlignedBuffer& b : inputs_) b.Resize(input_bytes_);
    }
    if (staging_bytes_ < loop.staging_bytes) {
      staging_bytes_ = std::max(loop.staging_bytes, staging_bytes_ * 3 / 2);
      staging_.resize(static_cast<size_t>(num_threads_));
      for (AlignedBuffer& b : staging_) b.Resize(staging_bytes_);
    }
    if (!published_) {
      published_ = std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(kMaxGuardedTasks));
      for (int64_t t = 0; t < kMaxGuardedTasks; ++t) published_[t].store(0, std::memory_order_relaxed);
      input_readers_ = std::make_unique<std::atomic<int>[]>(static_cast<size_t>(num_threads_) + 1);
      for (int i = 0; i <= num_threads_; ++i) input_readers_[i].store(0, std::memory_order_relaxed);
    }
  }
  // An input slot no run reads. Each late run holds at most one slot and at
  // most num_threads() - 1 workers run late, so one of the num_threads() + 1
  // is free. A run that is not counted here fails its check of the spec,
  // which is invalid now, before it reads its slot (RunGuardedTask).
  int slot = 0;
  while (slot <= num_threads_ && input_readers_[slot].load(std::memory_order_seq_cst) != 0) ++slot;
  if (slot > num_threads_) return false;
  uint8_t* input = inputs_[static_cast<size_t>(slot)].as<uint8_t>();
  for (const InputPart& part : loop.input) std::memcpy(input + part.offset, part.data, part.bytes);
  std::atomic_thread_fence(std::memory_order_release);
  spec_[0].store(reinterpret_cast<uintptr_t>(loop.compute), std::memory_order_relaxed);
  spec_[1].store(reinterpret_cast<uintptr_t>(loop.publish), std::memory_order_relaxed);
  spec_[2].store(static_cast<uint64_t>(loop.num_tasks), std::memory_order_relaxed);
  spec_[3].store(static_cast<uint64_t>(slot), std::memory_order_relaxed);
  uint64_t words[kGuardedCtxBytes / 8] = {};
  std::memcpy(words, loop.ctx, loop.ctx_bytes);
  for (size_t i = 0; i < kGuardedCtxBytes / 8; ++i) spec_[kSpecHeaderWords + i].store(words[i], std::memory_order_relaxed);
  spec_seq_.store(seq, std::memory_order_release);

  caller_longest_task_ns_ = 0;
  unfinished_.store(loop.num_tasks, std::memory_order_relaxed);
  claim_.store(Tag(seq) | kGuardedBit | static_cast<uint64_t>(loop.num_tasks),
               std::memory_order_release);
  seq_.store(seq, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }
    wake_.notify_all();
  }
  DrainTasks(seq, 0);
  WaitWithBackup(seq, loop, input);
  return true;
}

bool ThreadPool::RunGuardedTask(uint64_t seq, uint64_t left, int worker) {
  guarded_running_.fetch_add(1, std::memory_order_seq_cst);
  struct Leave {
    std::atomic<int>& running;
    ~Leave() { running.fetch_sub(1, std::memory_order_release); }
  } leave{guarded_running_};
  // Seqlock read of the spec: valid only if spec_seq_ is `seq` before and after.
  if (spec_seq_.load(std::memory_order_seq_cst) != seq) return false;
  uint64_t header[kSpecHeaderWords];
  uint64_t ctx[kGuardedCtxBytes / 8];
  for (int i = 0; i < kSpecHeaderWords; ++i) header[i] = spec_[i].load(std::memory_order_relaxed);
  for (size_t i = 0; i < kGuardedCtxBytes / 8; ++i) ctx[i] = spec_[kSpecHeaderWords + i].load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (spec_seq_.load(std::memory_order_relaxed) != seq) return false;
  const auto compute = reinterpret_cast<decltype(GuardedLoop::compute)>(static_cast<uintptr_t>(header[0]));
  const auto publish = reinterpret_cast<decltype(GuardedLoop::publish)>(static_cast<uintptr_t>(header[1]));
  const int64_t task = static_cast<int64_t>(header[2]) - static_cast<int64_t>(left);
  const size_t slot = static_cast<size_t>(header[3]);
  // Count ourselves as a reader of the slot, then check the spec again (the
  // Dekker pair of RunGuarded's slot choice): either the caller sees us and
  // leaves the slot alone, or we see the spec invalidated and read nothing.
  input_readers_[slot].fetch_add(1, std::memory_order_seq_cst);
  struct Unread {
    std::atomic<int>& readers;
    ~Unread() { readers.fetch_sub(1, std::memory_order_release); }
  } unread{input_readers_[slot]};
  if (spec_seq_.load(std::memory_order_seq_cst) != seq) return false;
  // Valid spec and our counted run: inputs_ and staging_ stay put, and our
  // slot unchanged, until we leave.
  uint8_t* staging = staging_[static_cast<size_t>(worker)].as<uint8_t>();
  if (worker == 0) {  // the caller times its tasks: WaitWithBackup's wait is twice the longest
    const auto start = std::chrono::steady_clock::now();
    compute(ctx, inputs_[slot].as<uint8_t>(), task, staging);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
    caller_longest_task_ns_ = std::max<int64_t>(caller_longest_task_ns_, ns.count());
  } else {
    if (guarded_hook_) guarded_hook_(worker, task);
    compute(ctx, inputs_[slot].as<uint8_t>(), task, staging);
  }
  if (TryPublish(seq, task)) {
    publish(ctx, task, staging);  // the loop waits for this task, so it is still live
    FinishTask(worker);
  }
  return true;
}

bool ThreadPool::TryPublish(uint64_t seq, int64_t task) {
  std::atomic<uint64_t>& p = published_[task];
  uint64_t v = p.load(std::memory_order_acquire);
  while (v < seq) {
    if (p.compare_exchange_weak(v, seq, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
  }
  return false;
}

void ThreadPool::WaitWithBackup(uint64_t seq, const GuardedLoop& loop, const uint8_t* input) {
  if (unfinished_.load(std::memory_order_acquire) == 0) return;
  // Tasks claimed by other workers are running. On a quiet machine they end
  // within about one task's time; a preempted worker's ends a time slice
  // later. Wait twice the caller's longest task, then run them here.
  const auto wait = std::max<std::chrono::nanoseconds>(kBackupMinWait,
                                                       std::chrono::nanoseconds(2 * caller_longest_task_ns_));
  const auto backup_at = std::chrono::steady_clock::now() + wait;
  for (int spin = 0; unfinished_.load(std::memory_order_acquire) > 0; ++spin) {
    if ((spin & 7) == 0 && std::chrono::steady_clock::now() >= backup_at) break;
    SpinStep();
  }
  if (unfinished_.load(std::memory_order_acquire) == 0) return;
  uint8_t* staging = staging_[0].as<uint8_t>();
  for (int64_t t = 0; t < loop.num_tasks && unfinished_.load(std::memory_order_acquire) > 0; ++t) {
    if (published_[t].load(std::memory_order_acquire) >= seq) continue;
    loop.compute(loop.ctx, input, t, staging);
    if (TryPublish(seq, t)) {
      backup_runs_.fetch_add(1, std::memory_order_relaxed);
      loop.publish(loop.ctx, t, staging);
      FinishTask(0);
    }
  }
  WaitForTasks();  // a run that won a publish may still be copying its result out
}

void ThreadPool::WaitForGuardedTasks() {
  while (guarded_running_.load(std::memory_order_acquire) != 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace skipkv
