#include "eval/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <thread>

namespace skipkv::eval {
namespace {

// Closes the file descriptors it holds on destruction.
struct Fds {
  std::vector<int> fds;
  ~Fds() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
  int Add(int fd) {
    fds.push_back(fd);
    return fd;
  }
  void Close(int& fd) {
    for (int& f : fds)
      if (f == fd) f = -1;
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

Status Errno(const std::string& what) { return Internal("sandbox: " + what + ": " + std::strerror(errno)); }

// A copy of `fd` numbered >= 1000 with close-on-exec, so that the child's
// dup2 onto 0..N never overwrites a source it still needs.
int HighCopy(int fd) { return ::fcntl(fd, F_DUPFD_CLOEXEC, 1000); }

}  // namespace

std::vector<int> ProcessesOfUid(uint32_t uid) {
  std::vector<int> pids;
  DIR* d = ::opendir("/proc");
  if (!d) return pids;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    std::ifstream st(std::string("/proc/") + e->d_name + "/status");
    std::string line;
    while (std::getline(st, line)) {
      // Zombies (exited, not yet reaped by their new parent) run nothing.
      if (line.rfind("State:", 0) == 0 && (line.find('Z') != std::string::npos || line.find('X') != std::string::npos))
        break;
      if (line.rfind("Uid:", 0) == 0) {
        if (std::strtoul(line.c_str() + 4, nullptr, 10) == uid) pids.push_back(static_cast<int>(pid));
        break;
      }
    }
  }
  ::closedir(d);
  return pids;
}

StatusOr<Sandbox> Sandbox::Create(int slots) {
  if (slots < 1 || slots > 64) return InvalidArgument("sandbox: slots (" + std::to_string(slots) + ") must be 1-64");
  if (::access(kBwrap, X_OK) != 0)
    return NotFound(std::string("sandbox: ") + kBwrap + " is missing (Debian package bubblewrap; scripts/setup.sh)");
  if (::access(kPython, X_OK) != 0)
    return NotFound(std::string("sandbox: ") + kPython + " is missing (Debian package python3; scripts/setup.sh)");
  const bool root = ::geteuid() == 0;
  // Per process and slot: 10^9 + pid * 64 + slot, far above any account.
  const uint32_t base = 1000000000u + static_cast<uint32_t>(::getpid()) * 64u;
  return Sandbox(slots, root, base);
}

uint32_t Sandbox::SlotUid(int slot) const {
  return as_root_ ? uid_base_ + static_cast<uint32_t>(slot) : static_cast<uint32_t>(::getuid());
}

StatusOr<SandboxResult> Sandbox::Run(int slot, const std::vector<SandboxFile>& files,
                                     const std::vector<std::string>& argv, const std::string& stdin_data,
                                     const SandboxLimits& lim) const {
  if (slot < 0 || slot >= slots_) return InvalidArgument("sandbox: slot " + std::to_string(slot) + " out of range");
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/')
    return InvalidArgument("sandbox: argv[0] must be an absolute path inside the sandbox");
  if (files.size() > 16) return InvalidArgument("sandbox: at most 16 files");
  const uint32_t uid = SlotUid(slot);
  Fds own;

  // The files, from memory (memfd) through bwrap's --ro-bind-data.
  std::vector<int> file_fds;
  for (const auto& f : files) {
    if (f.name.empty() || f.name.find('/') != std::string::npos || f.name[0] == '.')
      return InvalidArgument("sandbox: bad file name '" + f.name + "'");
    const int fd = own.Add(static_cast<int>(::syscall(SYS_memfd_create, f.name.c_str(), MFD_CLOEXEC)));
    if (fd < 0) return Errno("memfd_create");
    size_t done = 0;
    while (done < f.content.size()) {
      const ssize_t n = ::write(fd, f.content.data() + done, f.content.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Errno("write memfd");
      }
      done += static_cast<size_t>(n);
    }
    if (::lseek(fd, 0, SEEK_SET) != 0) return Errno("lseek memfd");
    file_fds.push_back(own.Add(HighCopy(fd)));
  }
  int in_p[2], out_p[2], err_p[2], side_p[2];
  for (int* p : {in_p, out_p, err_p, side_p}) {
    if (::pipe2(p, O_CLOEXEC) != 0) return Errno("pipe");
    own.Add(p[0]);
    own.Add(p[1]);
  }
  // Child-side ends, renumbered high.
  int c_in = own.Add(HighCopy(in_p[0])), c_out = own.Add(HighCopy(out_p[1])),
            c_err = own.Add(HighCopy(err_p[1])), c_side = own.Add(HighCopy(side_p[1]));
  if (c_in < 0 || c_out < 0 || c_err < 0 || c_side < 0) return Errno("fcntl");
  for (int fd : file_fds)
    if (fd < 0) return Errno("fcntl");
  own.Close(in_p[0]);
  own.Close(out_p[1]);
  own.Close(err_p[1]);
  own.Close(side_p[1]);

  // bwrap's command line; fds in the child: 0-2 stdio, 3 side channel, 4.. files.
  std::vector<std::string> a = {kBwrap,
                                "--unshare-all",
                                "--unshare-user",
                                "--disable-userns",
                                "--die-with-parent",
                                "--new-session",
                                "--cap-drop",
                                "ALL",
                                "--hostname",
                                "sandbox",
                                "--ro-bind",
                                "/usr",
                                "/usr",
                                "--symlink",
                                "usr/bin",
                                "/bin",
                                "--symlink",
                                "usr/lib",
                                "/lib",
                                "--symlink",
                                "usr/lib64",
                                "/lib64",
                                "--symlink",
                                "usr/sbin",
                                "/sbin",
                                "--proc",
                                "/proc",
                                "--dev",
                                "/dev",
                                "--size",
                                std::to_string(lim.file_bytes),
                                "--tmpfs",
                                "/tmp",
                                "--dir",
                                "/sandbox"};
  for (size_t i = 0; i < files.size(); ++i) {
    a.insert(a.end(), {"--perms", "0444", "--ro-bind-data", std::to_string(4 + i), "/sandbox/" + files[i].name});
  }
  a.insert(a.end(), {"--remount-ro", "/", "--chdir", "/tmp", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin",
                     "--setenv", "HOME", "/tmp", "--setenv", "LANG", "C.UTF-8", "--setenv", "PYTHONUTF8", "1",
                     "--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--setenv", "PYTHONHASHSEED", "0", "--"});
  a.insert(a.end(), argv.begin(), argv.end());
  std::vector<char*> cargv;
  for (auto& s : a) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  char* envp[] = {nullptr};
  const int cpu = lim.cpu_seconds > 0 ? lim.cpu_seconds : static_cast<int>(std::ceil(lim.wall_seconds)) + 1;
  const int nfiles = static_cast<int>(files.size());
  const bool as_root = as_root_;
  // Processes: the program's plus bwrap's own two (monitor and namespace init).
  const rlim_t nproc = static_cast<rlim_t>(lim.processes) + 2;

  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) return Errno("fork");
  if (pid == 0) {
    // Child: async-signal-safe calls only (the parent may have threads).
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    if (::dup2(c_in, 0) < 0 || ::dup2(c_out, 1) < 0 || ::dup2(c_err, 2) < 0 || ::dup2(c_side, 3) < 0) ::_exit(126);
    for (int i = 0; i < nfiles; ++i)
      if (::dup2(file_fds[i], 4 + i) < 0) ::_exit(126);
    ::syscall(SYS_close_range, 4 + nfiles, ~0U, 0);
    const auto set = [](int res, rlim_t v) {
      rlimit r{v, v};
      return ::setrlimit(res, &r) == 0;
    };
    // CPU: SIGXCPU at the soft limit, SIGKILL one second later (at an equal
    // hard limit the kernel would send SIGKILL first).
    const rlimit cpu_limit{static_cast<rlim_t>(cpu), static_cast<rlim_t>(cpu) + 1};
    if (::setrlimit(RLIMIT_CPU, &cpu_limit) != 0 || !set(RLIMIT_AS, static_cast<rlim_t>(lim.memory_bytes)) ||
        !set(RLIMIT_FSIZE, static_cast<rlim_t>(lim.file_bytes)) || !set(RLIMIT_CORE, 0) ||
        !set(RLIMIT_NOFILE, 256))
      ::_exit(126);
    if (as_root) {
      if (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0)
        ::_exit(126);
      if (!set(RLIMIT_NPROC, nproc)) ::_exit(126);
    }
    // After the uid change (which clears it): bwrap dies with this thread.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::execve(kBwrap, cargv.data(), envp);
    ::_exit(127);
  }
  own.Close(c_in);
  own.Close(c_out);
  own.Close(c_err);
  own.Close(c_side);
  for (int& fd : file_fds) own.Close(fd);

