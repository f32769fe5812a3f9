#include "util/json_depth.h"
#include "eval/lcb_decode.h"

#include <zlib.h>

#include <cstring>
#include <nlohmann/json.hpp>

namespace skipkv::eval {
namespace {

std::string Hex(unsigned v) {
  char b[8];
  std::snprintf(b, sizeof b, "0x%02x", v & 0xff);
  return b;
}

uint64_t LittleEndian(std::string_view p, size_t pos, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[pos + i])) << (8 * i);
  return v;
}

}  // namespace

StatusOr<std::string> UnpickleString(std::string_view p) {
  // Opcode values from CPython's Lib/pickletools.py (the pickle format's documentation).
  enum : unsigned char {
    kProto = 0x80,
    kFrame = 0x95,
    kShortBinUnicode = 0x8c,
    kBinUnicode = 'X',
    kBinUnicode8 = 0x8d,
    kMemoize = 0x94,
    kBinPut = 'q',
    kLongBinPut = 'r',
    kStop = '.',
  };
  std::vector<std::string> stack;  // only strings are ever pushed
  size_t pos = 0;
  auto need = [&](size_t n, const char* what) -> Status {
    if (p.size() - pos < n)
      return CorruptData("pickle: " + std::string(what) + " at byte " + std::to_string(pos) +
                         " runs past the end (" + std::to_string(p.size()) + " bytes)");
    return Status::Ok();
  };
  while (pos < p.size()) {
    const auto op = static_cast<unsigned char>(p[pos]);
    const size_t at = pos++;
    switch (op) {
      case kProto: {
        SKIPKV_RETURN_IF_ERROR(need(1, "PROTO"));
        const unsigned v = static_cast<unsigned char>(p[pos++]);
        if (v > 5) return CorruptData("pickle: protocol " + std::to_string(v) + " is not 0-5");
        break;
      }
      case kFrame:  // a length hint for buffered readers; the content follows inline
        SKIPKV_RETURN_IF_ERROR(need(8, "FRAME"));
        pos += 8;
        break;
      case kShortBinUnicode:
      case kBinUnicode:
      case kBinUnicode8: {
        const size_t width = op == kShortBinUnicode ? 1 : op == kBinUnicode ? 4 : 8;
        SKIPKV_RETURN_IF_ERROR(need(width, "string length"));
        const uint64_t n = LittleEndian(p, pos, width);
        pos += width;
        if (n > p.size() - pos)
          return CorruptData("pickle: string of " + std::to_string(n) + " bytes at byte " + std::to_string(at) +
                             " runs past the end (" + std::to_string(p.size() - pos) + " left)");
        stack.emplace_back(p.substr(pos, n));
        pos += n;
        break;
      }
      case kMemoize:  // the memo is never read back (no GET opcodes are accepted)
        if (stack.empty()) return CorruptData("pickle: MEMOIZE at byte " + std::to_string(at) + " with an empty stack");
        break;
      case kBinPut:
      case kLongBinPut:
        SKIPKV_RETURN_IF_ERROR(need(op == kBinPut ? 1 : 4, "PUT index"));
        pos += op == kBinPut ? 1 : 4;
        if (stack.empty()) return CorruptData("pickle: PUT at byte " + std::to_string(at) + " with an empty stack");
        break;
      case kStop:
        if (stack.size() != 1)
          return CorruptData("pickle: STOP at byte " + std::to_string(at) + " with " +
                             std::to_string(stack.size()) + " values on the stack (expected one string)");
        if (pos != p.size())
          return CorruptData("pickle: " + std::to_string(p.size() - pos) + " bytes after STOP");
        return std::move(stack.back());
      default:
        return CorruptData("pickle: opcode " + Hex(op) + " at byte " + std::to_string(at) +
                           " is not accepted (only a pickled str is: PROTO, FRAME, *BINUNICODE*, MEMOIZE, "
                           "BINPUT, LONG_BINPUT, STOP)");
    }
  }
  return CorruptData("pickle: no STOP opcode (" + std::to_string(p.size()) + " bytes)");
}

