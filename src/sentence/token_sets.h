// The token-id sets SkipKV and SEAL-style steering need (spec §1.3, §6.2),
// derived once per tokenizer and shared read-only by every sequence:
//   D (delimiters): last_id(encode(s)) for each delimiter string s;
//   N (non-execution keywords): the ids of the keyword variants "Wait",
//     " Wait", "wait", " wait", "Alternatively", " Alternatively", "again",
//     " again" that encode to exactly one token; a variant that encodes to
//     more tokens is matched on the decoded text instead (A6, nonexec_text);
//   SPLIT (steering trigger): every id whose decoded bytes contain "\n\n" (A5);
//   think_start / think_end: the ids of "<think>" / "</think>" when the
//     vocabulary has them as single tokens, else -1.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace skipkv {

// The keyword variants of N, in the order above.
std::vector<std::string> NonExecKeywordVariants();

struct SkipkvTokenSets {
  std::vector<int32_t> delimiters, nonexec, split;  // each ascending, without duplicates
  int32_t think_start = -1, think_end = -1;
  // Keyword variants that are not one token (A6 text fallback): a sentence
  // whose decoded text contains one of them, starting a word (not preceded
  // by an ASCII letter or digit), is NONEXEC.
  std::vector<std::string> nonexec_text;

  bool IsDelimiter(int32_t id) const;
  bool IsNonExec(int32_t id) const;
  bool IsSplit(int32_t id) const;
};

// InvalidArgument if `delimiters` is empty, holds an empty string, or a
// delimiter encodes to no token. `keywords`: the variants of N (empty =
// NonExecKeywordVariants()); each that encodes to one token gives its id,
// the others go to nonexec_text.
StatusOr<SkipkvTokenSets> BuildSkipkvTokenSets(const Tokenizer& tok, std::span<const std::string> delimiters,
                                               std::span<const std::string> keywords = {});

// A human-readable listing for `skipkv tokenize --skipkv-sets`: each
// delimiter string with its encoding and chosen id, each keyword variant with
// its encoding (id or text fallback), the think ids and the SPLIT ids with
// their text. Strings are shown escaped ("\n").
std::string DescribeSkipkvTokenSets(const Tokenizer& tok, std::span<const std::string> delimiters,
                                    const SkipkvTokenSets& sets);

}  // namespace skipkv
