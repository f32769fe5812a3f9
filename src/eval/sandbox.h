// Runs an untrusted program under bubblewrap (Debian's `bwrap`), failing
// closed: when the sandbox cannot be set up the run is an error, never an
// unsandboxed run. Each run gets
//   - new user, pid, network, IPC, UTS and cgroup namespaces (no network at
//     all: only a down loopback), no capabilities, no new privileges, further
//     user namespaces disabled;
//   - a read-only root holding only /usr (and its /bin, /lib, /lib64 links),
//     a fresh /proc and minimal /dev, an empty private /tmp (tmpfs of at most
//     `file_bytes`, the working directory) and the caller's files, read-only,
//     under /sandbox (copied in from memory: no file is written on the host);
//   - rlimits: CPU seconds, address space, file size, no core dumps, open
//     files, and processes. RLIMIT_NPROC counts per user, so when skipkv runs
//     as root each slot runs as its own unused uid (kernel accounting is per
//     uid, and root itself is exempt from the limit); otherwise the program's
//     own uid and the limit is applied inside the namespace by the harness;
//   - stdout and stderr capped (the run is killed past the cap), a wall-clock
//     limit after which bwrap's process group is killed; the namespace's init
//     dies with bwrap (--die-with-parent), which kills every process inside.
//     As root, a run ends only when no process of its uid remains (stragglers
//     are killed), so nothing outlives a run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace skipkv::eval {

struct SandboxLimits {
  double wall_seconds = 6;              // wall clock, then the whole sandbox is killed
  int cpu_seconds = 0;                  // RLIMIT_CPU; 0 = ceil(wall_seconds) + 1
  int64_t memory_bytes = int64_t{4} << 30;  // RLIMIT_AS of every process inside
  int processes = 32;                   // RLIMIT_NPROC (processes + threads of the sandbox's uid)
  int64_t file_bytes = int64_t{64} << 20;   // RLIMIT_FSIZE and the size of /tmp
  int64_t output_bytes = int64_t{64} << 20; // stdout + stderr + side channel
};

struct SandboxFile {
  std::string name;  // file name under /sandbox
  std::string content;
};

struct SandboxResult {
  enum class End { kExited, kSignaled, kWallTimeout, kOutputLimit };
  End end = End::kExited;
  int exit_code = 0;  // kExited
  int signal = 0;     // kSignaled
  std::string out, err;
  std::string side;  // what the program wrote on fd 3 (the grading harness's channel)
  double wall_seconds = 0;
};

class Sandbox {
 public:
  // `slots`: how many runs may be in flight at once (each Run names its slot).
  // Checks that bwrap and /usr/bin/python3 exist; SelfCheck runs a program.
  static StatusOr<Sandbox> Create(int slots);

  // Runs argv (argv[0] an absolute path inside the sandbox, e.g.
  // /usr/bin/python3) with `stdin_data` on stdin. Not thread-safe per slot;
  // different slots may run concurrently. Errors: the sandbox could not be
  // set up (bwrap failed before the program started: its message is in the
  // status), or a host-side failure (pipes, fork).
  StatusOr<SandboxResult> Run(int slot, const std::vector<SandboxFile>& files, const std::vector<std::string>& argv,
                              const std::string& stdin_data, const SandboxLimits& limits) const;

  // Runs `python3 -c` with a marker program in slot 0 and checks the marker;
  // the error says what failed (e.g. user namespaces refused).
  Status SelfCheck() const;

  int slots() const { return slots_; }
  // The uid runs of `slot` use (root: a dedicated unused uid per process and
  // slot; otherwise the caller's uid).
  uint32_t SlotUid(int slot) const;
  bool dedicated_uids() const { return as_root_; }

  static constexpr const char* kBwrap = "/usr/bin/bwrap";
  static constexpr const char* kPython = "/usr/bin/python3";

 private:
  Sandbox(int slots, bool as_root, uint32_t uid_base) : slots_(slots), as_root_(as_root), uid_base_(uid_base) {}
  int slots_ = 1;
  bool as_root_ = false;
  uint32_t uid_base_ = 0;
};

// pids of live processes (zombies excluded) whose real uid is `uid` (scans /proc).
std::vector<int> ProcessesOfUid(uint32_t uid);

}  // namespace skipkv::eval
