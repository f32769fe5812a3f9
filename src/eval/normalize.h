// Answer normalisation: R-KV's `strip_string` (docs/spec.md §2.6 step 3), written
// with plain string scans (no std::regex, so a 100 kB input costs linear time
// and never recurses). Deviations from R-KV, each because R-KV's rule breaks
// real MATH answers (docs/eval-protocol.md lists them):
//  - single-letter "unit words" (a, c, d, g, h, l, m, o, s, t) and the
//    direction words east / west are not stripped: they are variables or the
//    answers themselves (`(a+5)(b+2)`, `\text{east}`);
//  - `{x}` / `(x)` / `[x]` around an alphanumeric x are unwrapped (R-KV's
//    check `"(x)".isalnum()` can never be true, so its rule never fires).
#pragma once

#include <string>
#include <string_view>

namespace skipkv::eval {

// The normalised form of an answer string; idempotent in practice (R-KV
// applies it twice to predictions). Never fails; any byte sequence is accepted.
std::string StripString(std::string_view s);

// Word numbers ("five", "twenty-one", "one hundred") as digits when the whole
// trimmed string is one; otherwise the input unchanged.
std::string ConvertWordNumber(std::string_view s);

// `\frac12` -> `\frac{1}{2}`, `\frac1{b}` -> `\frac{1}{b}`.
std::string FixFracs(std::string_view s);
// `\sqrt2` -> `\sqrt{2}` (one character, as LaTeX reads it).
std::string FixSqrt(std::string_view s);
// "a/b" with a and b integers (the whole string) -> "\frac{a}{b}".
std::string FixSlash(std::string_view s);

// Helpers shared with the grader.
std::string ReplaceAll(std::string s, std::string_view from, std::string_view to);
std::string Trim(std::string_view s);
bool IsWordChar(char c);  // [A-Za-z0-9_] (Python's \w on ASCII; bytes >= 0x80 count as word chars too)

}  // namespace skipkv::eval
