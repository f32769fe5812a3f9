// GPT-2 byte <-> unicode table and its conversions; see byte_level.h.
#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace skipkv::byte_level {
namespace {

struct Tables {
  std::array<uint32_t, 256> byte_to_cp{};
  std::array<std::string, 256> byte_to_utf8;
  std::array<int16_t, 324> cp_to_byte{};  // code points used are < 256 + 68

  Tables() {
    cp_to_byte.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      byte_to_cp[b] = printable(b) ? static_cast<uint32_t>(b) : next++;
      utf8::Append(byte_to_cp[b], &byte_to_utf8[b]);
      cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& T() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t ByteToCodepoint(uint8_t b) { return T().byte_to_cp[b]; }
const std::string& ByteToUtf8(uint8_t b) { return T().byte_to_utf8[b]; }

void Encode(std::string_view bytes, std::string* out) {
  const Tables& t = T();
  for (char c : bytes) out->append(t.byte_to_utf8[static_cast<uint8_t>(c)]);
}

bool Decode(std::string_view piece, std::string* out) {
  const Tables& t = T();
  size_t i = 0;
  while (i < piece.size()) {
    uint32_t cp;
    size_t len;
    if (utf8::Decode(piece.data() + i, piece.size() - i, &cp, &len) != utf8::DecodeResult::kOk) return false;
    if (cp >= t.cp_to_byte.size() || t.cp_to_byte[cp] < 0) return false;
    out->push_back(static_cast<char>(t.cp_to_byte[cp]));
    i += len;
  }
  return true;
}

}  // namespace skipkv::byte_level
