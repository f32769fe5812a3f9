#include "eval/math_equal.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <vector>

#include "eval/extract.h"
#include "eval/math_expr.h"
#include "eval/normalize.h"

namespace skipkv::eval {
namespace {

constexpr int kMaxDepth = 6;
constexpr size_t kMaxParts = 64;

std::string Lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// Python float() on the string with commas removed, or a trailing "%" / "\%"
// as /100 (R-KV's parse_digits).
std::optional<double> ParseDigits(std::string_view in) {
  // Beyond R-KV: commas count as thousands separators only in groups of three
  // digits ("10,080"); "3,5,7" is a list, not the number 357.
  if (in.find(',') != std::string_view::npos) {
    size_t i = (!in.empty() && (in[0] == '-' || in[0] == '+')) ? 1 : 0;
    size_t lead = 0;
    while (i < in.size() && std::isdigit(static_cast<unsigned char>(in[i]))) ++i, ++lead;
    if (lead == 0 || lead > 3) return std::nullopt;
    while (i < in.size() && in[i] == ',') {
      size_t g = 0;
      ++i;
      while (i < in.size() && std::isdigit(static_cast<unsigned char>(in[i]))) ++i, ++g;
      if (g != 3) return std::nullopt;
    }
  }
  std::string s;
  for (char c : in)
    if (c != ',') s.push_back(c);
  auto parse = [](const std::string& t) -> std::optional<double> {
    const std::string x = Trim(t);
    if (x.empty()) return std::nullopt;
    size_t i = 0;
    if (x[i] == '+' || x[i] == '-') ++i;
    size_t digits = 0;
    while (i < x.size() && std::isdigit(static_cast<unsigned char>(x[i]))) ++i, ++digits;
    if (i < x.size() && x[i] == '.') {
      ++i;
      while (i < x.size() && std::isdigit(static_cast<unsigned char>(x[i]))) ++i, ++digits;
    }
    if (digits == 0) return std::nullopt;
    if (i < x.size() && (x[i] == 'e' || x[i] == 'E')) {
      size_t j = i + 1;
      if (j < x.size() && (x[j] == '+' || x[j] == '-')) ++j;
      const size_t d = j;
      while (j < x.size() && std::isdigit(static_cast<unsigned char>(x[j]))) ++j;
      if (j > d) i = j;
    }
    if (i != x.size()) return std::nullopt;
    return std::strtod(x.c_str(), nullptr);
  };
  if (auto v = parse(s)) return v;
  if (!s.empty() && s.back() == '%') {
    s.pop_back();
    if (!s.empty() && s.back() == '\\') s.pop_back();
    if (auto v = parse(s)) return *v / 100.0;
  }
  return std::nullopt;
}

bool IsClose(double a, double b, double rel = 1e-4) {
  if (a == b) return true;
  return std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b));
}

// R-KV's choice_answer_clean: the last standalone letter A-E of the
// upper-cased text, else the text itself.
std::string ChoiceClean(std::string_view p) {
  std::string u = Lower(Trim(p));
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string last;
  for (size_t i = 0; i < u.size(); ++i) {
    if (u[i] >= 'A' && u[i] <= 'E' && (i == 0 || !IsWordChar(u[i - 1])) &&
        (i + 1 == u.size() || !IsWordChar(u[i + 1])))
      last = std::string(1, u[i]);
  }
  if (!last.empty()) return last;
  std::string t = Trim(p);
  while (!t.empty() && (t.back() == '.' || t.back() == '/')) t.pop_back();
  return t;
}

// Whether s[0] opens a bracket that closes exactly at s.back() (any of ( [ {
// for the inner nesting; the outer pair may mix ( and ] for half-open intervals).
bool EnclosedWhole(std::string_view s) {
  if (s.size() < 2) return false;
  const char o = s.front(), c = s.back();
  if (o != '(' && o != '[' && o != '{') return false;
  if (c != ')' && c != ']' && c != '}') return false;
  if ((o == '{') != (c == '}')) return false;
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char x = s[i];
    if (x == '(' || x == '[' || x == '{') ++depth;
    if (x == ')' || x == ']' || x == '}') {
      if (--depth == 0 && i + 1 != s.size()) return false;
    }
    if (depth < 0) return false;
  }
  return depth == 0;
}

