// R-KV's strip_string as explicit scans; see normalize.h for the contract and
// the documented deviations.
#include "eval/normalize.h"

#include <array>
#include <cctype>
#include <cstdint>
#include <vector>

namespace skipkv::eval {

std::string ReplaceAll(std::string s, std::string_view from, std::string_view to) {
  if (from.empty()) return s;
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t i = s.find(from, pos);
    if (i == std::string::npos) break;
    out.append(s, pos, i - pos);
    out.append(to);
    pos = i + from.size();
  }
  if (pos == 0) return s;
  out.append(s, pos, std::string::npos);
  return out;
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

bool IsWordChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) || c == '_' || u >= 0x80;
}

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Unit words removed when they stand alone between non-word characters (R-KV's
// list without the single letters, the directions and the regex-laden entries;
// see normalize.h). Each is also tried with a trailing "s".
constexpr std::array<std::string_view, 74> kUnitTexts = {
    "degree", "mph",    "kmph",   "ft",     "sq m",    "deg",   "mile",    "monkey",    "ratio", "gm",
    "lb",     "tile",   "per",    "dm",     "lt",      "gain",  "way",     "no change", "men",   "soldier",
    "pie",    "excess", "inches", "noon",   "percent", "gal",   "kmh",     "acre",      "rise",  "sq",
    "mark",   "toy",    "coin",   "gallon", "profit",  "yr",    "women",   "feet",      "am",    "pm",
    "hr",     "cu cm",  "square", "rupee",  "rounds",  "cubic", "cc",      "mtr",       "ohm",   "day",
    "hour",   "minute", "man",    "woman",  "cube",    "mt",    "sq inch", "hectare",   "unit",  "cm 2",
    "rs",     "kg",     "month",  "km",     "cm",      "mm",    "apple",   "liter",     "loss",  "yard",
    "year",   "litre",  "metre",  "meter"};

// Python: re.sub(r"(^|\W)" + unit + r"($|\W)", r"\1\2", s) with the unit taken
// literally. Matches do not overlap: a boundary character consumed on the
// right cannot serve as the left boundary of the next match.
std::string RemoveUnitWord(const std::string& s, std::string_view unit) {
  std::string out;
  size_t copied = 0;  // s[0, copied) is already in out
  size_t cursor = 0;  // where the next match attempt may start
  const size_t n = s.size();
  while (cursor <= n) {
    const size_t i = s.find(unit, cursor);
    if (i == std::string::npos) break;
    // A word right after a backslash is a LaTeX command (\pm, \min), never a unit.
    const bool left_ok =
        (i == 0 && cursor == 0) || (i >= 1 && i - 1 >= cursor && !IsWordChar(s[i - 1]) && s[i - 1] != '\\');
    const size_t end = i + unit.size();
    const bool right_ok = end == n || !IsWordChar(s[end]);
    if (left_ok && right_ok) {
      out.append(s, copied, i - copied);
      copied = end;
      cursor = end == n ? n + 1 : end + 1;
    } else {
      cursor = i + 1;
    }
  }
  if (copied == 0 && out.empty()) return s;
  out.append(s, copied, std::string::npos);
  return out;
}

// Removes every `<open>...}` where the content stops at the first '}' (regex
// `\\mbox{.*?}`); with keep_content the content stays (regex `\\text{(.*?)}`).
std::string ReplaceBraced(const std::string& s, std::string_view open, bool keep_content) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t i = s.find(open, pos);
    if (i == std::string::npos) break;
    const size_t close = s.find('}', i + open.size());
    if (close == std::string::npos) break;
    out.append(s, pos, i - pos);
    if (keep_content) out.append(s, i + open.size(), close - i - open.size());
    pos = close + 1;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

// (\d+)\.0*([^\d]) -> \1\2 and (\d+)\.0*$ -> \1: drops ".000" after digits
// when no other digit follows the zeros.
std::string DropTrailingZeroDecimals(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '.' && i > 0 && IsDigit(s[i - 1])) {
      size_t j = i + 1;
      while (j < s.size() && s[j] == '0') ++j;
      if (j == s.size() || !IsDigit(s[j])) {
        i = j;  // skip "." and the zeros
        continue;
      }
    }
    out.push_back(s[i]);
    ++i;
  }
  return out;
}

// re.sub(r"\\(?=\-?\d+(\\|\)|,|\]|$))", "", s): a backslash before an integer
// that ends at '\\', ')', ',', ']' or the end is dropped.
std::string DropBackslashBeforeInteger(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && !(i > 0 && s[i - 1] == '\\')) {
      size_t j = i + 1;
      if (j < s.size() && s[j] == '-') ++j;
      const size_t digits = j;
      while (j < s.size() && IsDigit(s[j])) ++j;
      if (j > digits && (j == s.size() || s[j] == '\\' || s[j] == ')' || s[j] == ',' || s[j] == ']'))
        continue;
    }
    out.push_back(s[i]);
  }
  return out;
}

