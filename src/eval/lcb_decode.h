// LiveCodeBench's stored test cases (code_generation_lite rows): the public
// tests are a JSON string of [{"input", "output", "testtype"}, ...]; the
// private tests are either that JSON or base64(zlib(pickle.dumps(json_text))),
// a pickled *string*. The pickle reader here accepts only the opcodes that
// serialise one str (protocols 1-5; protocol 0 text opcodes are refused) and never builds any other object:
// anything else is a CorruptData naming the opcode and its offset.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace skipkv::eval {

// Upper bound on what one field may decode to (zlib bombs): 1 GiB.
inline constexpr size_t kMaxDecodedTestBytes = size_t{1} << 30;

// The str a pickle holds. Accepted opcodes: PROTO, FRAME, SHORT_BINUNICODE,
// BINUNICODE, BINUNICODE8, MEMOIZE, BINPUT, LONG_BINPUT, STOP; exactly one
// string must be on the stack at STOP, and nothing may follow STOP.
StatusOr<std::string> UnpickleString(std::string_view pickle);

// Standard base64 (RFC 4648 alphabet, '=' padding, whitespace ignored).
StatusOr<std::string> Base64Decode(std::string_view text);

// zlib (RFC 1950) inflate of a whole stream, at most `max_out` bytes out.
StatusOr<std::string> ZlibInflate(std::string_view data, size_t max_out = kMaxDecodedTestBytes);

enum class TestStyle { kStdin, kFunctional };
const char* TestStyleName(TestStyle s);

struct CodeTest {
  std::string input;   // stdin text, or JSON arguments one per line (functional)
  std::string output;  // expected stdout, or the JSON of the return value (functional)
  TestStyle style = TestStyle::kStdin;
};

// A test-case field as stored: JSON text of a list of test objects, or the
// base64/zlib/pickle form of that text. Errors name what failed ("base64",
// "zlib", "pickle opcode 0x63 at byte 2", "test 3: field 'input' ...").
StatusOr<std::vector<CodeTest>> DecodeTestCases(std::string_view field);

}  // namespace skipkv::eval
