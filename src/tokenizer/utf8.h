// UTF-8 helpers shared by the tokenizers and the detokenizer. Everything here
// works on raw bytes: tokenizer input may be arbitrary (invalid UTF-8 is
// tokenized losslessly through byte tokens), and decoded token bytes may stop
// in the middle of a character.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace skipkv::utf8 {

// Length of the sequence a lead byte announces: 1..4, or 0 for a byte that
// cannot start a sequence (continuation bytes 0x80..0xBF, 0xC0, 0xC1, 0xF5..0xFF).
inline size_t SequenceLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

// Result of decoding one character at the start of a byte range.
enum class DecodeResult {
  kOk,          // a complete, valid (shortest form, no surrogate) code point
  kIncomplete,  // a valid prefix of a sequence that needs more bytes
  kInvalid,     // the first byte can never start a valid sequence here
};

// Decodes the code point at s[0..n). On kOk sets *cp and *len; on kInvalid
// sets *len = 1 (skip one byte); on kIncomplete sets *len = n.
DecodeResult Decode(const char* s, size_t n, uint32_t* cp, size_t* len);

// True if the whole string is valid UTF-8.
bool IsValid(std::string_view s);

// Appends the UTF-8 encoding of `cp` (must be <= 0x10FFFF, not a surrogate).
void Append(uint32_t cp, std::string* out);

// Number of bytes at the end of `s` that form a valid but incomplete sequence
// (0..3): the bytes a streaming decoder must hold back.
size_t IncompleteTail(std::string_view s);

// Copies `s`, replacing every invalid byte / truncated sequence by U+FFFD
// (one replacement per maximal invalid subpart, as the Unicode standard advises).
std::string Sanitize(std::string_view s);

}  // namespace skipkv::utf8