int WordValue(std::string_view w) {
  static constexpr std::array<std::string_view, 20> kOnes = {
      "zero",     "one",     "two",     "three",     "four",     "five",    "six",
      "seven",    "eight",   "nine",    "ten",       "eleven",   "twelve",  "thirteen",
      "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"};
  static constexpr std::array<std::string_view, 8> kTens = {"twenty", "thirty",  "forty",  "fifty",
                                                            "sixty",  "seventy", "eighty", "ninety"};
  for (size_t i = 0; i < kOnes.size(); ++i)
    if (w == kOnes[i]) return static_cast<int>(i);
  for (size_t i = 0; i < kTens.size(); ++i)
    if (w == kTens[i]) return 20 + 10 * static_cast<int>(i);
  if (w == "hundred") return 100;
  if (w == "thousand") return 1000;
  if (w == "million") return 1000000;
  return -1;
}

}  // namespace

std::string ConvertWordNumber(std::string_view s) {
  std::string t = Trim(s);
  if (t.empty() || t.size() > 64) return std::string(s);
  std::string lower;
  for (char c : t)
    lower.push_back(c == '-' ? ' ' : static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  int64_t total = 0, current = 0;
  bool any = false;
  size_t pos = 0;
  while (pos < lower.size()) {
    while (pos < lower.size() && lower[pos] == ' ') ++pos;
    size_t end = pos;
    while (end < lower.size() && lower[end] != ' ') ++end;
    if (end == pos) break;
    const std::string_view w(lower.data() + pos, end - pos);
    pos = end;
    if (w == "and") continue;
    const int v = WordValue(w);
    if (v < 0) return std::string(s);
    any = true;
    if (v == 100) {
      current = (current == 0 ? 1 : current) * 100;
    } else if (v >= 1000) {
      total += (current == 0 ? 1 : current) * v;
      current = 0;
    } else {
      current += v;
    }
  }
  if (!any) return std::string(s);
  return std::to_string(total + current);
}

std::string FixFracs(std::string_view s) {
  const std::string_view kFrac = "\\frac";
  std::vector<std::string_view> parts;
  size_t pos = 0;
  while (true) {
    const size_t i = s.find(kFrac, pos);
    if (i == std::string_view::npos) {
      parts.push_back(s.substr(pos));
      break;
    }
    parts.push_back(s.substr(pos, i - pos));
    pos = i + kFrac.size();
  }
  std::string out(parts[0]);
  for (size_t k = 1; k < parts.size(); ++k) {
    const std::string_view sub = parts[k];
    out += kFrac;
    if (!sub.empty() && sub[0] == '{') {
      out += sub;
      continue;
    }
    if (sub.size() < 2) return std::string(s);  // R-KV gives up on the whole string
    const char a = sub[0], b = sub[1];
    if (b != '{') {
      out += std::string("{") + a + "}{" + b + "}";
    } else {
      out += std::string("{") + a + "}" + b;
    }
    out += sub.substr(2);
  }
  return out;
}

std::string FixSqrt(std::string_view s) {
  std::string out;
  const std::string_view kSqrt = "\\sqrt";
  size_t pos = 0;
  while (true) {
    const size_t i = s.find(kSqrt, pos);
    if (i == std::string_view::npos) break;
    const size_t after = i + kSqrt.size();
    out.append(s.substr(pos, after - pos));
    pos = after;
    if (after < s.size() && IsWordChar(s[after]) && static_cast<unsigned char>(s[after]) < 0x80) {
      out += '{';
      out += s[after];
      out += '}';
      pos = after + 1;
    }
  }
  out.append(s.substr(pos));
  return out;
}

std::string FixSlash(std::string_view s) {
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos || s.find('/', slash + 1) != std::string_view::npos)
    return std::string(s);
  const std::string_view a = s.substr(0, slash), b = s.substr(slash + 1);
  // Python's int() then "{}/{}".format(a, b) == string: a canonical integer
  // (optional '-', no leading zeros) or any text containing "sqrt".
  auto canonical = [](std::string_view x) {
    if (x.find("sqrt") != std::string_view::npos) return true;
    size_t i = (!x.empty() && x[0] == '-') ? 1 : 0;
    if (i >= x.size()) return false;
    if (x[i] == '0' && x.size() > i + 1) return false;
    if (x == "-0") return false;
    for (; i < x.size(); ++i)
      if (!IsDigit(x[i])) return false;
    return true;
  };
  if (!canonical(a) || !canonical(b)) return std::string(s);
  return "\\frac{" + std::string(a) + "}{" + std::string(b) + "}";
}

