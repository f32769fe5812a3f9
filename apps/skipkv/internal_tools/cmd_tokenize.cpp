// `skipkv tokenize`: show how a model's tokenizer splits text — one line per
// token with its id and its text — or just the ids (--ids-only). The
// tokenizer comes from a model (-m: GGUF, HF directory, llama2.c .bin, or the
// embedded default) or stands alone (--tokenizer-json / --tokenizer-bin /
// --tokenizer-gguf). --chat wraps the text as one user turn of the model's
// chat template (DeepSeek-R1-Distill, ChatML, or raw). --skipkv-sets prints
// the token-id sets SkipKV derives from the tokenizer (spec §6.2) instead.
// Internal tool: it drives tokenizers alone (without a model) and SkipKV's token sets
// (src/tokenizer, src/steer), below the public API by nature.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "command_registry.h"
#include "io/gguf.h"
#include "io/model_source.h"
#include "skipkv/kv_config.h"
#include "sentence/token_sets.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/mapped_file.h"

namespace skipkv::cli {
namespace {

struct TokenizeOptions {
  std::string model = ":default:";
  std::string tokenizer_json;
  std::string tokenizer_config;
  std::string tokenizer_bin;
  std::string tokenizer_gguf;
  std::string text;
  std::string file;
  std::string system;
  std::string chat_template;  // empty: detect
  bool ids_only = false;
  bool no_bos = false;
  bool parse_special = false;
  bool chat = false;
  bool no_think = false;
  bool r1_specials = false;
  bool skipkv_sets = false;
  std::vector<std::string> delimiters;  // --sentence-delimiter values, as typed (see Unescape)
};

// Backslash-n -> newline, backslash-t -> tab, two backslashes -> one; other text as is.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      const char c = s[i + 1];
      if (c == 'n' || c == 't' || c == '\\') {
        out += c == 'n' ? '\n' : c == 't' ? '\t' : '\\';
        ++i;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

// Token text for display: printable bytes as is, the rest escaped, in quotes.
std::string Printable(std::string_view bytes) {
  std::string out = "'";
  for (unsigned char c : bytes) {
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\'':
        out += "\\'";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\x%02X", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));  // UTF-8 passes through (a split character shows as is)
        }
    }
  }
  return out + "'";
}

StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const TokenizeOptions& o) {
  if (!o.tokenizer_json.empty()) return Tokenizer::FromHfJsonFile(o.tokenizer_json, o.tokenizer_config);
  if (!o.tokenizer_bin.empty()) return Tokenizer::FromLlama2cFile(o.tokenizer_bin);
  if (!o.tokenizer_gguf.empty()) {
    SKIPKV_ASSIGN_OR_RETURN(auto file, GgufFile::Open(o.tokenizer_gguf));
    return Tokenizer::FromGguf(file->metadata(), o.tokenizer_gguf);
  }
  SKIPKV_ASSIGN_OR_RETURN(auto src, OpenModel(o.model));
  return Tokenizer::FromModelSource(*src);
}

