// The JSON nesting-depth scan; see json_depth.h.
#include "util/json_depth.h"

namespace skipkv {

std::optional<JsonDepthExcess> FindJsonDepthExcess(std::string_view text, int max_depth) {
  constexpr size_t kKeyBytes = 64;
  int depth = 0;
  bool in_string = false, escaped = false;
  bool top_is_object = false;  // the outermost value is an object
  bool expect_key = false;     // the next string at level 1 is a member name
  bool string_is_key = false;  // the open string is a level-1 member name
  size_t string_start = 0;
  std::string_view top_key;
  int64_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {  // counted inside strings too: raw newlines there are invalid JSON anyway
      ++line;
      line_start = i + 1;
    }
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
        if (string_is_key) top_key = text.substr(string_start, i - string_start);
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        string_start = i + 1;
        string_is_key = depth == 1 && top_is_object && expect_key;
        if (string_is_key) expect_key = false;
        break;
      case '[':
      case '{':
        if (depth == 0) top_is_object = c == '{';
        if (++depth > max_depth) {
          JsonDepthExcess e;
          e.max_depth = max_depth;
          e.offset = i;
          e.line = line;
          e.column = static_cast<int64_t>(i - line_start) + 1;
          for (char k : top_key.substr(0, kKeyBytes))
            e.top_key += static_cast<unsigned char>(k) < 0x20 ? '?' : k;
          return e;
        }
        if (depth == 1) {
          expect_key = top_is_object;
          top_key = {};
        }
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      case ',':
        if (depth == 1 && top_is_object) {
          expect_key = true;
          top_key = {};
        }
        break;
      default:
        break;
    }
  }
  return std::nullopt;
}

Status CheckJsonDepth(std::string_view text, std::string_view source, int64_t first_line, int max_depth) {
  const std::optional<JsonDepthExcess> e = FindJsonDepthExcess(text, max_depth);
  if (!e) return Status::Ok();
  std::string m = std::string(source) + ":" + std::to_string(first_line + e->line - 1) +
                  ": JSON nested deeper than " + std::to_string(max_depth) + " levels (";
  if (!e->top_key.empty()) m += "in '" + e->top_key + "', ";
  m += "column " + std::to_string(e->column) + "); not parsed";
  return InvalidArgument(std::move(m));
}

}  // namespace skipkv
