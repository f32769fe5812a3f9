// NFC normalisation and the regex split into pre-tokens; see pretokenizer.h.
#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include "tokenizer/utf8.h"

namespace skipkv {
namespace {

// NFC of one valid UTF-8 run; false if it was already normalised.
bool NfcRun(std::string_view run, std::string* out) {
  // Code points below U+0300 are NFC-stable and never compose with each
  // other; their UTF-8 lead bytes are < 0xCC. This skips ICU for ASCII and
  // most Latin text.
  bool maybe = false;
  for (char c : run) {
    if (static_cast<uint8_t>(c) >= 0xCC) {
      maybe = true;
      break;
    }
  }
  if (!maybe) return false;
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(err);
  if (U_FAILURE(err)) return false;  // ICU data missing: leave text as is
  const icu::StringPiece sp(run.data(), static_cast<int32_t>(run.size()));
  if (nfc->isNormalizedUTF8(sp, err) && U_SUCCESS(err)) return false;
  err = U_ZERO_ERROR;
  std::string res;
  icu::StringByteSink<std::string> sink(&res);
  nfc->normalizeUTF8(0, sp, sink, nullptr, err);
  if (U_FAILURE(err)) return false;
  *out = std::move(res);
  return true;
}

}  // namespace

StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(const std::string& regex, bool nfc) {
  int errcode = 0;
  PCRE2_SIZE erroffset = 0;
  // UCP: \s \w \d and case-insensitive matching use Unicode properties, as in
  // fancy-regex. MATCH_INVALID_UTF: arbitrary bytes are a valid subject.
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(regex.data()), regex.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &errcode, &erroffset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(errcode, msg, sizeof(msg));
    return Unsupported("pre-tokenizer regex does not compile with PCRE2 at offset " +
                       std::to_string(erroffset) + ": " + reinterpret_cast<const char*>(msg) +
                       " (regex: " + regex + ")");
  }
  auto p = std::unique_ptr<PreTokenizer>(new PreTokenizer());
  p->code_ = code;
  p->nfc_ = nfc;
  p->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return p;
}

PreTokenizer::~PreTokenizer() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

bool PreTokenizer::Normalize(std::string_view text, std::string* out) const {
  if (!nfc_) return false;
  if (utf8::IsValid(text)) return NfcRun(text, out);
  // Normalise each maximal valid run; copy invalid bytes through.
  std::string res;
  bool changed = false;
  size_t i = 0, run_start = 0;
  auto flush_run = [&](size_t end) {
    std::string_view run = text.substr(run_start, end - run_start);
    std::string tmp;
    if (NfcRun(run, &tmp)) {
      res += tmp;
      changed = true;
    } else {
      res.append(run);
    }
  };
  while (i < text.size()) {
    uint32_t cp;
    size_t len;
    if (utf8::Decode(text.data() + i, text.size() - i, &cp, &len) == utf8::DecodeResult::kOk) {
      i += len;
      continue;
    }
    flush_run(i);
    const size_t bad = len == 0 ? 1 : std::min(len, text.size() - i);
    res.append(text.substr(i, bad));
    i += bad;
    run_start = i;
  }
  flush_run(text.size());
  if (!changed) return false;
  *out = std::move(res);
  return true;
}

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* out) const {
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  if (md == nullptr) {  // out of memory: one pre-token keeps encoding lossless
    if (!text.empty()) out->push_back(text);
    return;
  }
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  size_t pos = 0;
  while (pos < n) {
    const int rc = pcre2_match(code, subject, n, pos, 0, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    size_t start, end;
    if (rc < 0) {
      // Resource limit (match / depth / JIT stack) on pathological input:
      // take one byte (or character) as its own pre-token and go on.
      uint32_t cp;
      size_t len;
      utf8::Decode(text.data() + pos, n - pos, &cp, &len);
      start = pos;
      end = pos + std::max<size_t>(1, std::min(len, n - pos));
    } else {
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      start = ov[0];
      end = ov[1];
      if (start < pos || end < start || end > n) break;  // cannot happen; stay safe
      if (end == start) {
        // Empty match (custom regexes only): let the gap logic take the
        // next character so the loop always advances.
        uint32_t cp;
        size_t len;
        utf8::Decode(text.data() + start, n - start, &cp, &len);
        end = start + std::max<size_t>(1, std::min(len, n - start));
      }
    }
    if (start > pos) out->push_back(text.substr(pos, start - pos));
    out->push_back(text.substr(start, end - start));
    pos = end;
  }
  if (pos < n) out->push_back(text.substr(pos));
  pcre2_match_data_free(md);
}

}  // namespace skipkv