std::string StripString(std::string_view input) {
  std::string s = Trim(input);
  s = ReplaceAll(s, "\n", "");
  while (!s.empty() && s.back() == '.') s.pop_back();
  s = ReplaceAll(s, "\\!", "");
  // Matrices: \begin{array}{...} -> \begin{pmatrix}.
  for (size_t i = s.find("\\begin{array}{"); i != std::string::npos; i = s.find("\\begin{array}{", i + 1)) {
    const size_t close = s.find('}', i + 14);
    if (close == std::string::npos) break;
    s.replace(i, close + 1 - i, "\\begin{pmatrix}");
  }
  s = ReplaceAll(s, "\\end{array}", "\\end{pmatrix}");
  s = ReplaceAll(s, "bmatrix", "pmatrix");
  s = ReplaceAll(s, "tfrac", "frac");
  s = ReplaceAll(s, "dfrac", "frac");
  s = ReplaceAll(s, "\\neq", "\\ne");
  s = ReplaceAll(s, "\\leq", "\\le");
  s = ReplaceAll(s, "\\geq", "\\ge");
  s = ReplaceAll(s, "\\left", "");
  s = ReplaceAll(s, "\\right", "");
  s = ReplaceAll(s, "\\{", "{");
  s = ReplaceAll(s, "\\}", "}");
  // A trailing \text{...} unit (regex \\text{.*?}$): cut at the first "\text{"
  // when the string ends with '}', unless that leaves nothing. Also (beyond
  // R-KV) a trailing \mbox{...} unit and a unit power (^2, ^3, ^{2}, ^{3})
  // after either, so "15\mbox{ cm}^2" is 15.
  {
    std::string t = s;
    for (std::string_view pw : {"^2", "^3", "^{2}", "^{3}"}) {
      if (t.size() > pw.size() && std::string_view(t).ends_with(pw) && t[t.size() - pw.size() - 1] == '}') {
        t.resize(t.size() - pw.size());
        break;
      }
    }
    if (!t.empty() && t.back() == '}') {
      size_t cut_at = std::string::npos;
      for (std::string_view open : {"\\text{", "\\mbox{"}) cut_at = std::min(cut_at, t.find(open));
      if (cut_at != std::string::npos) {
        const std::string cut = Trim(std::string_view(t).substr(0, cut_at));
        if (!cut.empty()) s = cut;
      }
    }
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (std::string_view unit : kUnitTexts) {
      for (int plural = 0; plural < 2; ++plural) {
        const std::string u = std::string(unit) + (plural ? "s" : "");
        std::string r = RemoveUnitWord(s, u);
        if (!r.empty()) s = std::move(r);
      }
    }
  }
  s = ReplaceAll(s, "^{\\circ}", "");
  s = ReplaceAll(s, "^\\circ", "");
  s = ReplaceAll(s, "\\$", "");
  s = ReplaceAll(s, "$", "");
  s = ReplaceAll(s, "\\(", "");
  s = ReplaceAll(s, "\\)", "");
  s = ConvertWordNumber(s);
  s = ReplaceBraced(s, "\\text{", /*keep_content=*/true);
  for (std::string_view key : {"x=", "y=", "z=", "x\\in", "y\\in", "z\\in", "x\\to", "y\\to", "z\\to"})
    s = ReplaceAll(s, key, "");
  s = ReplaceAll(s, "\\emptyset", "{}");
  s = ReplaceAll(s, "(-\\infty,\\infty)", "\\mathbb{R}");
  s = ReplaceAll(s, "\\%", "");
  s = ReplaceAll(s, "%", "");
  s = ReplaceAll(s, " .", " 0.");
  s = ReplaceAll(s, "{.", "{0.");
  if (s.size() >= 3) {
    const char o = s.front(), c = s.back();
    if ((o == '{' && c == '}') || (o == '(' && c == ')') || (o == '[' && c == ']')) {
      bool alnum = true;
      for (size_t i = 1; i + 1 < s.size(); ++i) alnum &= std::isalnum(static_cast<unsigned char>(s[i])) != 0;
      if (alnum) s = s.substr(1, s.size() - 2);
    }
  }
  s = ReplaceAll(s, "infinity", "\\infty");
  if (s.find("\\infty") == std::string::npos) s = ReplaceAll(s, "inf", "\\infty");
  s = ReplaceAll(s, "+\\inity", "\\infty");
  s = ReplaceAll(s, "and", "");
  s = ReplaceAll(s, "\\mathbf", "");
  s = ReplaceBraced(s, "\\mbox{", /*keep_content=*/false);
  if (s.find('j') != std::string::npos && s.find('i') == std::string::npos) s = ReplaceAll(s, "j", "i");
  s = DropTrailingZeroDecimals(s);
  if (s.empty()) return s;
  if (s[0] == '.') s = "0" + s;
  // "k = 5" -> "5" when the left side is at most two characters.
  const size_t eq = s.find('=');
  if (eq != std::string::npos && s.find('=', eq + 1) == std::string::npos && eq <= 2) s = s.substr(eq + 1);
  s = FixSqrt(s);
  s = ReplaceAll(s, " ", "");
  // Beyond R-KV: "x \in [a,b]" had a space when the keys were removed above.
  for (std::string_view key : {"x\\in", "y\\in", "z\\in"}) s = ReplaceAll(s, key, "");
  s = FixFracs(s);
  s = DropBackslashBeforeInteger(s);
  s = FixSlash(s);
  return s;
}

}  // namespace skipkv::eval
