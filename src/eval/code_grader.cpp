#include "eval/code_grader.h"

#include <signal.h>

#include <algorithm>
#include <thread>

namespace skipkv::eval {

const char* TestOutcomeName(TestOutcome o) {
  switch (o) {
    case TestOutcome::kPassed: return "passed";
    case TestOutcome::kWrongAnswer: return "wrong_answer";
    case TestOutcome::kTimeLimit: return "time_limit";
    case TestOutcome::kRuntimeError: return "runtime_error";
    case TestOutcome::kSandboxViolation: return "sandbox_violation";
    case TestOutcome::kSandboxError: return "sandbox_error";
    case TestOutcome::kNotRun: return "not_run";
  }
  return "?";
}

nlohmann::json CodeVerdict::ToJson() const {
  nlohmann::json counts = nlohmann::json::object();
  nlohmann::json per_test = nlohmann::json::array();
  size_t passed = 0;
  nlohmann::json first = nullptr;
  for (size_t i = 0; i < tests.size(); ++i) {
    const TestResult& t = tests[i];
    const char* name = TestOutcomeName(t.outcome);
    counts[name] = counts.value(name, 0) + 1;
    per_test.push_back(name);
    passed += t.outcome == TestOutcome::kPassed;
    if (first.is_null() && t.outcome != TestOutcome::kPassed && t.outcome != TestOutcome::kNotRun)
      first = {{"test", i}, {"outcome", name}, {"detail", t.detail}, {"seconds", t.seconds}};
  }
  return {{"equal", equal}, {"passed", passed},       {"tests", tests.size()},
          {"outcomes", counts}, {"per_test", per_test}, {"first_failure", first}};
}

namespace {

std::string_view StripWs(std::string_view s) {
  // Python's str.strip() on the ASCII whitespace and the separators it also strips.
  auto ws = [](unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); };
  size_t b = 0, e = s.size();
  while (b < e && ws(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && ws(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::vector<std::string_view> StrippedLines(std::string_view text) {
  std::vector<std::string_view> lines;
  text = StripWs(text);
  size_t pos = 0;
  while (true) {
    const size_t nl = text.find('\n', pos);
    lines.push_back(StripWs(text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos)));
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  return lines;
}

std::vector<std::string_view> Tokens(std::string_view line) {
  std::vector<std::string_view> t;
  size_t i = 0;
  auto ws = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); };
  while (i < line.size()) {
    while (i < line.size() && ws(line[i])) ++i;
    const size_t b = i;
    while (i < line.size() && !ws(line[i])) ++i;
    if (i > b) t.push_back(line.substr(b, i - b));
  }
  return t;
}

// A Python Decimal literal, normalised: kind, sign, significant digits
// (no leading/trailing zeros) and the exponent of the last digit.
struct Dec {
  enum Kind { kFinite, kInf, kNaN } kind = kFinite;
  bool negative = false;
  std::string digits;  // "" = zero
  int64_t exponent = 0;
};

bool ParseDecimal(std::string_view s, Dec& d) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) d.negative = s[i++] == '-';
  std::string rest;
  for (size_t k = i; k < s.size(); ++k) rest.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(s[k]))));
  if (rest == "inf" || rest == "infinity") {
    d.kind = Dec::kInf;
    return true;
  }
  if (rest.rfind("nan", 0) == 0 || rest.rfind("snan", 0) == 0) {
    const size_t at = rest[0] == 's' ? 4 : 3;
    for (size_t k = at; k < rest.size(); ++k)
      if (!std::isdigit(static_cast<unsigned char>(rest[k]))) return false;
    d.kind = Dec::kNaN;
    return true;
  }
  // digits [. digits] [e [sign] digits]; underscores only between digits.
  std::string mant;
  int64_t frac_digits = 0;
  bool seen_dot = false, any_digit = false;
  size_t k = 0;
  auto digit_run = [&](std::string& into, bool& any) {
    bool prev_digit = false;
    while (k < rest.size()) {
      const char c = rest[k];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        into.push_back(c);
        any = prev_digit = true;
        ++k;
      } else if (c == '_' && prev_digit && k + 1 < rest.size() && std::isdigit(static_cast<unsigned char>(rest[k + 1]))) {
        prev_digit = false;
        ++k;
      } else {
        break;
      }
    }
  };
  digit_run(mant, any_digit);
  if (k < rest.size() && rest[k] == '.') {
    seen_dot = true;
    ++k;
    const size_t before = mant.size();
    digit_run(mant, any_digit);
    frac_digits = static_cast<int64_t>(mant.size() - before);
  }
  (void)seen_dot;
  if (!any_digit) return false;
  int64_t exp = 0;
  if (k < rest.size() && rest[k] == 'e') {
    ++k;
    bool neg = false;
    if (k < rest.size() && (rest[k] == '+' || rest[k] == '-')) neg = rest[k++] == '-';
    std::string ed;
    bool any = false;
    digit_run(ed, any);
    if (!any || ed.size() > 15) return false;  // exponents beyond 10^15 compare as text only
    exp = std::stoll(ed);
    if (neg) exp = -exp;
  }
  if (k != rest.size()) return false;
  const size_t nz = mant.find_first_not_of('0');
  if (nz == std::string::npos) {
    d.digits.clear();
    d.exponent = 0;
    return true;
  }
  mant.erase(0, nz);
  int64_t e = exp - frac_digits;
  while (!mant.empty() && mant.back() == '0') {
    mant.pop_back();
    ++e;
  }
  d.digits = mant;
  d.exponent = e;
  return true;
}