  SandboxResult r;
  int to_child = in_p[1];
  ::fcntl(to_child, F_SETFL, O_NONBLOCK);
  size_t written = 0;
  if (stdin_data.empty()) own.Close(to_child);
  struct Src {
    int fd;
    std::string* into;
  };
  std::vector<Src> srcs = {{out_p[0], &r.out}, {err_p[0], &r.err}, {side_p[0], &r.side}};
  for (auto& s : srcs) ::fcntl(s.fd, F_SETFL, O_NONBLOCK);
  size_t total = 0;
  bool reaped = false, killed = false;
  int status = 0;
  const auto deadline = start + std::chrono::duration<double>(lim.wall_seconds);
  auto kill_all = [&] {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
    killed = true;
  };
  char buf[1 << 16];
  auto drain = [&](Src& s) {
    while (s.fd >= 0) {
      const ssize_t n = ::read(s.fd, buf, sizeof buf);
      if (n > 0) {
        total += static_cast<size_t>(n);
        if (total > static_cast<size_t>(lim.output_bytes)) {
          if (!killed) {
            kill_all();
            r.end = SandboxResult::End::kOutputLimit;
          }
          return;  // stop collecting; keep what fits
        }
        s.into->append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) {
        own.Close(s.fd);
        return;
      }
      if (errno == EINTR) continue;
      return;  // EAGAIN
    }
  };
  while (!reaped) {
    std::vector<pollfd> pf;
    for (auto& s : srcs)
      if (s.fd >= 0) pf.push_back({s.fd, POLLIN, 0});
    if (to_child >= 0) pf.push_back({to_child, POLLOUT, 0});
    const auto now = std::chrono::steady_clock::now();
    if (!killed && now >= deadline) {
      kill_all();
      r.end = SandboxResult::End::kWallTimeout;
    }
    int wait_ms = 20;
    if (!killed) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
      wait_ms = static_cast<int>(std::min<int64_t>(wait_ms, std::max<int64_t>(left, 1)));
    }
    if (!pf.empty()) {
      ::poll(pf.data(), pf.size(), wait_ms);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    }
    for (auto& s : srcs) drain(s);
    if (to_child >= 0) {
      while (written < stdin_data.size()) {
        const ssize_t n = ::write(to_child, stdin_data.data() + written, stdin_data.size() - written);
        if (n > 0) {
          written += static_cast<size_t>(n);
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) break;
        written = stdin_data.size();  // EPIPE: the program stopped reading
      }
      if (written >= stdin_data.size()) own.Close(to_child);
    }
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) reaped = true;
  }
  // Whatever is still buffered in the pipes (writers may linger for a moment).
  for (auto& s : srcs) drain(s);
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (as_root_) {
    // The namespace's processes die with bwrap; wait for them (and kill any
    // that are still there), so that the next run of this slot starts clean.
    for (int i = 0; i < 400; ++i) {
      const auto left = ProcessesOfUid(uid);
      if (left.empty()) break;
      for (int p : left) ::kill(p, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (!killed) {
    if (WIFSIGNALED(status)) {
      r.end = SandboxResult::End::kSignaled;
      r.signal = WTERMSIG(status);
    } else {
      const int code = WEXITSTATUS(status);
      // bwrap reports a command killed by signal s as exit 128 + s.
      if (code > 128 && code < 128 + 65) {
        r.end = SandboxResult::End::kSignaled;
        r.signal = code - 128;
      } else {
        r.end = SandboxResult::End::kExited;
        r.exit_code = code;
      }
      if (code == 1 && r.err.rfind("bwrap: ", 0) == 0) {
        const std::string msg = r.err.substr(0, r.err.find('\n'));
        return Internal("sandbox: bubblewrap could not set up the sandbox: " + msg);
      }
    }
  }
  return r;
}

Status Sandbox::SelfCheck() const {
  SandboxLimits lim;
  lim.wall_seconds = 20;
  auto r = Run(0, {{"check.py", "import os\nprint('sandbox-ok', os.getuid() != 0)\n"}},
               {kPython, "/sandbox/check.py"}, "", lim);
  if (!r.ok()) return r.status();
  if (r->end != SandboxResult::End::kExited || r->exit_code != 0 || r->out != "sandbox-ok True\n")
    return Internal("sandbox: the self-check program did not run as expected (exit " + std::to_string(r->exit_code) +
                    ", signal " + std::to_string(r->signal) + ", stdout '" + r->out.substr(0, 200) + "', stderr '" +
                    r->err.substr(0, 400) + "')");
  return Status::Ok();
}

}  // namespace skipkv::eval
