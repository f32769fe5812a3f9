// Tokenizer from a Hugging Face tokenizer.json (+ tokenizer_config.json).
// Supported: model "BPE" with a ByteLevel pre-tokenizer/decoder (GPT-2,
// Llama-3, Qwen2 and any single Split regex PCRE2 compiles), normalizer null
// or NFC, added tokens. The pre-tokenizer kind is recognised from the Split
// regex; an unknown regex is used verbatim. Anything else is Unsupported,
// never silently approximated.
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/tokenizer.h"
#include "util/json_depth.h"
#include "util/mapped_file.h"

namespace skipkv {
namespace {

using json = nlohmann::json;

// The content of a token field of tokenizer_config.json: "text", {"content": "text"} or null.
std::string TokenText(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string())
    return j["content"].get<std::string>();
  return "";
}

Status ParsePreTokenizer(const json& pt, TokenizerSpec* spec, bool* byte_level) {
  if (pt.is_null()) return Status::Ok();
  const std::string type = pt.value("type", "");
  if (type == "Sequence") {
    for (const json& sub : pt.at("pretokenizers"))
      SKIPKV_RETURN_IF_ERROR(ParsePreTokenizer(sub, spec, byte_level));
    return Status::Ok();
  }
  if (type == "Split") {
    if (!spec->pre_regex.empty()) return Unsupported("pre_tokenizer with more than one Split regex");
    const json& pattern = pt.at("pattern");
    if (!pattern.is_object()) return CorruptData("pre_tokenizer Split pattern is not an object");
    if (!pattern.contains("Regex")) return Unsupported("pre_tokenizer Split with a literal String pattern");
    if (pt.value("behavior", "") != "Isolated" || pt.value("invert", false)) {
      return Unsupported("pre_tokenizer Split with behavior '" + pt.value("behavior", "") +
                         "' / invert (only Isolated, not inverted)");
    }
    spec->pre_regex = pattern.at("Regex").get<std::string>();
    return Status::Ok();
  }
  if (type == "ByteLevel") {
    *byte_level = true;
    if (pt.value("add_prefix_space", false))
      return Unsupported("ByteLevel pre_tokenizer with add_prefix_space");
    if (pt.value("use_regex", true)) {
      if (!spec->pre_regex.empty())
        return Unsupported("pre_tokenizer with a Split regex and ByteLevel use_regex");
      spec->pre_regex = PreTokenizerRegex(PreTokenizerKind::kGpt2);
    }
    return Status::Ok();
  }
  return Unsupported("pre_tokenizer type '" + type + "'");
}

Status ParseNormalizer(const json& n, TokenizerSpec* spec) {
  if (n.is_null()) return Status::Ok();
  const std::string type = n.value("type", "");
  if (type == "NFC") {
    spec->nfc = true;
    return Status::Ok();
  }
  if (type == "Sequence") {
    for (const json& sub : n.at("normalizers")) SKIPKV_RETURN_IF_ERROR(ParseNormalizer(sub, spec));
    return Status::Ok();
  }
  return Unsupported("normalizer type '" + type + "' (supported: none, NFC)");
}

// BOS from a TemplateProcessing post-processor that starts "single" with a special token.
std::string TemplateBos(const json& pp) {
  if (!pp.is_object()) return "";
  if (pp.value("type", "") == "Sequence" && pp.contains("processors")) {
    for (const json& sub : pp["processors"]) {
      std::string b = TemplateBos(sub);
      if (!b.empty()) return b;
    }
    return "";
  }
  if (pp.value("type", "") != "TemplateProcessing" || !pp.contains("single")) return "";
  const json& single = pp["single"];
  if (!single.is_array() || single.empty() || !single[0].contains("SpecialToken")) return "";
  return single[0]["SpecialToken"].value("id", "");
}

StatusOr<TokenizerSpec> SpecFromHf(std::string_view text, std::string_view config_text,
                                   const std::string& name) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return CorruptData("not a valid JSON object");
  json cfg = json::object();
  if (!config_text.empty()) {
    cfg = json::parse(config_text, nullptr, false);
    if (cfg.is_discarded() || !cfg.is_object())
      return CorruptData("tokenizer_config.json is not a valid JSON object");
  }
  TokenizerSpec spec;
  spec.name = name;
  if (!j.contains("model") || !j["model"].is_object()) return CorruptData("no \"model\" object");
  const json& model = j["model"];
  const std::string mtype = model.value("type", "BPE");
  if (mtype != "BPE") return Unsupported("model type '" + mtype + "' (supported: BPE)");
  if (!model.value("continuing_subword_prefix", json()).is_null() &&
      !model["continuing_subword_prefix"].get<std::string>().empty()) {
    return Unsupported("BPE continuing_subword_prefix");
  }
  spec.ignore_merges = model.value("ignore_merges", false);

