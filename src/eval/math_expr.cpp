// Recursive-descent parser for the answer subset described in math_expr.h.
//   expr    := term (('+' | '-') term)*
//   term    := unary (('*' | '/' | \cdot | \times | \div | <implicit>) unary)*
//   unary   := ('-' | '+') unary | power
//   power   := postfix ('^' exponent)?          (right associative)
//   postfix := primary '!'*
//   primary := number [mixed fraction] | letter | group | \frac | \sqrt | \pi | func arg | |expr|
#include "eval/math_expr.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

namespace skipkv::eval {

using cd = std::complex<double>;

class ExprParser {
 public:
  ExprParser(std::string_view s, MathExpr& out) : s_(s), out_(out) {}

  bool Run() {
    int root = Expr();
    Skip();
    if (root < 0 || pos_ != s_.size()) return false;
    out_.root_ = root;
    return true;
  }

 private:
  using Node = MathExpr::Node;

  int Add(Node n) {
    out_.nodes_.push_back(std::move(n));
    return static_cast<int>(out_.nodes_.size()) - 1;
  }
  int Make(Node::Kind k, int a = -1, int b = -1) {
    Node n;
    n.kind = k;
    n.a = a;
    n.b = b;
    return Add(std::move(n));
  }
  int Bin(Node::Kind k, int a, int b) { return Make(k, a, b); }
  int Num(cd v) {
    Node n;
    n.kind = Node::kNum;
    n.value = v;
    return Add(std::move(n));
  }

