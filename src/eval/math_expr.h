// A small recursive-descent parser and evaluator for the LaTeX / ASCII maths
// that final answers are written in, so the grader can decide whether two
// expressions are equal by evaluating them (docs/spec.md §2.6 step 4, the symbolic
// stage R-KV does with sympy).
//
// Subset: numbers (12, 3.5, .25), + - * / ^ ! and implicit multiplication
// (2x, 3\sqrt{5}, (a+5)(b+2)), \cdot \times \div, ( ) [ ] { } grouping,
// \frac{a}{b} (\dfrac, \tfrac), \sqrt{x}, \sqrt[n]{x}, \sqrt2, \pi, e, i (the
// imaginary unit), \sin \cos \tan \cot \sec \csc \arcsin \arccos \arctan \ln
// \log \exp, |x|, variables (one ASCII letter, or a Greek letter command).
// A mixed number `137\frac{1}{2}` (an integer directly followed by a fraction
// of integers) is 137 + 1/2. Spacing commands and \left / \right are ignored.
// Anything else (subscripts, \infty, \pm, text, relations) makes Parse fail:
// the grader then falls back to string comparison.
//
// Bounds: inputs longer than kMaxExprChars and nesting deeper than
// kMaxExprDepth are rejected, so hostile input costs linear time and bounded
// stack.
#pragma once

#include <complex>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace skipkv::eval {

inline constexpr size_t kMaxExprChars = 2000;
inline constexpr int kMaxExprDepth = 100;

class MathExpr {
 public:
  // nullopt when `s` is outside the subset or over the bounds.
  static std::optional<MathExpr> Parse(std::string_view s);

  // The variable names in order of first appearance.
  const std::vector<std::string>& variables() const { return vars_; }

  // The value with variable k set to values[k] (values.size() must equal
  // variables().size()). NaN / inf for domain errors (division by zero, a
  // factorial of a non-integer).
  std::complex<double> Eval(const std::vector<std::complex<double>>& values) const;

  struct Node;

 private:
  std::vector<Node> nodes_;
  int root_ = -1;
  std::vector<std::string> vars_;
  friend class ExprParser;
};

struct MathExpr::Node {
  enum Kind { kNum, kVar, kAdd, kSub, kMul, kDiv, kPow, kNeg, kFunc, kFact, kAbs } kind = kNum;
  std::complex<double> value;  // kNum
  int a = -1, b = -1;          // operands (node indices)
  int var = -1;                // kVar: index into vars_
  std::string func;            // kFunc: "sqrt", "sin", ...
};

// True when the expressions agree at several deterministic pseudo-random
// points (the same assignment of the union of their variables on both sides):
// without variables isclose(rel 1e-4) as R-KV, with variables rel 1e-6; an
// absolute slack of 1e-9 either way. Points where a side is not finite are
// skipped; at least one finite point is required. With `negate`, compares a
// against -b.
bool ExprsEqual(const MathExpr& a, const MathExpr& b, bool negate = false);

// Parses both and compares (false when either does not parse).
bool SymbolicEqual(std::string_view a, std::string_view b);

}  // namespace skipkv::eval