int Run(const TokenizeOptions& o) {
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "skipkv tokenize: %s\n", st.ToString().c_str());
    return 1;
  };
  std::string text = o.text;
  if (!o.file.empty()) {
    auto t = ReadFileToString(o.file);
    if (!t.ok()) return fail(t.status());
    text = *t;
  }
  auto tok = LoadTokenizer(o);
  if (!tok.ok()) return fail(tok.status());
  if (o.r1_specials) {
    Status st = (*tok)->ApplyR1DistillQwenSpecials();
    if (!st.ok()) return fail(st);
  }
  const Tokenizer& t = **tok;
  if (o.skipkv_sets) {
    std::vector<std::string> delims = DefaultSentenceDelimiters();
    if (!o.delimiters.empty()) {
      delims.clear();
      for (const std::string& d : o.delimiters) delims.push_back(Unescape(d));
    }
    auto sets = BuildSkipkvTokenSets(t, delims);
    if (!sets.ok()) return fail(sets.status());
    std::printf("%s", DescribeSkipkvTokenSets(t, delims, *sets).c_str());
    return 0;
  }
  std::vector<TokenId> ids;
  if (o.chat) {
    ChatTemplateKind kind = DetectChatTemplate(t);
    if (!o.chat_template.empty()) {
      auto k = ParseChatTemplateKind(o.chat_template);
      if (!k.ok()) return fail(k.status());
      kind = *k;
    }
    std::vector<ChatMessage> msgs;
    if (!o.system.empty()) msgs.push_back({"system", o.system});
    msgs.push_back({"user", text});
    auto r = EncodeChat(kind, t, msgs, {.add_generation_prompt = true, .enable_thinking = !o.no_think},
                        o.parse_special);
    if (!r.ok()) return fail(r.status());
    ids = std::move(r).value();
    if (o.no_bos && !ids.empty() && ids.front() == t.bos()) ids.erase(ids.begin());
    if (!o.ids_only) std::fprintf(stderr, "chat template: %s\n", ChatTemplateKindName(kind));
  } else {
    ids = t.Encode(text, {.add_special = !o.no_bos, .parse_special = o.parse_special});
  }
  if (o.ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
    return 0;
  }
  for (TokenId id : ids) std::printf("%8d -> %s\n", id, Printable(t.TokenBytes(id)).c_str());
  std::fprintf(
      stderr, "%zu tokens, %zu bytes of text (vocabulary %d, %s)\n", ids.size(), text.size(), t.vocab_size(),
      t.model() == TokenizerModel::kByteLevelBpe
          ? (std::string("byte-level BPE, pre-tokenizer ") + PreTokenizerKindName(t.pre_tokenizer())).c_str()
          : "SentencePiece BPE");
  return 0;
}

CommandRegistrar reg(
    "tokenize", "Show the token ids and pieces a model's tokenizer gives for a text", [](CLI::App& sub) {
      auto o = std::make_shared<TokenizeOptions>();
      sub.add_option(
             "-m,--model", o->model,
             "Model whose tokenizer to use: .gguf, HF directory, llama2.c .bin, or :default: (embedded)")
          ->capture_default_str();
      sub.add_option("--tokenizer-json", o->tokenizer_json,
                     "Use this Hugging Face tokenizer.json instead of a model");
      sub.add_option("--tokenizer-config", o->tokenizer_config,
                     "tokenizer_config.json beside --tokenizer-json");
      sub.add_option("--tokenizer-bin", o->tokenizer_bin,
                     "Use this llama2.c tokenizer.bin instead of a model");
      sub.add_option("--tokenizer-gguf", o->tokenizer_gguf,
                     "Use this (vocabulary-only) GGUF instead of a model");
      sub.add_option("text", o->text, "The text to tokenize");
      sub.add_option("-f,--file", o->file, "Read the text from this file");
      sub.add_flag("--ids-only", o->ids_only, "Print only the ids, space-separated on one line");
      sub.add_flag("--no-bos", o->no_bos, "Do not add BOS (and EOS) even if the tokenizer asks for them");
      sub.add_flag("--parse-special", o->parse_special, "Recognise special-token text such as <|im_start|>");
      sub.add_flag("--chat", o->chat,
                   "Wrap the text as a user turn of the chat template, with the generation prompt");
      sub.add_option("--template", o->chat_template,
                     "Chat template: r1-distill, chatml or raw (default: detect)");
      sub.add_option("--system", o->system, "System prompt for --chat");
      sub.add_flag("--no-think", o->no_think,
                   "--chat: close the think block at once (enable_thinking=false)");
      sub.add_flag(
          "--r1-specials", o->r1_specials,
          "Install DeepSeek-R1-Distill-Qwen's special tokens (151643..151649) over a Qwen2 vocabulary");
      sub.add_flag("--skipkv-sets", o->skipkv_sets,
                   "Print SkipKV's token-id sets instead: sentence delimiters D, non-execution keywords N, "
                   "SPLIT (\\n\\n) ids, think ids");
      sub.add_option("--sentence-delimiter", o->delimiters,
                     "--skipkv-sets: a sentence delimiter (repeatable; \\n = newline); default: the paper's six");
      return [o]() { return Run(*o); };
    });

}  // namespace
}  // namespace skipkv::cli
