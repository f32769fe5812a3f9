// Token-id sets for SkipKV (see token_sets.h).
#include "sentence/token_sets.h"

#include "skipkv/kv_config.h"

#include <algorithm>

namespace skipkv {

namespace {

EncodeOptions PlainEncode() {
  EncodeOptions o;
  o.add_special = false;   // no BOS/EOS: the ids of the string itself
  o.parse_special = true;  // "<think>" is its control token
  return o;
}

void SortUnique(std::vector<int32_t>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

bool Contains(const std::vector<int32_t>& sorted, int32_t id) {
  return std::binary_search(sorted.begin(), sorted.end(), id);
}

std::string Escape(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      static const char* kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// The single id of `s`'s encoding, or -1 if it is not exactly one token.
int32_t SingleId(const Tokenizer& tok, std::string_view s) {
  const std::vector<TokenId> ids = tok.Encode(s, PlainEncode());
  return ids.size() == 1 ? ids[0] : -1;
}

std::string IdList(const Tokenizer& tok, const std::vector<TokenId>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(ids[i]) + " \"" + Escape(tok.TokenBytes(ids[i])) + "\"";
  }
  return out + "]";
}

}  // namespace

std::vector<std::string> NonExecKeywordVariants() { return DefaultNonExecKeywords(); }

bool SkipkvTokenSets::IsDelimiter(int32_t id) const { return Contains(delimiters, id); }
bool SkipkvTokenSets::IsNonExec(int32_t id) const { return Contains(nonexec, id); }
bool SkipkvTokenSets::IsSplit(int32_t id) const { return Contains(split, id); }

StatusOr<SkipkvTokenSets> BuildSkipkvTokenSets(const Tokenizer& tok, std::span<const std::string> delimiters,
                                               std::span<const std::string> keywords) {
  if (delimiters.empty()) return InvalidArgument("skipkv token sets: no sentence delimiters given");
  SkipkvTokenSets sets;
  for (const std::string& d : delimiters) {
    if (d.empty()) return InvalidArgument("skipkv token sets: a sentence delimiter is an empty string");
    const std::vector<TokenId> ids = tok.Encode(d, PlainEncode());
    if (ids.empty()) {
      return InvalidArgument("skipkv token sets: delimiter \"" + Escape(d) + "\" encodes to no token");
    }
    sets.delimiters.push_back(ids.back());  // spec §1.3: the last id of the encoding
  }
  SortUnique(&sets.delimiters);
  const std::vector<std::string> defaults = NonExecKeywordVariants();
  if (keywords.empty()) keywords = defaults;
  for (const std::string& k : keywords) {
    const int32_t id = SingleId(tok, k);
    if (id >= 0) {
      sets.nonexec.push_back(id);
    } else {
      sets.nonexec_text.push_back(k);
    }
  }
  SortUnique(&sets.nonexec);
  sets.split = tok.IdsWhoseTextContains("\n\n");
  SortUnique(&sets.split);
  sets.think_start = SingleId(tok, "<think>");
  sets.think_end = SingleId(tok, "</think>");
  return sets;
}

std::string DescribeSkipkvTokenSets(const Tokenizer& tok, std::span<const std::string> delimiters,
                                    const SkipkvTokenSets& sets) {
  std::string out = "delimiters D (last id of each encoding):\n";
  for (const std::string& d : delimiters) {
    const std::vector<TokenId> ids = tok.Encode(d, PlainEncode());
    out += "  \"" + Escape(d) + "\" -> " + IdList(tok, ids);
    if (!ids.empty()) out += " -> " + std::to_string(ids.back());
    out += '\n';
  }
  out += "  D = " + IdList(tok, sets.delimiters) + "\n";
  out += "non-execution keywords N (single-token variants; others matched on text):\n";
  for (const std::string& k : NonExecKeywordVariants()) {
    const std::vector<TokenId> ids = tok.Encode(k, PlainEncode());
    out += "  \"" + Escape(k) + "\" -> " + IdList(tok, ids) + (ids.size() == 1 ? " id\n" : " text\n");
  }
  out += "  N = " + IdList(tok, sets.nonexec) + "\n";
  out += "  text fallback = [";
  for (size_t i = 0; i < sets.nonexec_text.size(); ++i) {
    out += (i ? ", \"" : "\"") + Escape(sets.nonexec_text[i]) + "\"";
  }
  out += "]\n";
  out += "think: start = " + std::to_string(sets.think_start) + ", end = " + std::to_string(sets.think_end) +
         "\n";
  out += "SPLIT (text contains \"\\n\\n\"): " + std::to_string(sets.split.size()) + " ids " +
         IdList(tok, sets.split) + "\n";
  return out;
}

}  // namespace skipkv
