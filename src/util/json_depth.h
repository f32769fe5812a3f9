// The nesting-depth limit on JSON read from outside the process (issue 43).
// nlohmann::json builds, copies, compares and dump()s a document by recursion,
// one chain of stack frames per level of [ or {: a 400 KB body of 200,000
// nested '[' overflowed an HTTP worker's stack. Every JSON text from a file
// or a client is scanned here first, and deeper input is refused before a
// document is built. The scan itself is a loop (no recursion, O(1) memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/status.h"

namespace skipkv {

// The deepest nesting accepted: 512 levels of arrays/objects (the outermost
// '[' or '{' is level 1). Real inputs stay far below it (tokenizer.json and
// chat requests: under 10); tests/fuzz/fuzz_json_depth parses, copies and
// dump()s documents of up to 512 levels under AddressSanitizer.
inline constexpr int kMaxJsonDepth = 512;

// Where a text first nests deeper than the limit.
struct JsonDepthExcess {
  int max_depth = 0;    // the limit that was exceeded
  size_t offset = 0;    // byte offset of the '[' or '{' that opened level max_depth + 1
  int64_t line = 1;     // its 1-based line in the text ('\n' separated)
  int64_t column = 1;   // its 1-based byte column in that line
  std::string top_key;  // the top-level object's member it lies in ("" when the
                        // text is not an object), cut to 64 bytes, as written
                        // (escapes not decoded, control bytes shown as '?')
};

// Scans `text` once and returns where nesting first exceeds `max_depth`, or
// nullopt. Brackets inside strings (escapes honoured) do not count. It does
// not validate JSON: malformed text is the parser's to report; a ']' with no
// open level is ignored.
std::optional<JsonDepthExcess> FindJsonDepthExcess(std::string_view text, int max_depth = kMaxJsonDepth);

// The check as a Status for files: OK, or InvalidArgument
//   "SOURCE:LINE: JSON nested deeper than 512 levels (in 'KEY', column C); not parsed"
// where LINE is `first_line` plus the line within `text` (so a JSONL reader
// passes the line's own number) and the "in 'KEY'" part only when known.
Status CheckJsonDepth(std::string_view text, std::string_view source, int64_t first_line = 1,
                      int max_depth = kMaxJsonDepth);

}  // namespace skipkv
