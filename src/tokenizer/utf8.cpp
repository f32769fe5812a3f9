// UTF-8 decoding per RFC 3629 / Unicode Table 3-7 (well-formed byte sequences).
#include "tokenizer/utf8.h"

namespace skipkv::utf8 {
namespace {

// Valid range of the second byte, which depends on the lead byte (this is
// what rules out overlong forms, surrogates and code points > U+10FFFF).
inline bool SecondByteOk(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

inline bool IsCont(uint8_t b) { return (b & 0xC0) == 0x80; }

}  // namespace

DecodeResult Decode(const char* s, size_t n, uint32_t* cp, size_t* len) {
  const auto* u = reinterpret_cast<const uint8_t*>(s);
  if (n == 0) {
    *len = 0;
    return DecodeResult::kIncomplete;
  }
  const size_t need = SequenceLength(u[0]);
  if (need == 0) {
    *len = 1;
    return DecodeResult::kInvalid;
  }
  if (need == 1) {
    *cp = u[0];
    *len = 1;
    return DecodeResult::kOk;
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= n) {
      *len = n;
      return DecodeResult::kIncomplete;
    }
    const bool ok = i == 1 ? SecondByteOk(u[0], u[1]) : IsCont(u[i]);
    if (!ok) {
      *len = 1;
      return DecodeResult::kInvalid;
    }
  }
  uint32_t c = u[0] & (0x7F >> need);
  for (size_t i = 1; i < need; ++i) c = (c << 6) | (u[i] & 0x3F);
  *cp = c;
  *len = need;
  return DecodeResult::kOk;
}

bool IsValid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp;
    size_t len;
    if (Decode(s.data() + i, s.size() - i, &cp, &len) != DecodeResult::kOk) return false;
    i += len;
  }
  return true;
}

void Append(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t IncompleteTail(std::string_view s) {
  // A sequence is at most 4 bytes, so only the last 3 bytes can be a
  // pending prefix. Find the last lead byte among them and check it.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const uint8_t b = static_cast<uint8_t>(s[n - back]);
    if (IsCont(b)) continue;
    uint32_t cp;
    size_t len;
    if (Decode(s.data() + n - back, back, &cp, &len) == DecodeResult::kIncomplete) return back;
    return 0;
  }
  return 0;
}

std::string Sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    uint32_t cp;
    size_t len;
    switch (Decode(s.data() + i, s.size() - i, &cp, &len)) {
      case DecodeResult::kOk:
        out.append(s.data() + i, len);
        i += len;
        break;
      case DecodeResult::kIncomplete:  // truncated at the end: one replacement
        out.append("\xEF\xBF\xBD");
        i = s.size();
        break;
      case DecodeResult::kInvalid: {
        // One replacement per maximal invalid subpart: the bad byte plus the
        // following bytes that still extended a valid prefix.
        out.append("\xEF\xBF\xBD");
        size_t j = i + 1;
        while (j < s.size()) {
          uint32_t c2;
          size_t l2;
          if (Decode(s.data() + i, j + 1 - i, &c2, &l2) != DecodeResult::kIncomplete) break;
          ++j;
        }
        i = j;
        break;
      }
    }
  }
  return out;
}

}  // namespace skipkv::utf8