StatusOr<std::string> Base64Decode(std::string_view text) {
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0, symbols = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else if (c == '=') { ++pad; ++symbols; continue; }
    else if (c == '\n' || c == '\r' || c == ' ' || c == '\t') continue;
    else return CorruptData("base64: byte " + Hex(static_cast<unsigned char>(c)) + " at offset " + std::to_string(i) + " is not base64");
    if (pad) return CorruptData("base64: data after '=' padding at offset " + std::to_string(i));
    ++symbols;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (symbols % 4 != 0 || pad > 2)
    return CorruptData("base64: " + std::to_string(symbols) + " symbols is not a whole number of 4-symbol groups");
  return out;
}

StatusOr<std::string> ZlibInflate(std::string_view data, size_t max_out) {
  z_stream z;
  std::memset(&z, 0, sizeof z);
  if (inflateInit(&z) != Z_OK) return Internal("zlib: inflateInit failed");
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());  // callers' fields are far below 4 GiB (checked)
  if (data.size() > UINT32_MAX) {
    inflateEnd(&z);
    return CorruptData("zlib: input of " + std::to_string(data.size()) + " bytes is too large");
  }
  int rc = Z_OK;
  char buf[1 << 16];
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      const std::string msg = z.msg ? z.msg : "error " + std::to_string(rc);
      inflateEnd(&z);
      if (rc == Z_BUF_ERROR) return CorruptData("zlib: the stream is truncated");
      return CorruptData("zlib: " + msg);
    }
    const size_t got = sizeof buf - z.avail_out;
    if (out.size() + got > max_out) {
      inflateEnd(&z);
      return CorruptData("zlib: inflates to more than " + std::to_string(max_out) + " bytes");
    }
    out.append(buf, got);
  }
  const size_t rest = z.avail_in;
  inflateEnd(&z);
  if (rest != 0) return CorruptData("zlib: " + std::to_string(rest) + " bytes after the end of the stream");
  return out;
}

const char* TestStyleName(TestStyle s) { return s == TestStyle::kStdin ? "stdin" : "functional"; }

namespace {

StatusOr<std::vector<CodeTest>> ParseTestList(std::string_view json_text) {
  if (FindJsonDepthExcess(json_text)) {
    return CorruptData("test cases are JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  auto v = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return CorruptData("test cases are not valid JSON");
  if (!v.is_array()) return CorruptData(std::string("test cases are a JSON ") + v.type_name() + ", not a list");
  std::vector<CodeTest> tests;
  tests.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const auto& t = v[i];
    const std::string where = "test " + std::to_string(i);
    if (!t.is_object()) return CorruptData(where + " is not an object");
    CodeTest c;
    for (const char* f : {"input", "output", "testtype"}) {
      auto it = t.find(f);
      if (it == t.end() || !it->is_string())
        return CorruptData(where + ": field '" + f + "' is " + (it == t.end() ? "missing" : std::string("a ") + it->type_name()) +
                           ", expected a string");
    }
    c.input = t["input"].get<std::string>();
    c.output = t["output"].get<std::string>();
    const std::string type = t["testtype"].get<std::string>();
    if (type == "stdin") {
      c.style = TestStyle::kStdin;
    } else if (type == "functional") {
      c.style = TestStyle::kFunctional;
    } else {
      return CorruptData(where + ": field 'testtype' is '" + type.substr(0, 40) + "', not stdin or functional");
    }
    tests.push_back(std::move(c));
  }
  return tests;
}

}  // namespace

StatusOr<std::vector<CodeTest>> DecodeTestCases(std::string_view field) {
  const size_t first = field.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && field[first] == '[') return ParseTestList(field);
  SKIPKV_ASSIGN_OR_RETURN(std::string compressed, Base64Decode(field));
  SKIPKV_ASSIGN_OR_RETURN(std::string pickled, ZlibInflate(compressed));
  SKIPKV_ASSIGN_OR_RETURN(std::string text, UnpickleString(pickled));
  return ParseTestList(text);
}

}  // namespace skipkv::eval