// Splits at `sep` where the bracket depth is zero.
std::vector<std::string> SplitTopLevel(std::string_view s, std::string_view sep) {
  std::vector<std::string> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char x = s[i];
    if (x == '(' || x == '[' || x == '{') ++depth;
    if (x == ')' || x == ']' || x == '}') --depth;
    if (depth == 0 && s.substr(i).starts_with(sep)) {
      parts.emplace_back(Trim(s.substr(start, i - start)));
      start = i + sep.size();
      i = start - 1;
    }
  }
  parts.emplace_back(Trim(s.substr(start)));
  return parts;
}

bool Equal(std::string_view p, std::string_view r, int depth);

bool AllEqualInOrder(const std::vector<std::string>& a, const std::vector<std::string>& b, int depth) {
  if (a.size() != b.size() || a.size() > kMaxParts) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!Equal(a[i], b[i], depth + 1)) return false;
  return true;
}

// Greedy matching is exact here because equality of answers is transitive in practice.
bool AllEqualUnordered(const std::vector<std::string>& a, const std::vector<std::string>& b, int depth) {
  if (a.size() != b.size() || a.size() > kMaxParts) return false;
  std::vector<bool> used(b.size(), false);
  for (const auto& x : a) {
    bool found = false;
    for (size_t j = 0; j < b.size() && !found; ++j) {
      if (!used[j] && Equal(x, b[j], depth + 1)) used[j] = found = true;
    }
    if (!found) return false;
  }
  return true;
}

// The rows and cells of "\begin{pmatrix}a&b\\c&d\end{pmatrix}", or nullopt.
std::optional<std::vector<std::vector<std::string>>> Matrix(std::string_view s) {
  constexpr std::string_view kBegin = "\\begin{pmatrix}", kEnd = "\\end{pmatrix}";
  if (!s.starts_with(kBegin) || !s.ends_with(kEnd)) return std::nullopt;
  const std::string_view body = s.substr(kBegin.size(), s.size() - kBegin.size() - kEnd.size());
  std::vector<std::vector<std::string>> rows;
  for (const auto& row : SplitTopLevel(body, "\\\\")) {
    if (row.empty() && !rows.empty()) continue;  // a trailing "\\"
    rows.push_back(SplitTopLevel(row, "&"));
  }
  return rows;
}

// "a\pmb" with one \pm -> {"a+b", "a-b"}.
std::optional<std::vector<std::string>> ExpandPm(std::string_view s) {
  const size_t i = s.find("\\pm");
  if (i == std::string_view::npos || s.find("\\pm", i + 3) != std::string_view::npos) return std::nullopt;
  const std::string head(s.substr(0, i)), tail(s.substr(i + 3));
  return std::vector<std::string>{head + "+" + tail, head + "-" + tail};
}

