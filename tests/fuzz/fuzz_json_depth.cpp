// libFuzzer target: util/json_depth (the nesting-depth check run before every
// parse of outside JSON, issue 43) against nlohmann's own parser. The first
// byte picks a small limit L = 1 + byte % 64 (so short inputs can exceed it);
// the rest is the text. Invariants:
//  * the scan agrees with nlohmann's SAX parse (iterative, any depth): when
//    the parser reaches depth > L, the scan reports an excess; when the text
//    is one valid JSON value no deeper than L (and holds no NUL byte, where
//    nlohmann stops reading), it reports none;
//  * a reported excess points at a '[' or '{' and carries L;
//  * text the scan passes at the production limit (512) parses into a
//    document that can be copied, compared and dump()ed without a crash
//    (the recursive paths that overflowed the server's stack).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "util/json_depth.h"

#include "fuzz_check.h"

namespace {

// The deepest level nlohmann's SAX parser reaches (before an error, if any).
struct DepthSax : nlohmann::json_sax<nlohmann::json> {
  int depth = 0, max = 0;
  bool open() {
    if (++depth > max) max = depth;
    return true;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return open(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return --depth, true; }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override { return --depth, true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int limit = 1 + data[0] % 64;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);

  const auto excess = skipkv::FindJsonDepthExcess(text, limit);
  if (excess) {
    Check(excess->max_depth == limit, "excess carries its limit");
    Check(excess->offset < text.size() && (text[excess->offset] == '[' || text[excess->offset] == '{'),
          "excess points at an opening bracket");
    Check(excess->line >= 1 && excess->column >= 1, "line and column are 1-based");
    Check(excess->top_key.size() <= 64, "top key cut to 64 bytes");
  }
  DepthSax sax;
  const bool valid = nlohmann::json::sax_parse(text, &sax);
  if (sax.max > limit) Check(excess.has_value(), "parser went deeper than the limit, scan saw no excess");
  // nlohmann ends the text at a NUL byte outside a string and ignores the
  // rest; the scan, conservatively, reads on (it may see more depth there).
  if (valid && sax.max <= limit && text.find('\0') == std::string::npos)
    Check(!excess.has_value(), "valid text within the limit reported as too deep");

  const skipkv::Status st = skipkv::CheckJsonDepth(text, "f.json", 7, limit);
  Check(st.ok() == !excess.has_value(), "CheckJsonDepth agrees with FindJsonDepthExcess");
  if (!st.ok()) Check(st.message().rfind("f.json:", 0) == 0, "the message starts with FILE:LINE");

  // The production limit: what passes is safe for nlohmann's recursive paths.
  if (!skipkv::FindJsonDepthExcess(text)) {
    const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_discarded()) {
      const nlohmann::json copy = doc;
      Check(copy == doc, "a copy compares equal");
      const std::string out = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      Check(!out.empty(), "dump is non-empty");
    }
  }
  return 0;
}