  // Skips spaces and the commands that only affect layout.
  void Skip() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
        continue;
      }
      if (c == '\\' && pos_ + 1 < s_.size()) {
        const char n = s_[pos_ + 1];
        if (n == ',' || n == ';' || n == '!' || n == ' ' || n == ':') {
          pos_ += 2;
          continue;
        }
        bool skipped = false;
        for (std::string_view w : {"\\left", "\\right", "\\displaystyle", "\\quad", "\\qquad"}) {
          if (s_.substr(pos_).starts_with(w) && !IsAlpha(At(pos_ + w.size()))) {
            pos_ += w.size();
            skipped = true;
            break;
          }
        }
        if (skipped) continue;
      }
      break;
    }
  }

  static bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }
  char At(size_t i) const { return i < s_.size() ? s_[i] : '\0'; }
  char Peek() {
    Skip();
    return At(pos_);
  }

  // The known command at pos_ ("\frac", "\sin", ...): the longest known name
  // that prefixes the letters after the backslash (normalisation removes the
  // space in "\cot x", leaving "\cotx"). Empty when none.
  std::string_view CommandAt() const {
    static constexpr std::array<std::string_view, 40> kCommands = {
        "frac",  "dfrac", "tfrac",   "sqrt",       "pi",     "cdot",   "times",  "div",   "sin",   "cos",
        "tan",   "cot",   "sec",     "csc",        "arcsin", "arccos", "arctan", "ln",    "log",   "exp",
        "alpha", "beta",  "gamma",   "delta",      "theta",  "phi",    "lambda", "mu",    "sigma", "omega",
        "rho",   "tau",   "epsilon", "varepsilon", "varphi", "psi",    "eta",    "kappa", "nu",    "mathrm"};
    if (At(pos_) != '\\') return {};
    size_t e = pos_ + 1;
    while (e < s_.size() && IsAlpha(s_[e])) ++e;
    const std::string_view letters = s_.substr(pos_ + 1, e - pos_ - 1);
    std::string_view best;
    for (std::string_view c : kCommands)
      if (letters.starts_with(c) && c.size() > best.size()) best = c;
    return best;
  }

  static bool IsFunction(std::string_view c) {
    for (std::string_view f :
         {"sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan", "ln", "log", "exp"})
      if (c == f) return true;
    return false;
  }
  static bool IsGreek(std::string_view c) {
    return !c.empty() && c != "frac" && c != "dfrac" && c != "tfrac" && c != "sqrt" && c != "pi" &&
           c != "cdot" && c != "times" && c != "div" && c != "mathrm" && !IsFunction(c);
  }

  // Whether the next token can start a factor of an implicit product.
  bool StartsPrimary() {
    const char c = Peek();
    if (IsDigit(c) || IsAlpha(c) || c == '(' || c == '[' || c == '{' || c == '.') return true;
    if (c == '\\') {
      const std::string_view cmd = CommandAt();
      return !cmd.empty() && cmd != "cdot" && cmd != "times" && cmd != "div";
    }
    return false;
  }

  bool Enter() { return ++depth_ <= kMaxExprDepth; }
  void Leave() { --depth_; }

  int Expr() {
    if (!Enter()) return -1;
    int left = Term();
    while (left >= 0) {
      const char c = Peek();
      if (c != '+' && c != '-') break;
      ++pos_;
      const int right = Term();
      if (right < 0) return Leave(), -1;
      left = Bin(c == '+' ? Node::kAdd : Node::kSub, left, right);
    }
    Leave();
    return left;
  }

  int Term() {
    if (!Enter()) return -1;
    int left = Unary();
    while (left >= 0) {
      const char c = Peek();
      Node::Kind k;
      if (c == '*') {
        ++pos_;
        k = Node::kMul;
      } else if (c == '/') {
        ++pos_;
        k = Node::kDiv;
      } else if (c == '\\' && (CommandAt() == "cdot" || CommandAt() == "times" || CommandAt() == "div")) {
        k = CommandAt() == "div" ? Node::kDiv : Node::kMul;
        pos_ += 1 + CommandAt().size();
      } else if (StartsPrimary()) {
        k = Node::kMul;
      } else {
        break;
      }
      const int right = Unary();
      if (right < 0) return Leave(), -1;
      left = Bin(k, left, right);
    }
    Leave();
    return left;
  }

  int Unary() {
    if (!Enter()) return -1;
    const char c = Peek();
    int r;
    if (c == '-' || c == '+') {
      ++pos_;
      const int x = Unary();
      r = x < 0 ? -1 : (c == '-' ? Make(Node::kNeg, x) : x);
    } else {
      r = Power();
    }
    Leave();
    return r;
  }

  int Power() {
    if (!Enter()) return -1;
    int base = Postfix();
    if (base >= 0 && Peek() == '^') {
      ++pos_;
      const int exp = Exponent();
      base = exp < 0 ? -1 : Bin(Node::kPow, base, exp);
    }
    Leave();
    return base;
  }

  // After '^': a braced expression, or one signed primary with its own
  // exponent (x^-1, 2^3^2, e^x).
  int Exponent() {
    const char c = Peek();
    if (c == '{') return Group('{', '}');
    if (c == '-' || c == '+') {
      ++pos_;
      const int x = Exponent();
      return x < 0 ? -1 : (c == '-' ? Make(Node::kNeg, x) : x);
    }
    // A single digit or letter, as LaTeX reads x^23 = x^2 * 3.
    if (IsDigit(c) || IsAlpha(c)) {
      ++pos_;
      if (IsDigit(c)) return Num(cd(c - '0', 0));
      return Letter(c);
    }
    return Power();
  }

  int Postfix() {
    int x = Primary();
    while (x >= 0 && Peek() == '!') {
      ++pos_;
      x = Make(Node::kFact, x);
    }
    return x;
  }

  int Group(char open, char close) {
    if (Peek() != open) return -1;
    ++pos_;
    const int x = Expr();
    if (x < 0 || Peek() != close) return -1;
    ++pos_;
    return x;
  }

  // A braced argument of \frac / \sqrt, or (LaTeX's unbraced form) one character.
  int Arg() {
    const char c = Peek();
    if (c == '{') return Group('{', '}');
    if (IsDigit(c)) {
      ++pos_;
      return Num(cd(c - '0', 0));
    }
    if (IsAlpha(c)) {
      ++pos_;
      return Letter(c);
    }
    if (c == '\\') return Primary();
    return -1;
  }

  int Letter(char c) {
    if (c == 'i') return Num(cd(0, 1));
    if (c == 'e') return Num(cd(std::exp(1.0), 0));
    return Variable(std::string(1, c));
  }

  int Variable(const std::string& name) {
    auto& v = out_.vars_;
    auto it = std::find(v.begin(), v.end(), name);
    int idx;
    if (it == v.end()) {
      v.push_back(name);
      idx = static_cast<int>(v.size()) - 1;
    } else {
      idx = static_cast<int>(it - v.begin());
    }
    Node n;
    n.kind = Node::kVar;
    n.var = idx;
    return Add(n);
  }

  // Digits with an optional fraction part; a lone integer directly followed by
  // \frac{int}{int} is a mixed number.
  int Number() {
    const size_t start = pos_;
    while (IsDigit(At(pos_))) ++pos_;
    bool has_point = false;
    if (At(pos_) == '.' && IsDigit(At(pos_ + 1))) {
      has_point = true;
      ++pos_;
      while (IsDigit(At(pos_))) ++pos_;
    }
    if (pos_ == start) return -1;
    const double v = std::strtod(std::string(s_.substr(start, pos_ - start)).c_str(), nullptr);
    const int num = Num(cd(v, 0));
    if (!has_point && s_.substr(pos_).starts_with("\\frac{")) {
      // Look ahead for \frac{digits}{digits}.
      size_t p = pos_ + 6, d1 = p;
      while (IsDigit(At(p))) ++p;
      if (p > d1 && At(p) == '}' && At(p + 1) == '{') {
        size_t q = p + 2, d2 = q;
        while (IsDigit(At(q))) ++q;
        if (q > d2 && At(q) == '}') {
          const double n = std::strtod(std::string(s_.substr(d1, p - d1)).c_str(), nullptr);
          const double d = std::strtod(std::string(s_.substr(d2, q - d2)).c_str(), nullptr);
          pos_ = q + 1;
          const int frac = Bin(Node::kDiv, Num(cd(n, 0)), Num(cd(d, 0)));
          return Bin(Node::kAdd, num, frac);
        }
      }
    }
    return num;
  }

  int Primary() {
    if (!Enter()) return -1;
    const int r = PrimaryInner();
    Leave();
    return r;
  }

  int PrimaryInner() {
    const char c = Peek();
    if (IsDigit(c) || (c == '.' && IsDigit(At(pos_ + 1)))) return Number();
    if (c == '(') return Group('(', ')');
    if (c == '[') return Group('[', ']');
    if (c == '{') return Group('{', '}');
    if (c == '|') {
      ++pos_;
      const int x = Expr();
      if (x < 0 || Peek() != '|') return -1;
      ++pos_;
      return Make(Node::kAbs, x);
    }
    if (IsAlpha(c)) {
      // ASCII function names written without a backslash (sqrt(2), sin(x)).
      for (std::string_view f : {"sqrt", "sin", "cos", "tan", "log", "ln", "exp"}) {
        if (s_.substr(pos_).starts_with(f) && At(pos_ + f.size()) == '(') {
          pos_ += f.size();
          const int arg = Group('(', ')');
          if (arg < 0) return -1;
          Node n;
          n.kind = Node::kFunc;
          n.a = arg;
          n.func = std::string(f);
          return Add(n);
        }
      }
      ++pos_;
      return Letter(c);
    }
    if (c != '\\') return -1;
    const std::string_view cmd = CommandAt();
    if (cmd.empty()) return -1;
    pos_ += 1 + cmd.size();
    if (cmd == "frac" || cmd == "dfrac" || cmd == "tfrac") {
      const int num = Arg();
      if (num < 0) return -1;
      const int den = Arg();
      if (den < 0) return -1;
      return Bin(Node::kDiv, num, den);
    }
    if (cmd == "sqrt") {
      int index = -1;
      if (Peek() == '[') {
        index = Group('[', ']');
        if (index < 0) return -1;
      }
      const int arg = Arg();
      if (arg < 0) return -1;
      if (index >= 0) {  // x^(1/n)
        const int one = Num(cd(1, 0));
        return Bin(Node::kPow, arg, Bin(Node::kDiv, one, index));
      }
      Node n;
      n.kind = Node::kFunc;
      n.a = arg;
      n.func = "sqrt";
      return Add(n);
    }
    if (cmd == "pi") return Num(cd(M_PI, 0));
    if (cmd == "mathrm") {  // \mathrm{e}, \mathrm{x}
      return Group('{', '}');
    }
    if (IsFunction(cmd)) {
      // \sin^2 x = (\sin x)^2.
      int exp = -1;
      if (Peek() == '^') {
        ++pos_;
        exp = Exponent();
        if (exp < 0) return -1;
      }
      const char n = Peek();
      const int arg = (n == '(' || n == '{' || n == '[') ? Primary() : Power();
      if (arg < 0) return -1;
      Node f;
      f.kind = Node::kFunc;
      f.a = arg;
      f.func = std::string(cmd);
      const int call = Add(f);
      return exp < 0 ? call : Bin(Node::kPow, call, exp);
    }
    if (IsGreek(cmd)) return Variable("\\" + std::string(cmd));
    return -1;
  }

  std::string_view s_;
  MathExpr& out_;
  size_t pos_ = 0;
  int depth_ = 0;
};