bool Equal(std::string_view p, std::string_view r, int depth) {
  const std::string pt = Trim(p), rt = Trim(r);
  if (pt.empty() || rt.empty()) return pt.empty() && rt.empty() && depth > 0;
  if (Lower(pt) == Lower(rt)) return true;
  if (depth > kMaxDepth || pt.size() > kMaxCompareChars || rt.size() > kMaxCompareChars) return false;
  // Multiple choice.
  if (rt.size() == 1 && rt[0] >= 'A' && rt[0] <= 'E' && ChoiceClean(pt) == rt) return true;
  // Numbers: the prediction against the reference, reference/100 and reference*100.
  const auto pn = ParseDigits(pt), rn = ParseDigits(rt);
  if (pn && rn) {
    for (double g : {*rn / 100.0, *rn, *rn * 100.0})
      if (IsClose(*pn, g)) return true;
    return false;
  }
  // Enclosing brackets stripped (R-KV strips them from both sides; here two
  // bracketed answers keep their brackets unless they are the same, so (3,4)
  // is not (3,4]).
  {
    const bool pe = EnclosedWhole(pt), re = EnclosedWhole(rt);
    const bool same = pe && re && pt.front() == rt.front() && pt.back() == rt.back();
    const std::string ps = pe && (same || !re) ? pt.substr(1, pt.size() - 2) : pt;
    const std::string rs = re && (same || !pe) ? rt.substr(1, rt.size() - 2) : rt;
    if (!ps.empty() && Lower(ps) == Lower(rs)) return true;
  }
  // Sets: {a,b} against {b,a} or a bare list.
  if (EnclosedWhole(rt) && rt.front() == '{') {
    const std::string inner = rt.substr(1, rt.size() - 2);
    const std::string pin = EnclosedWhole(pt) && pt.front() == '{' ? pt.substr(1, pt.size() - 2) : pt;
    const auto a = SplitTopLevel(pin, ","), b = SplitTopLevel(inner, ",");
    if (b.size() > 1 && AllEqualUnordered(a, b, depth)) return true;
  }
  // Tuples and intervals with the same brackets, element-wise.
  if (EnclosedWhole(pt) && EnclosedWhole(rt) && pt.front() != '{' && rt.front() != '{' &&
      pt.front() == rt.front() && pt.back() == rt.back()) {
    const auto a = SplitTopLevel(std::string_view(pt).substr(1, pt.size() - 2), ",");
    const auto b = SplitTopLevel(std::string_view(rt).substr(1, rt.size() - 2), ",");
    if (a.size() > 1 && AllEqualInOrder(a, b, depth)) return true;
  }
  // Unions of intervals, part by part.
  if (rt.find("\\cup") != std::string::npos) {
    const auto a = SplitTopLevel(pt, "\\cup"), b = SplitTopLevel(rt, "\\cup");
    if (b.size() > 1 && AllEqualInOrder(a, b, depth)) return true;
  }
  // Bare comma lists ("1,-2" against "-2,1"): unordered.
  {
    const auto a = SplitTopLevel(pt, ","), b = SplitTopLevel(rt, ",");
    if (b.size() > 1 && a.size() == b.size() && AllEqualUnordered(a, b, depth)) return true;
  }
  // A reference with one \pm: the list of its two values.
  if (auto pm = ExpandPm(rt)) {
    const auto a = SplitTopLevel(pt, ",");
    if (AllEqualUnordered(a, *pm, depth)) return true;
  }
  // Matrices, cell by cell.
  if (auto ma = Matrix(pt)) {
    if (auto mb = Matrix(rt)) {
      if (ma->size() == mb->size() && !ma->empty()) {
        bool all = true;
        for (size_t i = 0; i < ma->size() && all; ++i) all = AllEqualInOrder((*ma)[i], (*mb)[i], depth);
        if (all) return true;
      }
    }
  }
  // Equations: lhs - rhs equal up to sign.
  const size_t pe = pt.find('='), re = rt.find('=');
  const bool p_one_eq = pe != std::string::npos && pt.find('=', pe + 1) == std::string::npos;
  const bool r_one_eq = re != std::string::npos && rt.find('=', re + 1) == std::string::npos;
  if (p_one_eq && r_one_eq) {
    const std::string pd = "(" + pt.substr(0, pe) + ")-(" + pt.substr(pe + 1) + ")";
    const std::string rd = "(" + rt.substr(0, re) + ")-(" + rt.substr(re + 1) + ")";
    auto a = MathExpr::Parse(pd), b = MathExpr::Parse(rd);
    if (a && b && (ExprsEqual(*a, *b) || ExprsEqual(*a, *b, /*negate=*/true))) return true;
  }
  // "x=3" against "3" (a left side of at most two characters).
  if (p_one_eq && re == std::string::npos && Trim(pt.substr(0, pe)).size() <= 2)
    return Equal(pt.substr(pe + 1), rt, depth + 1);
  if (r_one_eq && pe == std::string::npos && Trim(rt.substr(0, re)).size() <= 2)
    return Equal(pt, rt.substr(re + 1), depth + 1);
  // Symbolic, by evaluation.
  return SymbolicEqual(pt, rt);
}

}  // namespace

bool MathEqual(std::string_view prediction, std::string_view reference) {
  return Equal(prediction, reference, 0);
}

Grade GradeOutput(std::string_view output, std::string_view reference) {
  Grade g;
  g.extracted = ExtractAnswer(output);
  g.reference = NormalizeReference(reference);
  g.equal = MathEqual(g.extracted, g.reference);
  return g;
}

}  // namespace skipkv::eval
