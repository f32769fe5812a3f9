// LiveCodeBench rows without running code: the pickled-string reader on
// pickles written by CPython 3.11 (protocols 1-5) and on hostile ones, the
// base64 + zlib + pickle test-case decoder, row checks naming FILE:LINE and
// the field, the prompt, the code extraction and LiveCodeBench's stdout
// comparison rules (hand-worked verdicts).
#include <gtest/gtest.h>
#include <zlib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "eval/code_grader.h"
#include "eval/lcb_decode.h"
#include "eval/lcb_problem.h"

namespace skipkv::eval {
namespace {

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

const std::string kJson = R"([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}])";
const std::string kJsonHex =
    "5b7b22696e707574223a20223120325c6e222c20226f7574707574223a2022335c6e222c20227465737474797065223a2022737464696e22"
    "7d5d";

// pickle.dumps(kJson, protocol=p) from CPython 3.11.
TEST(LcbPickle, ReadsCPythonPicklesOfAString) {
  const std::string p1 = "583a000000" + kJsonHex + "71002e";
  const std::string p4 = "8004953e000000000000008c3a" + kJsonHex + "942e";
  for (const std::string& hex : {p1, "8002" + p1, "8003" + p1, p4, "8005" + p4.substr(4)}) {
    auto s = UnpickleString(FromHex(hex));
    ASSERT_TRUE(s.ok()) << hex << ": " << s.status().message();
    EXPECT_EQ(*s, kJson);
  }
  auto utf8 = UnpickleString(FromHex("8004950a000000000000008c06c3a9c3a9c3a9942e"));
  ASSERT_TRUE(utf8.ok());
  EXPECT_EQ(*utf8, "\xc3\xa9\xc3\xa9\xc3\xa9");
}

TEST(LcbPickle, RefusesEverythingButOneString) {
  struct Case {
    std::string hex, error;
  } cases[] = {
      // pickle.dumps([1], protocol=4): EMPTY_LIST is not accepted.
      {"80049506000000000000005d944b01612e", "opcode 0x5d at byte 11"},
      // The classic exploit: GLOBAL os.system, a string, TUPLE, REDUCE.
      {"636f730a73797374656d0a28530a74522e", "opcode 0x63 at byte 0"},
      {"8004", "no STOP"},
      {"8006", "protocol 6"},
      {"2e", "0 values on the stack"},
      {"8c03616161" "8c0162" "2e", "2 values on the stack"},
      {"8c0a6162", "runs past the end"},
      {"58ffffff7f2e", "runs past the end"},
      {"8c01612e00", "1 bytes after STOP"},
      {"942e", "MEMOIZE at byte 0 with an empty stack"},
      {"8c0161" "68002e", "opcode 0x68"},  // BINGET: the memo is never read
  };
  for (const auto& c : cases) {
    auto s = UnpickleString(FromHex(c.hex));
    ASSERT_FALSE(s.ok()) << c.hex;
    EXPECT_NE(s.status().message().find(c.error), std::string::npos) << c.hex << ": " << s.status().message();
  }
}

std::string Compress(const std::string& s) {
  uLongf n = compressBound(s.size());
  std::string out(n, '\0');
  EXPECT_EQ(compress(reinterpret_cast<Bytef*>(out.data()), &n, reinterpret_cast<const Bytef*>(s.data()), s.size()), Z_OK);
  out.resize(n);
  return out;
}

std::string Base64(const std::string& s) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < s.size(); i += 3) {
    const uint32_t v = (uint8_t(s[i]) << 16) | (uint8_t(s[i + 1]) << 8) | uint8_t(s[i + 2]);
    for (int k6 = 18; k6 >= 0; k6 -= 6) out.push_back(k[(v >> k6) & 63]);
  }
  if (i < s.size()) {
    uint32_t v = uint8_t(s[i]) << 16;
    if (i + 1 < s.size()) v |= uint8_t(s[i + 1]) << 8;
    out.push_back(k[(v >> 18) & 63]);
    out.push_back(k[(v >> 12) & 63]);
    out.push_back(i + 1 < s.size() ? k[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

// A protocol-4 pickle of `s` (what LiveCodeBench's pickle.dumps writes).
std::string Pickle4(const std::string& s) {
  std::string body = "\x8d";
  for (int i = 0; i < 8; ++i) body.push_back(static_cast<char>((uint64_t(s.size()) >> (8 * i)) & 0xff));
  body += s + "\x94.";
  return std::string("\x80\x04", 2) + body;
}

TEST(LcbDecode, StoredFormsAndErrors) {
  // base64(zlib(pickle)) exactly as CPython wrote it for kJson.
  auto t = DecodeTestCases("eJxrYJlqxwABPVbR1UqZeQWlJUpWCkqGCkYxeUo6Ckr5pSVQIWOIQElqcUlJZUEqSKi4JCUzT6k2dooeALEqFJ0=");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ((*t)[0].input, "1 2\n");
  EXPECT_EQ((*t)[0].output, "3\n");
  EXPECT_EQ((*t)[0].style, TestStyle::kStdin);
  // Plain JSON (public_test_cases) and a BINUNICODE8 pickle built here.
  auto plain = DecodeTestCases(R"([{"input":"[1]\n2","output":"3","testtype":"functional"}])");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)[0].style, TestStyle::kFunctional);
  auto built = DecodeTestCases(Base64(Compress(Pickle4(kJson))));
  ASSERT_TRUE(built.ok()) << built.status().message();
  EXPECT_EQ((*built)[0].output, "3\n");

  struct Case {
    std::string field, error;
  } cases[] = {
      {"not*base64", "base64: byte 0x2a at offset 3"},
      {"abc", "not a whole number"},
      {Base64("plainly not zlib"), "zlib"},
      {Base64(Compress(Pickle4(kJson)).substr(0, 20)), "truncated"},
      {Base64(Compress("cos\nsystem\n(S'x'\ntR.")), "opcode 0x63"},
      {Base64(Compress(Pickle4("{}"))), "not a list"},
      {R"([{"input": 1, "output": "", "testtype": "stdin"}])", "test 0: field 'input' is a number"},
      {R"([{"input": "", "output": "", "testtype": "bash"}])", "not stdin or functional"},
      {"[1,", "not valid JSON"},
  };
  for (const auto& c : cases) {
    auto r = DecodeTestCases(c.field);
    ASSERT_FALSE(r.ok()) << c.field;
    EXPECT_NE(r.status().message().find(c.error), std::string::npos) << r.status().message();
  }
  // A zlib bomb stops at the cap.
  auto big = ZlibInflate(Compress(std::string(1 << 20, 'a')), 1000);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("more than 1000 bytes"), std::string::npos);
}

nlohmann::json Row() {
  return {{"question_title", "Add"},
          {"question_content", "Add two numbers."},
          {"platform", "atcoder"},
          {"question_id", "abc001_a"},
          {"contest_id", "abc001"},
          {"contest_date", "2023-05-01T00:00:00"},
          {"starter_code", ""},
          {"difficulty", "easy"},
          {"public_test_cases", kJson},
          {"private_test_cases", Base64(Compress(Pickle4(kJson)))},
          {"metadata", "{}"}};
}

TEST(LcbRow, ParsesAndNamesBadFields) {
  auto p = ParseLcbRow(Row(), "lcb.jsonl:3");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->tests.size(), 2u);
  EXPECT_EQ(p->style, TestStyle::kStdin);
  EXPECT_EQ(p->question_id, "abc001_a");

