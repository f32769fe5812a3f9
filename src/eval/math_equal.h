// R-KV's math_equal (docs/spec.md §2.6 step 4) on normalised answers (StripString
// output), and the one-call grader. Deviations from R-KV, each listed in
// docs/eval-protocol.md:
//  - symbolic equality is decided by evaluating both sides (math_expr.h)
//    instead of sympy; expressions with variables at six points;
//  - the bracket-stripping string comparison strips only the enclosing
//    brackets (R-KV deletes every ( ) { } in both strings, which makes
//    \frac{12}{3} equal \frac{1}{23});
//  - tuples and intervals compare element-wise only when their brackets
//    agree ((1,2) is not [1,2]); comma lists without brackets and {sets}
//    compare as unordered lists; unions (\cup) part by part; a reference
//    with one \pm equals the two-element list it stands for.
#pragma once

#include <string>
#include <string_view>

namespace skipkv::eval {

// Whether a normalised prediction equals a normalised reference. Total: any
// input gives a verdict in time linear in its size (element lists above 64
// parts and answers over kMaxCompareChars compare as strings only).
bool MathEqual(std::string_view prediction, std::string_view reference);

inline constexpr size_t kMaxCompareChars = 8192;

struct Grade {
  std::string extracted;  // the normalised prediction (ExtractAnswer)
  std::string reference;  // the normalised reference (NormalizeReference)
  bool equal = false;
};

// Extracts the answer from a model output and compares it with the raw
// reference (a bare answer, a solution with \boxed, or a GSM8K "#### n").
Grade GradeOutput(std::string_view output, std::string_view reference);

}  // namespace skipkv::eval
