// util/json_depth: the nesting-depth scan run before any outside JSON is
// parsed (issue 43). Depths are checked against nlohmann's own parse of the
// same text; the scan runs on a 64 KiB stack over 10^6 levels (a recursive
// scan could not).
#include "util/json_depth.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <nlohmann/json.hpp>
#include <string>

namespace skipkv {
namespace {

// `depth` nested arrays ("[[]]") or objects ("{"k":{"k":0}}").
std::string Nested(int depth, char open = '[') {
  std::string s;
  for (int i = 0; i < depth; ++i) s += open == '[' ? "[" : "{\"k\":";
  if (open == '{') s += "0";
  return s + std::string(depth, open == '[' ? ']' : '}');
}

// nlohmann's deepest level for a valid text (its SAX parse is iterative).
int NlohmannDepth(const std::string& text) {
  struct Sax : nlohmann::json_sax<nlohmann::json> {
    int depth = 0, max = 0;
    bool open() {
      max = std::max(max, ++depth);
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
  } sax;
  EXPECT_TRUE(nlohmann::json::sax_parse(text, &sax)) << text.substr(0, 80);
  return sax.max;
}

TEST(JsonDepthTest, LimitIsInclusiveAndAgreesWithTheParser) {
  for (char open : {'[', '{'}) {
    const std::string at = Nested(kMaxJsonDepth, open), over = Nested(kMaxJsonDepth + 1, open);
    EXPECT_EQ(NlohmannDepth(at), kMaxJsonDepth);
    EXPECT_EQ(NlohmannDepth(over), kMaxJsonDepth + 1);
    EXPECT_FALSE(FindJsonDepthExcess(at).has_value()) << open;
    const auto e = FindJsonDepthExcess(over);
    ASSERT_TRUE(e.has_value()) << open;
    EXPECT_EQ(e->max_depth, kMaxJsonDepth);
    // The bracket that opened level 513: the 513th '[' / the 513th '{"k":'.
    EXPECT_EQ(e->offset, open == '[' ? 512u : 512u * 5);
    EXPECT_EQ(e->line, 1);
    EXPECT_EQ(e->column, static_cast<int64_t>(e->offset) + 1);
  }
  // Small limits, mixed arrays and objects.
  const std::string mixed = R"({"a":[{"b":[1,{"c":[]}]}],"d":2})";
  EXPECT_EQ(NlohmannDepth(mixed), 6);
  EXPECT_FALSE(FindJsonDepthExcess(mixed, 6));
  ASSERT_TRUE(FindJsonDepthExcess(mixed, 5));
  EXPECT_EQ(FindJsonDepthExcess(mixed, 5)->offset, mixed.find("[]"));
}

TEST(JsonDepthTest, BracketsInStringsAndEscapesDoNotCount) {
  // Strings full of brackets, escaped quotes and a trailing escaped backslash.
  const std::string s = R"({"k\"[[[":"[[[[{{{{","x":["\\",  "\"]]]]]\\\"[[[[", "\u005b["]})";
  EXPECT_EQ(NlohmannDepth(s), 2);
  EXPECT_FALSE(FindJsonDepthExcess(s, 2));
  EXPECT_TRUE(FindJsonDepthExcess(s, 1));
  // A closing bracket with nothing open does not make depth negative.
  EXPECT_FALSE(FindJsonDepthExcess("]]]]][[", 2));
  EXPECT_TRUE(FindJsonDepthExcess("]]]]][[[", 2));
  // An unterminated string hides everything after it.
  EXPECT_FALSE(FindJsonDepthExcess("[\"[[[[[[", 2));
}

TEST(JsonDepthTest, NamesTheTopLevelMemberAndTheLine) {
  const std::string deep = Nested(600);
  auto e = FindJsonDepthExcess(R"({"model":"x","messages":)" + deep + "}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->top_key, "messages");
  e = FindJsonDepthExcess(R"({"messages":[{"role":"user","content":)" + deep + "}]}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->top_key, "messages");
  e = FindJsonDepthExcess(R"({"kv":{"policy":"rkv","budget":)" + deep + "}}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->top_key, "kv");
  e = FindJsonDepthExcess("[" + deep + "]");  // not an object: no member
  ASSERT_TRUE(e);
  EXPECT_EQ(e->top_key, "");
  // Long and control-byte keys are cut and masked.
  e = FindJsonDepthExcess("{\"" + std::string(100, 'k') + "\x01\":" + deep + "}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->top_key, std::string(64, 'k'));
  e = FindJsonDepthExcess("{\"a\x1b\":" + deep + "}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->top_key, "a?");
  // Line and column of the offending bracket in a multi-line file.
  const std::string file = "{\n  \"model\": {\n    \"vocab\": " + deep + "\n}}";
  e = FindJsonDepthExcess(file);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->line, 3);
  EXPECT_EQ(e->column, static_cast<int64_t>(std::string("    \"vocab\": ").size()) + 511);
  EXPECT_EQ(e->top_key, "model");
  const Status st = CheckJsonDepth(file, "dir/tokenizer.json");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "dir/tokenizer.json:3: JSON nested deeper than 512 levels (in 'model', column " +
                              std::to_string(e->column) + "); not parsed");
  // A JSONL reader gives the line's own number.
  EXPECT_EQ(CheckJsonDepth(deep, "data.jsonl", 41).message(),
            "data.jsonl:41: JSON nested deeper than 512 levels (column 513); not parsed");
  EXPECT_TRUE(CheckJsonDepth(Nested(512), "x").ok());
}

// 10^6 levels on a 64 KiB stack: the scan is a loop, whatever the depth.
TEST(JsonDepthTest, MillionLevelsOnASmallStack) {
  struct Arg {
    std::string text;
    std::optional<JsonDepthExcess> at_limit, unlimited;
  } arg;
  arg.text = std::string(1000000, '[') + std::string(1000000, ']');
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, 64 * 1024), 0);
  pthread_t t;
  ASSERT_EQ(pthread_create(
                &t, &attr,
                [](void* p) -> void* {
                  auto* a = static_cast<Arg*>(p);
                  a->at_limit = FindJsonDepthExcess(a->text);
                  a->unlimited = FindJsonDepthExcess(a->text, 1000000);
                  return nullptr;
                },
                &arg),
            0);
  ASSERT_EQ(pthread_join(t, nullptr), 0);
  pthread_attr_destroy(&attr);
  ASSERT_TRUE(arg.at_limit);
  EXPECT_EQ(arg.at_limit->offset, 512u);
  EXPECT_FALSE(arg.unlimited);
}

}  // namespace
}  // namespace skipkv