std::optional<MathExpr> MathExpr::Parse(std::string_view s) {
  if (s.empty() || s.size() > kMaxExprChars) return std::nullopt;
  MathExpr e;
  ExprParser p(s, e);
  if (!p.Run()) return std::nullopt;
  return e;
}

namespace {

bool IsReal(cd z) { return z.imag() == 0.0; }

cd Pow(cd a, cd b) {
  if (IsReal(a) && IsReal(b)) {
    const double x = a.real(), y = b.real();
    if (x >= 0 || y == std::floor(y)) return cd(std::pow(x, y), 0);
  }
  if (a == cd(0, 0)) return IsReal(b) && b.real() > 0 ? cd(0, 0) : cd(NAN, NAN);
  return std::pow(a, b);
}

cd Func(const std::string& f, cd x) {
  if (f == "sqrt") return IsReal(x) && x.real() >= 0 ? cd(std::sqrt(x.real()), 0) : std::sqrt(x);
  if (f == "sin") return std::sin(x);
  if (f == "cos") return std::cos(x);
  if (f == "tan") return std::tan(x);
  if (f == "cot") return cd(1, 0) / std::tan(x);
  if (f == "sec") return cd(1, 0) / std::cos(x);
  if (f == "csc") return cd(1, 0) / std::sin(x);
  if (f == "arcsin") return std::asin(x);
  if (f == "arccos") return std::acos(x);
  if (f == "arctan") return std::atan(x);
  if (f == "ln" || f == "log") return std::log(x);  // sympy reads \log as the natural log
  if (f == "exp") return std::exp(x);
  return cd(NAN, NAN);
}

}  // namespace