  auto functional = Row();
  functional["public_test_cases"] = R"([{"input":"[1, 2]\n3","output":"6","testtype":"functional"}])";
  functional["private_test_cases"] = "";
  functional["starter_code"] = "class Solution:\n    def f(self, a, b):\n        ";
  functional["metadata"] = R"({"func_name": "f"})";
  auto f = ParseLcbRow(functional, "x:1");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->func_name, "f");
  EXPECT_EQ(f->style, TestStyle::kFunctional);

  struct Case {
    const char* field;
    nlohmann::json value;
    std::string error;
  } cases[] = {
      {"question_content", "  ", "lcb.jsonl:3: field 'question_content' is missing or empty"},
      {"question_content", 5, "lcb.jsonl:3: field 'question_content' must be a string"},
      {"private_test_cases", "@@@@", "lcb.jsonl:3: field 'private_test_cases': base64"},
      {"public_test_cases", "[]", "hold no tests"},
      {"metadata", "{", "lcb.jsonl:3: field 'metadata' is a string that is not JSON"},
  };
  for (const auto& c : cases) {
    auto row = Row();
    row[c.field] = c.value;
    if (std::string(c.field) == "public_test_cases") row["private_test_cases"] = "";
    auto r = ParseLcbRow(row, "lcb.jsonl:3");
    ASSERT_FALSE(r.ok()) << c.field;
    EXPECT_NE(r.status().message().find(c.error), std::string::npos) << r.status().message();
  }
  auto no_name = functional;
  no_name["metadata"] = "{}";
  EXPECT_NE(ParseLcbRow(no_name, "x:1").status().message().find("'metadata.func_name' is required"), std::string::npos);
  no_name["metadata"] = R"({"func_name": "f(); import os"})";
  EXPECT_NE(ParseLcbRow(no_name, "x:1").status().message().find("not a Python identifier"), std::string::npos);
  auto mixed = Row();
  mixed["private_test_cases"] = R"([{"input":"1","output":"1","testtype":"functional"}])";
  EXPECT_NE(ParseLcbRow(mixed, "x:1").status().message().find("one style per problem"), std::string::npos);
}