bool DecimalEqual(const Dec& a, const Dec& b) {
  if (a.kind == Dec::kNaN || b.kind == Dec::kNaN) return false;
  if (a.kind != b.kind) return false;
  if (a.kind == Dec::kInf) return a.negative == b.negative;
  if (a.digits.empty() || b.digits.empty()) return a.digits.empty() && b.digits.empty();  // ±0 == ±0
  return a.negative == b.negative && a.digits == b.digits && a.exponent == b.exponent;
}

std::string Clip(std::string_view s, size_t n = 160) {
  return s.size() <= n ? std::string(s) : std::string(s.substr(0, n)) + "...";
}

std::string LastLine(const std::string& s) {
  const std::string_view t = StripWs(s);
  const size_t nl = t.rfind('\n');
  return Clip(nl == std::string_view::npos ? t : t.substr(nl + 1));
}

std::string FirstDifference(std::string_view got, std::string_view expected) {
  const auto g = StrippedLines(got), e = StrippedLines(expected);
  if (g.size() != e.size())
    return "got " + std::to_string(g.size()) + " lines, expected " + std::to_string(e.size());
  for (size_t i = 0; i < g.size(); ++i)
    if (!LcbOutputMatches(g[i], e[i]))
      return "line " + std::to_string(i + 1) + ": got '" + Clip(g[i], 80) + "', expected '" + Clip(e[i], 80) + "'";
  return "";
}

TestResult Classify(const StatusOr<SandboxResult>& run, const CodeTest& test, TestStyle style) {
  TestResult t;
  if (!run.ok()) {
    t.outcome = TestOutcome::kSandboxError;
    t.detail = Clip(run.status().message(), 300);
    return t;
  }
  const SandboxResult& r = *run;
  t.seconds = r.wall_seconds;
  bool started = false;
  std::string result_line, violation;
  size_t pos = 0;
  while (pos < r.side.size()) {
    size_t nl = r.side.find('\n', pos);
    if (nl == std::string::npos) nl = r.side.size();
    const std::string_view line(r.side.data() + pos, nl - pos);
    if (line == "S") started = true;
    if (started && line.rfind("V ", 0) == 0 && violation.empty()) violation = std::string(line.substr(2));
    if (started && line.rfind("R ", 0) == 0) result_line = std::string(line.substr(2));
    pos = nl + 1;
  }
  if (!violation.empty()) {
    t.outcome = TestOutcome::kSandboxViolation;
    t.detail = Clip(violation, 200);
    return t;
  }
  switch (r.end) {
    case SandboxResult::End::kOutputLimit:
      t.outcome = TestOutcome::kSandboxViolation;
      t.detail = "output over the cap";
      return t;
    case SandboxResult::End::kWallTimeout:
      t.outcome = TestOutcome::kTimeLimit;
      t.detail = "wall clock";
      return t;
    case SandboxResult::End::kSignaled:
      if (!started) break;
      t.outcome = r.signal == SIGXCPU ? TestOutcome::kTimeLimit : TestOutcome::kRuntimeError;
      t.detail = r.signal == SIGXCPU ? "CPU time" : "killed by signal " + std::to_string(r.signal);
      return t;
    case SandboxResult::End::kExited:
      break;
  }
  if (!started) {
    t.outcome = TestOutcome::kSandboxError;
    t.detail = "the harness did not start: " + LastLine(r.err);
    return t;
  }
  if (r.end == SandboxResult::End::kSignaled || r.exit_code != 0) {
    t.outcome = TestOutcome::kRuntimeError;
    t.detail = LastLine(r.err);
    if (t.detail.empty()) t.detail = "exit " + std::to_string(r.exit_code);
    return t;
  }
  if (style == TestStyle::kStdin) {
    if (LcbOutputMatches(r.out, test.output)) {
      t.outcome = TestOutcome::kPassed;
    } else {
      t.outcome = TestOutcome::kWrongAnswer;
      t.detail = FirstDifference(r.out, test.output);
    }
    return t;
  }
  auto j = nlohmann::json::parse(result_line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ok") || !j["ok"].is_boolean()) {
    t.outcome = TestOutcome::kRuntimeError;
    t.detail = "no result from the function";
    return t;
  }
  if (j["ok"].get<bool>()) {
    t.outcome = TestOutcome::kPassed;
  } else {
    t.outcome = TestOutcome::kWrongAnswer;
    t.detail = "got " + Clip(j.value("got", std::string("?")), 120) + ", expected " + Clip(test.output, 120);
  }
  return t;
}

}  // namespace