std::complex<double> MathExpr::Eval(const std::vector<std::complex<double>>& values) const {
  // Children always precede their parent in nodes_, so one forward pass evaluates the tree.
  std::vector<cd> v(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    const cd a = n.a >= 0 ? v[n.a] : cd(), b = n.b >= 0 ? v[n.b] : cd();
    switch (n.kind) {
      case Node::kNum:
        v[i] = n.value;
        break;
      case Node::kVar:
        v[i] = n.var < static_cast<int>(values.size()) ? values[n.var] : cd(NAN, NAN);
        break;
      case Node::kAdd:
        v[i] = a + b;
        break;
      case Node::kSub:
        v[i] = a - b;
        break;
      case Node::kMul:
        v[i] = a * b;
        break;
      case Node::kDiv:
        v[i] = b == cd(0, 0) ? cd(NAN, NAN) : a / b;
        break;
      case Node::kPow:
        v[i] = Pow(a, b);
        break;
      case Node::kNeg:
        v[i] = -a;
        break;
      case Node::kFunc:
        v[i] = Func(n.func, a);
        break;
      case Node::kAbs:
        v[i] = cd(std::abs(a), 0);
        break;
      case Node::kFact:
        v[i] = IsReal(a) && a.real() >= 0 && a.real() <= 170 && a.real() == std::floor(a.real())
                   ? cd(std::tgamma(a.real() + 1), 0)
                   : cd(NAN, NAN);
        break;
    }
  }
  return root_ >= 0 ? v[root_] : cd(NAN, NAN);
}

namespace {

// A deterministic value in [0.5, 2.5) for (variable name, point index),
// the same on both sides of a comparison.
double PointValue(const std::string& name, int k) {
  uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  h ^= static_cast<uint64_t>(k + 1) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return 0.5 + 2.0 * static_cast<double>(h >> 11) / static_cast<double>(1ull << 53);
}

bool Finite(cd z) { return std::isfinite(z.real()) && std::isfinite(z.imag()); }

}  // namespace

bool ExprsEqual(const MathExpr& a, const MathExpr& b, bool negate) {
  std::vector<std::string> names = a.variables();
  for (const auto& n : b.variables())
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  const bool has_vars = !names.empty();
  const double rel = has_vars ? 1e-6 : 1e-4;
  const int points = has_vars ? 6 : 1;
  int finite = 0;
  for (int k = 0; k < points; ++k) {
    auto values_for = [&](const MathExpr& e) {
      std::vector<cd> vals;
      for (const auto& n : e.variables()) vals.emplace_back(PointValue(n, k), 0);
      return vals;
    };
    const cd va = a.Eval(values_for(a));
    cd vb = b.Eval(values_for(b));
    if (negate) vb = -vb;
    if (!Finite(va) || !Finite(vb)) continue;
    ++finite;
    const double diff = std::abs(va - vb);
    if (diff > std::max(rel * std::max(std::abs(va), std::abs(vb)), 1e-9)) return false;
  }
  return finite > 0;
}

bool SymbolicEqual(std::string_view a, std::string_view b) {
  auto ea = MathExpr::Parse(a);
  if (!ea) return false;
  auto eb = MathExpr::Parse(b);
  if (!eb) return false;
  return ExprsEqual(*ea, *eb);
}

}  // namespace skipkv::eval
