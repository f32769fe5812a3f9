// libFuzzer target: arbitrary bytes as a model output and as a reference
// through the grader (extraction, normalisation, math_equal, the expression
// parser). Invariants: no crash, hang or sanitizer report; a non-empty
// normalised answer equals itself; an expression that parses evaluates
// without trapping; a number written in a box equals itself.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "eval/extract.h"
#include "eval/math_equal.h"
#include "eval/math_expr.h"
#include "eval/normalize.h"

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace skipkv::eval;
  const std::string in(reinterpret_cast<const char*>(data), size);
  // Split the input at the first 0xFF byte into (output, reference).
  const size_t cut = in.find('\xff');
  const std::string out = in.substr(0, cut);
  const std::string ref = cut == std::string::npos ? in : in.substr(cut + 1);
  const Grade g = GradeOutput(out, ref);
  if (!g.extracted.empty()) Check(MathEqual(g.extracted, g.extracted), "an answer differs from itself");
  (void)MathEqual(StripString(ref), StripString(out));
  if (auto e = MathExpr::Parse(out)) {
    std::vector<std::complex<double>> vals(e->variables().size(), {1.5, 0.0});
    (void)e->Eval(vals);
  }
  if (size >= 4) {
    int64_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = v * 256 + data[i];
    v -= 1ll << 31;
    const std::string n = std::to_string(v);
    Check(GradeOutput("\\boxed{" + n + "}", n).equal, "a boxed integer differs from itself");
  }
  return 0;
}