TEST(LcbPrompt, DeepSeekCodeTemplate) {
  CodeProblem p;
  p.question_content = "Q?";
  EXPECT_EQ(LcbPrompt(p),
            "### Instruction: You will be given a question (problem specification) and will generate a correct "
            "Python program that matches the specification and passes all tests. You will NOT return anything "
            "except for the program.\n\nQuestion:\nQ?\n\n### Instruction: Read the inputs from stdin solve the "
            "problem and write the answer to stdout (do not directly test on the sample inputs). Enclose your code "
            "within delimiters as follows.\n```python\n# YOUR CODE HERE\n```\n\n### Response:\n\n");
  p.starter_code = "class Solution:\n    def f(self):";
  const std::string s = LcbPrompt(p);
  EXPECT_NE(s.find("### Instruction: You will use the following starter code to write the solution to the problem "
                   "and enclose your code within delimiters.\n```python\nclass Solution:\n    def f(self):\n```\n\n"
                   "### Response:\n\n"),
            std::string::npos);
}

TEST(LcbExtract, LastFencedBlock) {
  EXPECT_EQ(ExtractCode("think ```python\nx=1\n```\nso\n```python\nprint(2)\nprint(3)\n```\n"), "print(2)\nprint(3)");
  EXPECT_EQ(ExtractCode("```\na\n```"), "a");
  EXPECT_EQ(ExtractCode("```python\n```"), "");
  EXPECT_EQ(ExtractCode("no code"), "");
  EXPECT_EQ(ExtractCode("```python\nunclosed"), "");
  // Output after a stop string is ignored.
  EXPECT_EQ(ExtractCode("```python\nA\n```<|im_end|>```python\nB\n```"), "A");
}

TEST(LcbCompare, LiveCodeBenchRules) {
  EXPECT_TRUE(LcbOutputMatches("3\n", "3"));
  EXPECT_TRUE(LcbOutputMatches("  a b \n c\n\n", "a b\nc"));
  EXPECT_FALSE(LcbOutputMatches("a  b", "a b"));  // inner spaces: not numbers, text differs
  EXPECT_TRUE(LcbOutputMatches("1  2", "1 2"));   // as decimals, token by token
  EXPECT_TRUE(LcbOutputMatches("1.50 2", "1.5 2.0"));
  EXPECT_TRUE(LcbOutputMatches("1e2", "100"));
  EXPECT_TRUE(LcbOutputMatches("-0", "0.000"));
  EXPECT_TRUE(LcbOutputMatches("1_000", "1000"));
  EXPECT_FALSE(LcbOutputMatches("0.333333", "0.3333333"));  // no tolerance: Decimal equality
  EXPECT_TRUE(LcbOutputMatches("nan", "nan"));       // equal as text
  EXPECT_FALSE(LcbOutputMatches("nan 1", "nan 1.0"));  // as decimals NaN is never equal
  EXPECT_TRUE(LcbOutputMatches("Infinity", "inf"));
  EXPECT_FALSE(LcbOutputMatches("1\n2", "1 2"));
  EXPECT_FALSE(LcbOutputMatches("1\n\n2", "1\n2"));  // inner empty line counts
  EXPECT_FALSE(LcbOutputMatches("Yes", "yes"));
  EXPECT_FALSE(LcbOutputMatches("", "0"));
  EXPECT_TRUE(LcbOutputMatches("", "  \n"));
  EXPECT_FALSE(LcbOutputMatches("12", "1 2"));
  EXPECT_TRUE(LcbOutputMatches("1.2.3", "1.2.3 "));  // equal after stripping, as text
}

}  // namespace
}  // namespace skipkv::eval
