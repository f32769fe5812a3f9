// JSON Lines input with errors that name the file and line.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace skipkv::eval {

struct JsonlLine {
  size_t line = 0;  // 1-based line number in the file
  nlohmann::json value;
};

struct JsonlReadOptions {
  // A last line without its final newline that does not parse is dropped
  // (the tail a killed writer leaves) instead of being an error.
  bool tolerate_torn_tail = false;
};

// Every non-blank line, parsed. NotFound / IoError for the file;
// CorruptData "FILE:LINE: not valid JSON (...)" for a bad line.
StatusOr<std::vector<JsonlLine>> ReadJsonl(const std::string& path, const JsonlReadOptions& options = {});

// One JSON text from `source` (a file name, for messages): the depth check
// of util/json_depth.h first (InvalidArgument "SOURCE:LINE: JSON nested
// deeper ..."), then the parse (CorruptData "SOURCE: not valid JSON").
StatusOr<nlohmann::json> ParseJsonText(std::string_view text, const std::string& source);

// The string value of `field` in a JSON object, with numbers rendered as
// text (AIME answers are sometimes numbers). InvalidArgument naming the
// file, line and field when it is missing, null or of another type.
StatusOr<std::string> StringField(const nlohmann::json& obj, const std::string& field,
                                  const std::string& path, size_t line);

}  // namespace skipkv::eval
