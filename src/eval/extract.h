// Answer extraction from a model's output and from dataset references
// (docs/spec.md §2.6 steps 1-2). Linear-time scans; any byte sequence is accepted.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace skipkv::eval {

// The output up to the first of "</s>", "<|im_end|>", "<|endoftext|>", "\n题目：".
std::string_view TruncateOutput(std::string_view text);

// The content of the last `\boxed{...}` / `\fbox{...}` (brace matched; an
// unclosed brace takes the rest of the text), or, for `\boxed 5$`, the text up
// to the first '$'. nullopt when neither "boxed" nor "fbox" occurs.
std::optional<std::string> LastBoxed(std::string_view text);

// The raw answer of a model output, before normalisation, in R-KV's order:
// "final answer is $...$. I hope"; the last \boxed / \fbox; the text after
// the last GSM8K "####" (to the end of its line); the tail after the last
// "he answer is" / "final answer is"; the last number (commas removed).
// Empty when nothing is found.
std::string ExtractRawAnswer(std::string_view output);

// TruncateOutput, ExtractRawAnswer, then: newlines (and the spaces after
// them) removed, a leading ':' and a trailing '.' or '/' dropped, and
// StripString applied twice — the prediction R-KV grades.
std::string ExtractAnswer(std::string_view output);

// A reference answer as R-KV normalises it: the content of its last \boxed if
// it has one, the text after "####" if it has that, else the text itself;
// then StripString.
std::string NormalizeReference(std::string_view reference);

}  // namespace skipkv::eval
