#include "eval/extract.h"

#include <array>
#include <cctype>

#include "eval/normalize.h"

namespace skipkv::eval {

std::string_view TruncateOutput(std::string_view text) {
  static constexpr std::array<std::string_view, 4> kStops = {"</s>", "<|im_end|>", "<|endoftext|>",
                                                             "\n\xE9\xA2\x98\xE7\x9B\xAE\xEF\xBC\x9A"};
  size_t cut = text.size();
  for (std::string_view s : kStops) cut = std::min(cut, text.find(s));
  return text.substr(0, cut);
}

std::optional<std::string> LastBoxed(std::string_view text) {
  const size_t b = text.rfind("boxed");
  const size_t f = text.rfind("fbox");
  size_t start;
  if (b == std::string_view::npos && f == std::string_view::npos) return std::nullopt;
  if (b == std::string_view::npos) {
    start = f + 4;
  } else if (f == std::string_view::npos || b > f) {
    start = b + 5;
  } else {
    start = f + 4;
  }
  const std::string_view rest = text.substr(start);
  if (rest.empty()) return std::string();
  if (rest[0] == '{') {
    int depth = 1;
    std::string a;
    for (size_t i = 1; i < rest.size(); ++i) {
      const char c = rest[i];
      if (c == '{') {
        ++depth;
      } else if (c == '}') {
        if (--depth == 0) break;
      }
      a.push_back(c);
    }
    return a;
  }
  return Trim(rest.substr(0, rest.find('$')));
}

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The last match of R-KV's regex -?\d*\.?\d+ in `s` with commas removed.
std::string LastNumber(std::string_view text) {
  std::string s;
  s.reserve(text.size());
  for (char c : text)
    if (c != ',') s.push_back(c);
  // Scan left to right for non-overlapping leftmost-longest matches, keeping the last.
  std::string last;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (s[j] == '-') ++j;
    const size_t int_begin = j;
    while (j < s.size() && IsDigit(s[j])) ++j;
    size_t end = std::string::npos;
    if (j < s.size() && s[j] == '.' && j + 1 < s.size() && IsDigit(s[j + 1])) {
      size_t k = j + 1;
      while (k < s.size() && IsDigit(s[k])) ++k;
      end = k;
    } else if (j > int_begin) {
      end = j;
    }
    if (end != std::string::npos) {
      last = s.substr(i, end - i);
      i = end;
    } else {
      ++i;
    }
  }
  return last;
}

}  // namespace

std::string ExtractRawAnswer(std::string_view out) {
  const size_t fa = out.find("final answer is $");
  const size_t hope = out.find("$. I hope");
  if (fa != std::string_view::npos && hope != std::string_view::npos) {
    // Python: text.split("final answer is $", 1)[1].split("$. I hope", 1)[0]
    const std::string_view after = out.substr(fa + 17);
    return Trim(after.substr(0, after.find("$. I hope")));
  }
  if (auto boxed = LastBoxed(out)) return *boxed;
  const size_t hash = out.rfind("####");
  if (hash != std::string_view::npos) {
    const std::string_view tail = out.substr(hash + 4);
    return Trim(tail.substr(0, tail.find('\n')));
  }
  // R-KV checks "he answer is" first, then "final answer is"; the tail after the last occurrence.
  for (std::string_view key : {std::string_view("he answer is"), std::string_view("final answer is")}) {
    const size_t k = out.rfind(key);
    if (k != std::string_view::npos) return Trim(out.substr(k + key.size()));
  }
  return LastNumber(out);
}

std::string ExtractAnswer(std::string_view output) {
  const std::string raw = ExtractRawAnswer(TruncateOutput(output));
  // re.sub(r"\n\s*", "", pred)
  std::string a;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\n') {
      while (i + 1 < raw.size() && std::isspace(static_cast<unsigned char>(raw[i + 1]))) ++i;
      continue;
    }
    a.push_back(raw[i]);
  }
  if (!a.empty() && a.front() == ':') a.erase(0, 1);
  if (!a.empty() && a.back() == '.') a.pop_back();
  if (!a.empty() && a.back() == '/') a.pop_back();
  return StripString(StripString(a));
}

std::string NormalizeReference(std::string_view reference) {
  if (auto boxed = LastBoxed(reference)) return StripString(*boxed);
  const size_t hash = reference.rfind("####");
  if (hash != std::string_view::npos) return StripString(reference.substr(hash + 4));
  return StripString(reference);
}

}  // namespace skipkv::eval
