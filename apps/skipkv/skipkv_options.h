// The SkipKV options shared by `run` and `bench` (the fields of
// SkipkvConfig, spec §6.11): --sim-threshold, --min-sentence-tokens,
// --pss-include-prompt, --max-sentences, --sentence-delimiters,
// --no-sentence-scoring. Values are checked by ValidateKvPolicyConfig (τ in
// (0, 1], K >= 1, ...); Finish() also refuses them under a policy that does
// not use sentences (KvPolicy::uses_sentences) and parses the delimiter list.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "kv/kv_policy.h"
#include "util/status.h"

namespace skipkv::cli {

// "\n,.\n,)\n" -> {"\n", ".\n", ")\n"}: comma-separated, with the escapes \n,
// \t, \r, \\ and \, (a literal comma). Empty items and other escapes are an
// InvalidArgument naming the item.
inline StatusOr<std::vector<std::string>> ParseDelimiterList(const std::string& s) {
  std::vector<std::string> out(1);
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == ',') {
      out.emplace_back();
    } else if (c == '\\') {
      if (i + 1 == s.size()) return InvalidArgument("--sentence-delimiters: '" + s + "' ends in a lone backslash");
      const char e = s[++i];
      switch (e) {
        case 'n': out.back() += '\n'; break;
        case 't': out.back() += '\t'; break;
        case 'r': out.back() += '\r'; break;
        case '\\': out.back() += '\\'; break;
        case ',': out.back() += ','; break;
        default:
          return InvalidArgument(std::string("--sentence-delimiters: unknown escape '\\") + e +
                                 "' (use \\n, \\t, \\r, \\\\ or \\,)");
      }
    } else {
      out.back() += c;
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].empty()) {
      return InvalidArgument("--sentence-delimiters: item " + std::to_string(i + 1) + " of '" + s +
                             "' is empty (items are comma-separated)");
    }
  }
  return out;
}

// The inverse, for help texts: {"\n", ".\n"} -> "\n,.\n" (escaped).
inline std::string FormatDelimiterList(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    for (char c : items[i]) {
      if (c == '\n') out += "\\n";
      else if (c == '\t') out += "\\t";
      else if (c == '\r') out += "\\r";
      else if (c == '\\') out += "\\\\";
      else if (c == ',') out += "\\,";
      else out += c;
    }
  }
  return out;
}

class SkipkvOptions {
 public:
  // Registers the options on `app`, writing into `kv->skipkv`.
  void Add(CLI::App& app, KvPolicyConfig* kv) {
    kv_ = kv;
    SkipkvConfig& s = kv->skipkv;
    opts_.push_back(app.add_option("--sim-threshold", s.sim_threshold,
                                   "skipkv: tau, an earlier sentence whose similarity (PSS) with a later one "
                                   "exceeds it is redundant; in (0, 1]")
                        ->capture_default_str());
    opts_.push_back(app.add_option("--min-sentence-tokens", s.min_sentence_tokens,
                                   "skipkv: shorter spans are not sentences (>= 1)")
                        ->capture_default_str());
    opts_.push_back(app.add_flag("--pss-include-prompt", s.pss_include_prompt,
                                 "skipkv: prompt sentences take part in the PSS (may be evicted as redundant)"));
    opts_.push_back(app.add_option("--max-sentences", s.max_sentences,
                                   "skipkv: K, a new sentence is compared with at most the last K (>= 1)")
                        ->capture_default_str());
    delimiters_opt_ = app.add_option("--sentence-delimiters", delimiters_,
                                   "skipkv: strings that end a sentence, comma-separated, escapes \\n \\t \\r "
                                   "\\\\ \\, (default: the paper's six: " +
                                       FormatDelimiterList(DefaultSentenceDelimiters()) + ")");
    opts_.push_back(delimiters_opt_);
    opts_.push_back(app.add_flag("--no-sentence-scoring", no_scoring_,
                                 "skipkv: track sentences and T but apply no penalty (the R-KV ablation)"));
  }

  // After parsing: refuses SkipKV options under another policy and applies
  // the delimiter list.
  Status Finish() {
    if (!KvPolicyUsesSentences(*kv_)) {
      for (const CLI::Option* o : opts_) {
        if (o->count() > 0) {
          return InvalidArgument(o->get_name() + " applies to a policy that uses sentences (--kv-policy " +
                                 "skipkv) only; the policy is '" + kv_->policy + "'");
        }
      }
    }
    if (delimiters_opt_->count() > 0) {
      SKIPKV_ASSIGN_OR_RETURN(kv_->skipkv.delimiters, ParseDelimiterList(delimiters_));
    }
    if (no_scoring_) kv_->skipkv.sentence_scoring = false;
    return Status::Ok();
  }

 private:
  KvPolicyConfig* kv_ = nullptr;
  std::vector<CLI::Option*> opts_;
  CLI::Option* delimiters_opt_ = nullptr;
  std::string delimiters_;
  bool no_scoring_ = false;
};

}  // namespace skipkv::cli