bool LcbOutputMatches(std::string_view got, std::string_view expected) {
  const auto g = StrippedLines(got), e = StrippedLines(expected);
  if (g.size() != e.size()) return false;
  for (size_t i = 0; i < g.size(); ++i) {
    if (g[i] == e[i]) continue;
    const auto gt = Tokens(g[i]), et = Tokens(e[i]);
    if (gt.size() != et.size()) return false;
    for (size_t k = 0; k < gt.size(); ++k) {
      Dec a, b;
      if (!ParseDecimal(gt[k], a) || !ParseDecimal(et[k], b)) return false;
      if (!DecimalEqual(a, b)) return false;
    }
  }
  return true;
}

CodeVerdict GradeProgram(const Sandbox& sandbox, const std::string& program, const CodeProblem& problem,
                         const CodeGradeOptions& options) {
  CodeVerdict v;
  v.tests.resize(problem.tests.size());
  if (program.find_first_not_of(" \t\r\n") == std::string::npos) {
    for (auto& t : v.tests) t.outcome = TestOutcome::kNotRun;
    if (!v.tests.empty()) {
      v.tests[0].outcome = TestOutcome::kRuntimeError;
      v.tests[0].detail = "no code block in the output";
    }
    return v;
  }
  const std::vector<SandboxFile> files = {{"harness.py", CodeHarnessSource()}, {"program.py", program}};
  const int jobs = std::max(1, std::min(options.jobs, sandbox.slots()));
  const std::string nproc = std::to_string(options.limits.processes);
  auto run_one = [&](size_t i, int slot) {
    const CodeTest& test = problem.tests[i];
    std::vector<std::string> argv = {Sandbox::kPython, "-I", "/sandbox/harness.py",
                                     problem.style == TestStyle::kStdin ? "stdin" : "functional", nproc};
    std::string input = test.input;
    if (problem.style == TestStyle::kFunctional) {
      argv.push_back(problem.func_name);
      input = nlohmann::json{{"input", test.input}, {"output", test.output}}.dump(
          -1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    v.tests[i] = Classify(sandbox.Run(slot, files, argv, input, options.limits), test, problem.style);
  };
  bool failed = false;
  for (size_t wave = 0; wave < problem.tests.size() && !failed; wave += static_cast<size_t>(jobs)) {
    const size_t end = std::min(problem.tests.size(), wave + static_cast<size_t>(jobs));
    if (end - wave == 1) {
      run_one(wave, 0);
    } else {
      std::vector<std::thread> threads;
      for (size_t i = wave; i < end; ++i) threads.emplace_back(run_one, i, static_cast<int>(i - wave));
      for (auto& th : threads) th.join();
    }
    for (size_t i = wave; i < end; ++i) failed |= v.tests[i].outcome != TestOutcome::kPassed;
  }
  v.equal = !failed && !problem.tests.empty();
  return v;
}

}  // namespace skipkv::eval
