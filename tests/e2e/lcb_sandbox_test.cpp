// The code grader and its sandbox on hand-written LiveCodeBench-style
// problems in both test styles: correct, wrong, timeout, crash, huge output,
// fork bomb, writes outside /tmp, network, memory — each with its expected
// verdict — and the sandbox itself below the harness (python3 -c programs the
// audit hook never sees): the kernel's limits hold, nothing is written on the
// host, and no process outlives a run. Needs /usr/bin/bwrap and python3
// (scripts/setup.sh); a sandbox that cannot start fails these tests.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "eval/code_grader.h"
#include "eval/sandbox.h"

namespace skipkv::eval {
namespace {

const Sandbox& Box() {
  static const Sandbox box = [] {
    auto b = Sandbox::Create(4);
    EXPECT_TRUE(b.ok()) << b.status().message();
    return *b;
  }();
  return box;
}

CodeGradeOptions Options() {
  CodeGradeOptions o;
  o.limits.wall_seconds = 2;
  o.limits.memory_bytes = int64_t{512} << 20;
  o.limits.output_bytes = 1 << 20;
  o.limits.file_bytes = 1 << 20;
  o.jobs = 2;
  return o;
}

CodeProblem StdinProblem() {
  CodeProblem p;
  p.style = TestStyle::kStdin;
  p.tests = {{"1 2\n", "3\n", TestStyle::kStdin}, {"10 -4\n", "6", TestStyle::kStdin}, {"0 0", "0\n", TestStyle::kStdin}};
  return p;
}

CodeProblem FunctionalProblem() {
  CodeProblem p;
  p.style = TestStyle::kFunctional;
  p.func_name = "pairSums";
  p.tests = {{"[1, 2, 3]\n10", "[11, 12, 13]", TestStyle::kFunctional},
             {"[]\n0", "[]", TestStyle::kFunctional},
             {"[5]\n-5", "[0]", TestStyle::kFunctional}};
  return p;
}

struct Case {
  const char* name;
  std::string program;
  TestOutcome first;       // outcome of test 0
  std::string detail = "";  // expected in test 0's detail
};

void Check(const CodeProblem& problem, const Case& c) {
  SCOPED_TRACE(c.name);
  const CodeVerdict v = GradeProgram(Box(), c.program, problem, Options());
  ASSERT_EQ(v.tests.size(), problem.tests.size());
  EXPECT_EQ(TestOutcomeName(v.tests[0].outcome), std::string(TestOutcomeName(c.first))) << v.tests[0].detail;
  EXPECT_NE(v.tests[0].detail.find(c.detail), std::string::npos) << v.tests[0].detail;
  EXPECT_EQ(v.equal, c.first == TestOutcome::kPassed);
  if (c.first == TestOutcome::kPassed) {
    for (const auto& t : v.tests) EXPECT_EQ(t.outcome, TestOutcome::kPassed) << t.detail;
  } else {
    // Like LiveCodeBench, grading stops after the failing wave (2 jobs: test 2 never runs).
    EXPECT_EQ(v.tests[2].outcome, TestOutcome::kNotRun);
  }
  const auto j = v.ToJson();
  EXPECT_EQ(j["equal"].get<bool>(), v.equal);
  EXPECT_EQ(j["per_test"][0].get<std::string>(), TestOutcomeName(c.first));
}

// No process of any slot's uid is left (root: each slot has its own uid).
void ExpectNoStrays() {
  if (!Box().dedicated_uids()) GTEST_SKIP() << "not root: slots share the caller's uid";
  for (int s = 0; s < Box().slots(); ++s) EXPECT_TRUE(ProcessesOfUid(Box().SlotUid(s)).empty()) << "slot " << s;
}

TEST(LcbSandbox, SelfCheck) { ASSERT_TRUE(Box().SelfCheck().ok()) << Box().SelfCheck().message(); }

TEST(LcbGrader, StdinProblems) {
  const std::string marker = "/tmp/skipkv_lcb_escape_" + std::to_string(::getpid());
  const Case cases[] = {
      {"correct", "a, b = map(int, input().split())\nprint(a + b)\n", TestOutcome::kPassed},
      {"correct, main guard, exit(), prelude names",
       "def main():\n    a, b = map(int, sys.stdin.read().split())\n    print(floor(sqrt((a + b) ** 2)) if a + b >= 0 "
       "else a + b)\n    exit(0)\n\nif __name__ == '__main__':\n    main()\n",
       TestOutcome::kPassed},
      {"correct, writes its own /tmp", "open('/tmp/scratch', 'w').write('x')\nprint(sum(map(int, input().split())))\n",
       TestOutcome::kPassed},
      {"wrong", "a, b = map(int, input().split())\nprint(a - b)\n", TestOutcome::kWrongAnswer,
       "line 1: got '-1', expected '3'"},
      {"timeout", "while True:\n    pass\n", TestOutcome::kTimeLimit},
      {"crash", "raise ValueError('boom')\n", TestOutcome::kRuntimeError, "ValueError: boom"},
      {"syntax error", "print(\n", TestOutcome::kRuntimeError, "SyntaxError"},
      {"huge output", "while True:\n    print('x' * 1000)\n", TestOutcome::kSandboxViolation, "output"},
      {"fork bomb", "import os\nwhile True:\n    os.fork()\n", TestOutcome::kSandboxViolation, "os.fork"},
      {"subprocess", "import subprocess\nsubprocess.run(['true'])\n", TestOutcome::kSandboxViolation,
       "subprocess.Popen"},
      {"writes outside /tmp", "open('/usr/lib/skipkv_pwned', 'w').write('x')\n", TestOutcome::kSandboxViolation,
       "open-for-writing"},
      {"escapes /tmp by path", "open('/tmp/../usr/x', 'w')\n", TestOutcome::kSandboxViolation, "open-for-writing"},
      {"network", "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=1)\n",
       TestOutcome::kSandboxViolation, "socket"},
      {"memory", "x = bytearray(2 << 30)\nprint(3)\n", TestOutcome::kRuntimeError, "MemoryError"},
      {"no code", "", TestOutcome::kRuntimeError, "no code block"},
      {"host /tmp marker", "open('" + marker + "', 'w').write('x')\nprint(1)\n", TestOutcome::kWrongAnswer},
  };
  for (const auto& c : cases) Check(StdinProblem(), c);
  EXPECT_FALSE(std::filesystem::exists("/usr/lib/skipkv_pwned"));
  EXPECT_FALSE(std::filesystem::exists(marker));  // the sandbox's /tmp is its own
  ExpectNoStrays();
}

TEST(LcbGrader, FunctionalProblems) {
  const std::string head = "class Solution:\n    def pairSums(self, nums: List[int], k: int) -> List[int]:\n";
  const Case cases[] = {
      {"correct", head + "        return [x + k for x in nums]\n", TestOutcome::kPassed},
      {"tuple counts as list", head + "        return tuple(x + k for x in nums)\n", TestOutcome::kPassed},
      {"wrong", head + "        return [x - k for x in nums]\n", TestOutcome::kWrongAnswer, "got [-9, -8, -7]"},
      {"timeout", head + "        while True:\n            pass\n", TestOutcome::kTimeLimit},
      {"crash", head + "        return nums[99]\n", TestOutcome::kRuntimeError, "IndexError"},
      {"missing method", "class Solution:\n    def other(self):\n        return 1\n", TestOutcome::kRuntimeError,
       "defines no pairSums"},
      {"huge output", head + "        while True:\n            print('y' * 4096)\n", TestOutcome::kSandboxViolation,
       "output"},
      {"fork bomb", head + "        import os\n        while True:\n            os.fork()\n",
       TestOutcome::kSandboxViolation, "os.fork"},
      {"writes outside /tmp", head + "        open('/home/x', 'a')\n        return [x + k for x in nums]\n",
       TestOutcome::kSandboxViolation, "open-for-writing"},
      {"network", head + "        import socket\n        socket.socket().connect(('10.0.0.1', 22))\n",
       TestOutcome::kSandboxViolation, "socket"},
  };
  for (const auto& c : cases) Check(FunctionalProblem(), c);
  EXPECT_FALSE(std::filesystem::exists("/home/x"));
  ExpectNoStrays();
}

// Below the harness: plain python3 -c programs, so only the kernel stops them.
SandboxResult Raw(const std::string& code, SandboxLimits lim = {}) {
  auto r = Box().Run(1, {}, {Sandbox::kPython, "-c", code}, "", lim);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : SandboxResult{};
}

TEST(LcbSandbox, KernelLimitsHoldWithoutTheHarness) {
  SandboxLimits lim;
  lim.processes = 8;
  lim.wall_seconds = 10;
  // Fork bomb: children sleep; forks stop at the process limit, and every
  // child is gone when the run ends.
  auto fork = Raw(
      "import os, time\nn = 0\ntry:\n    while n < 500:\n        if os.fork() == 0:\n            time.sleep(60)\n"
      "            os._exit(0)\n        n += 1\nexcept OSError as e:\n    print('stopped', n, e.errno)\n",
      lim);
  EXPECT_EQ(fork.out.rfind("stopped ", 0), 0u) << fork.out << fork.err;
  EXPECT_LT(fork.wall_seconds, 5.0);
  ExpectNoStrays();

  auto fs = Raw(
      "import errno\nfor p in ['/usr/x', '/etc/passwd', '/x', '/proc/sys/kernel/hostname']:\n    try:\n"
      "        open(p, 'w').write('x')\n        print(p, 'WROTE')\n    except OSError as e:\n"
      "        print(p, errno.errorcode[e.errno])\n");
  EXPECT_EQ(fs.out.find("WROTE"), std::string::npos) << fs.out;
  EXPECT_NE(fs.out.find("/usr/x EROFS"), std::string::npos) << fs.out;

  auto net = Raw(
      "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 80), timeout=2)\n    print('CONNECTED')\n"
      "except OSError as e:\n    print('refused', e.errno)\n");
  EXPECT_EQ(net.out.rfind("refused", 0), 0u) << net.out << net.err;

  SandboxLimits small;
  small.file_bytes = 1 << 20;
  auto big = Raw("try:\n    open('/tmp/f', 'wb').write(b'x' * (4 << 20))\n    print('WROTE')\nexcept OSError as e:\n"
                 "    print('limited', e.errno)\n",
                 small);
  EXPECT_EQ(big.out.rfind("limited", 0), 0u) << big.out << big.err;

  SandboxLimits cpu;
  cpu.wall_seconds = 20;
  cpu.cpu_seconds = 1;
  auto spin = Raw("while True:\n    pass\n", cpu);
  EXPECT_EQ(spin.end, SandboxResult::End::kSignaled);
  EXPECT_EQ(spin.signal, SIGXCPU);
  EXPECT_LT(spin.wall_seconds, 10.0);

  // Wall clock: a sleeping program and a detached grandchild in its own
  // session are both gone after the kill.
  SandboxLimits wall;
  wall.wall_seconds = 1;
  auto sleepy = Raw("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(100)\ntime.sleep(100)\n", wall);
  EXPECT_EQ(sleepy.end, SandboxResult::End::kWallTimeout);
  EXPECT_LT(sleepy.wall_seconds, 5.0);
  ExpectNoStrays();
}

TEST(LcbSandbox, FailsClosed) {
  // bwrap cannot start the command: an error, never an unsandboxed run.
  auto r = Box().Run(0, {}, {"/no/such/interpreter"}, "", SandboxLimits{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bubblewrap could not set up the sandbox"), std::string::npos)
      << r.status().message();
  // The grader turns that into a failed test.
  CodeProblem p = StdinProblem();
  SandboxLimits lim;
  lim.memory_bytes = 1 << 20;  // too small for bwrap to map itself: nothing runs
  CodeGradeOptions o = Options();
  o.limits = lim;
  const CodeVerdict v = GradeProgram(Box(), "print(3)\n", p, o);
  EXPECT_FALSE(v.equal);
  EXPECT_TRUE(v.tests[0].outcome == TestOutcome::kSandboxError || v.tests[0].outcome == TestOutcome::kRuntimeError)
      << TestOutcomeName(v.tests[0].outcome) << " " << v.tests[0].detail;
}

}  // namespace
}  // namespace skipkv::eval
