#include "eval/jsonl.h"

#include <fstream>
#include <sstream>

#include "util/json_depth.h"

namespace skipkv::eval {

StatusOr<std::vector<JsonlLine>> ReadJsonl(const std::string& path, const JsonlReadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return IoError("cannot read '" + path + "'");
  const std::string text = ss.str();
  std::vector<JsonlLine> out;
  size_t pos = 0, line = 0;
  while (pos < text.size()) {
    ++line;
    size_t end = text.find('\n', pos);
    const bool last_unterminated = end == std::string::npos;
    if (last_unterminated) end = text.size();
    const std::string_view l(text.data() + pos, end - pos);
    pos = end + 1;
    if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    // Depth before parsing (issue 43); never a torn tail: a killed writer leaves no 512 levels.
    SKIPKV_RETURN_IF_ERROR(CheckJsonDepth(l, path, static_cast<int64_t>(line)));
    auto v = nlohmann::json::parse(l, nullptr, /*allow_exceptions=*/false);
    if (v.is_discarded()) {
      if (last_unterminated && options.tolerate_torn_tail) break;
      return CorruptData(path + ":" + std::to_string(line) + ": not valid JSON (" +
                         std::string(l.substr(0, 60)) + (l.size() > 60 ? "..." : "") + ")");
    }
    out.push_back({line, std::move(v)});
  }
  return out;
}

StatusOr<nlohmann::json> ParseJsonText(std::string_view text, const std::string& source) {
  SKIPKV_RETURN_IF_ERROR(CheckJsonDepth(text, source));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return CorruptData(source + ": not valid JSON");
  return j;
}

StatusOr<std::string> StringField(const nlohmann::json& obj, const std::string& field,
                                  const std::string& path, size_t line) {
  const std::string where = path + ":" + std::to_string(line) + ": field '" + field + "'";
  if (!obj.is_object()) return InvalidArgument(path + ":" + std::to_string(line) + ": not a JSON object");
  auto it = obj.find(field);
  if (it == obj.end()) return InvalidArgument(where + " is missing");
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  if (it->is_number()) return it->dump();
  return InvalidArgument(where + " must be a string or a number, got " + std::string(it->type_name()));
}

}  // namespace skipkv::eval