  bool byte_level = false;
  SKIPKV_RETURN_IF_ERROR(ParsePreTokenizer(j.value("pre_tokenizer", json()), &spec, &byte_level));
  if (j.contains("decoder") && j["decoder"].is_object() && j["decoder"].value("type", "") == "ByteLevel") {
    byte_level = true;
  }
  if (!byte_level) {
    return Unsupported(
        "only byte-level BPE tokenizer.json files are supported (no ByteLevel pre-tokenizer/decoder)");
  }
  spec.model = TokenizerModel::kByteLevelBpe;
  if (spec.pre_regex.empty()) return Unsupported("byte-level BPE without a pre-tokenizer regex");
  spec.pre = PreTokenizerKind::kCustom;
  for (PreTokenizerKind k : {PreTokenizerKind::kQwen2, PreTokenizerKind::kLlama3, PreTokenizerKind::kGpt2}) {
    if (spec.pre_regex == PreTokenizerRegex(k)) spec.pre = k;
  }
  SKIPKV_RETURN_IF_ERROR(ParseNormalizer(j.value("normalizer", json()), &spec));

  // Vocabulary: model.vocab plus added_tokens (which may extend or override it).
  if (!model.contains("vocab") || !model["vocab"].is_object())
    return CorruptData("model.vocab is missing or not an object");
  const json& vocab = model["vocab"];
  const json added = j.value("added_tokens", json::array());
  if (!added.is_array()) return CorruptData("added_tokens is not an array");
  int64_t max_id = -1;
  for (const auto& [piece, id] : vocab.items()) {
    if (!id.is_number_integer()) return CorruptData("model.vocab['" + piece + "'] is not an integer id");
    max_id = std::max<int64_t>(max_id, id.get<int64_t>());
    if (id.get<int64_t>() < 0) return CorruptData("model.vocab['" + piece + "'] has negative id");
  }
  for (const json& a : added) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        !a["content"].is_string() || a["id"].get<int64_t>() < 0) {
      return CorruptData("added_tokens entry without a valid id/content: " + a.dump().substr(0, 200));
    }
    max_id = std::max<int64_t>(max_id, a["id"].get<int64_t>());
  }
  if (max_id < 0) return CorruptData("model.vocab is empty");
  if (max_id >= (1 << 30)) return CorruptData("token id " + std::to_string(max_id) + " is implausibly large");
  const size_t n = static_cast<size_t>(max_id) + 1;
  spec.pieces.assign(n, std::string());
  spec.types.assign(n, TokenType::kUnused);  // ids no entry names stay unused
  for (const auto& [piece, id] : vocab.items()) {
    const size_t i = static_cast<size_t>(id.get<int64_t>());
    if (spec.types[i] != TokenType::kUnused) {
      return CorruptData("model.vocab gives id " + std::to_string(i) + " to both '" + spec.pieces[i] +
                         "' and '" + piece + "'");
    }
    spec.pieces[i] = piece;
    spec.types[i] = TokenType::kNormal;
  }
  for (const json& a : added) {
    const size_t i = static_cast<size_t>(a["id"].get<int64_t>());
    spec.pieces[i] = a["content"].get<std::string>();
    const json special = a.value("special", json(false));
    if (!special.is_boolean()) {
      return CorruptData("added_tokens entry " + std::to_string(i) + ": 'special' = " + special.dump() +
                         ", expected true or false");
    }
    spec.types[i] = special.get<bool>() ? TokenType::kControl : TokenType::kUserDefined;
  }

  // Merges: ["a b", ...] (older files) or [["a", "b"], ...].
  if (!model.contains("merges") || !model["merges"].is_array()) {
    return CorruptData("model.merges is missing or not an array");
  }
  const json& merges = model["merges"];
  spec.merges.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const json& m = merges[r];
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos || sp + 1 >= s.size()) {
        return CorruptData("model.merges[" + std::to_string(r) + "] = '" + s + "' is not 'left right'");
      }
      spec.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spec.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return CorruptData("model.merges[" + std::to_string(r) + "] is neither 'left right' nor [left, right]");
    }
  }

  // Special ids. A token named in the config must exist.
  auto id_of = [&](const std::string& text, const char* what) -> StatusOr<TokenId> {
    if (text.empty()) return kNoToken;
    for (size_t i = 0; i < n; ++i) {
      if (spec.pieces[i] == text && spec.types[i] != TokenType::kUnused) return static_cast<TokenId>(i);
    }
    return CorruptData(std::string(what) + " token '" + text + "' is not in the vocabulary");
  };
  std::string bos_text = TokenText(cfg.value("bos_token", json()));
  const std::string template_bos = TemplateBos(j.value("post_processor", json()));
  if (bos_text.empty()) bos_text = template_bos;
  SKIPKV_ASSIGN_OR_RETURN(spec.bos, id_of(bos_text, "bos"));
  SKIPKV_ASSIGN_OR_RETURN(spec.eos, id_of(TokenText(cfg.value("eos_token", json())), "eos"));
  SKIPKV_ASSIGN_OR_RETURN(spec.pad, id_of(TokenText(cfg.value("pad_token", json())), "pad"));
  std::string unk_text = TokenText(cfg.value("unk_token", json()));
  if (unk_text.empty()) unk_text = TokenText(model.value("unk_token", json()));
  SKIPKV_ASSIGN_OR_RETURN(spec.unk, id_of(unk_text, "unk"));
  // add_bos: explicit in the config, else whether the post-processor adds it.
  const json add_bos = cfg.value("add_bos_token", json());
  spec.add_bos = add_bos.is_boolean() ? add_bos.get<bool>() : !template_bos.empty();
  const json add_eos = cfg.value("add_eos_token", json());
  spec.add_eos = add_eos.is_boolean() && add_eos.get<bool>();
  spec.add_space_prefix = false;
  return spec;
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromHfJson(std::string_view tokenizer_json,
                                                           std::string_view tokenizer_config_json,
                                                           const std::string& name) {
  // Depth before parsing (issue 43); the error names the file and line.
  SKIPKV_RETURN_IF_ERROR(CheckJsonDepth(tokenizer_json, name));
  SKIPKV_RETURN_IF_ERROR(CheckJsonDepth(tokenizer_config_json, "tokenizer_config.json"));
  StatusOr<TokenizerSpec> spec = CorruptData("unparsed");
  try {
    spec = SpecFromHf(tokenizer_json, tokenizer_config_json, name);
  } catch (const nlohmann::json::exception& e) {
    // Wrong value types (e.g. a number where a string belongs) surface here.
    spec = CorruptData(std::string("unexpected JSON structure: ") + e.what());
  }
  if (!spec.ok()) return spec.status().WithContext(name);
  return Create(std::move(spec).value());
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromHfJsonFile(const std::string& tokenizer_json_path,
                                                               const std::string& tokenizer_config_path) {
  SKIPKV_ASSIGN_OR_RETURN(std::string text, ReadFileToString(tokenizer_json_path));
  std::string config;
  if (!tokenizer_config_path.empty()) {
    SKIPKV_ASSIGN_OR_RETURN(config, ReadFileToString(tokenizer_config_path));
    SKIPKV_RETURN_IF_ERROR(CheckJsonDepth(config, tokenizer_config_path));  // with its path
  }
  return FromHfJson(text, config, tokenizer_json_path);
}

}  // namespace skipkv
