// tokenizer.json -> GGUF gpt2 tokenizer metadata; see hf_vocab.h.
#include "io/hf_vocab.h"

#include <map>
#include <nlohmann/json.hpp>

#include "util/json_depth.h"
#include "util/mapped_file.h"

namespace skipkv {

Gpt2VocabOptions R1DistillQwenVocabOptions(int64_t vocab_size) {
  Gpt2VocabOptions o;
  o.pre = "deepseek-r1-qwen";
  o.vocab_size = vocab_size;
  o.max_added_id = 151664;
  o.overrides = {{151643, "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", true},
                 {151644, "<\xEF\xBD\x9CUser\xEF\xBD\x9C>", false},
                 {151645, "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>", false},
                 {151646, "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", true},
                 {151647, "<|EOT|>", false},
                 {151648, "<think>", false},
                 {151649, "</think>", false}};
  o.bos = 151646;
  o.eos = 151643;
  o.pad = 151643;
  o.add_bos = true;
  return o;
}

namespace {
// llama.cpp's does_token_look_special for the shapes these vocabularies use.
bool LooksSpecial(const std::string& s) {
  auto wrapped = [&](const std::string& open, const std::string& close) {
    return s.size() >= open.size() + close.size() && s.compare(0, open.size(), open) == 0 &&
           s.compare(s.size() - close.size(), close.size(), close) == 0;
  };
  return wrapped("<|", "|>") || wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>");
}
}  // namespace

namespace {

Status AddGpt2Metadata(std::string_view text, const std::string& path, const Gpt2VocabOptions& opts,
                       GgufMetadata* md) {
  SKIPKV_RETURN_IF_ERROR(CheckJsonDepth(text, path));  // before parsing: issue 43
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return CorruptData(path + ": not a JSON object");
  auto model = j.find("model");
  if (model == j.end() || !model->is_object()) return CorruptData(path + ": missing 'model'");
  auto type = model->find("type");
  if (type == model->end() || !type->is_string()) {
    return CorruptData(path + ": model.type = " + (type == model->end() ? "(missing)" : type->dump()) +
                       ", expected a string");
  }
  if (type->get<std::string>() != "BPE") {
    return Unsupported(path + ": model.type '" + type->get<std::string>() + "' (only BPE is supported)");
  }
  auto vocab = model->find("vocab");
  auto merges = model->find("merges");
  if (vocab == model->end() || !vocab->is_object()) return CorruptData(path + ": missing model.vocab object");
  if (merges == model->end() || !merges->is_array()) return CorruptData(path + ": missing model.merges array");

  struct Tok {
    std::string text;
    int32_t type = 0;  // 0: no token yet
  };
  std::map<int64_t, Tok> by_id;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_unsigned()) return CorruptData(path + ": vocab id of '" + it.key() + "' is not an integer");
    const int64_t id = it.value().get<int64_t>();
    if (id > (1 << 24)) return CorruptData(path + ": vocab id " + std::to_string(id) + " is too large");
    if (by_id.count(id)) return CorruptData(path + ": vocab id " + std::to_string(id) + " used twice");
    by_id[id] = {it.key(), 1};
  }
  std::map<int64_t, AddedTokenOverride> added;
  if (auto at = j.find("added_tokens"); at != j.end() && at->is_array()) {
    for (const auto& a : *at) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_unsigned() || !a.contains("content") ||
          !a["content"].is_string()) {
        return CorruptData(path + ": malformed added_tokens entry " + a.dump());
      }
      const int64_t id = a["id"].get<int64_t>();
      if (id > (1 << 24)) return CorruptData(path + ": added token id " + std::to_string(id) + " is too large");
      if (opts.max_added_id >= 0 && id > opts.max_added_id) continue;
      auto special = a.find("special");
      if (special != a.end() && !special->is_boolean()) {
        return CorruptData(path + ": added_tokens entry " + std::to_string(id) + ": 'special' = " + special->dump() +
                           ", expected true or false");
      }
      added[id] = {id, a["content"].get<std::string>(), special != a.end() && special->get<bool>()};
    }
  }
  for (const auto& o : opts.overrides) added[o.id] = o;
  for (const auto& [id, a] : added) by_id[id] = {a.content, (a.special || LooksSpecial(a.content)) ? 3 : 4};

  const int64_t max_id = by_id.empty() ? -1 : by_id.rbegin()->first;
  const int64_t n = std::max<int64_t>(max_id + 1, opts.vocab_size);
  if (opts.vocab_size > 0 && max_id + 1 > opts.vocab_size) {
    return InvalidArgument(path + ": tokenizer has ids up to " + std::to_string(max_id) +
                           " but the model's vocab_size is " + std::to_string(opts.vocab_size));
  }
  std::vector<GgufValue> tokens, types;
  tokens.reserve(n);
  types.reserve(n);
  for (int64_t id = 0; id < n; ++id) {
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      tokens.push_back(GgufValue::Str("[PAD" + std::to_string(id) + "]"));
      types.push_back(GgufValue::I32(5));
    } else {
      tokens.push_back(GgufValue::Str(it->second.text));
      types.push_back(GgufValue::I32(it->second.type));
    }
  }
  std::vector<GgufValue> merge_strs;
  merge_strs.reserve(merges->size());
  for (const auto& m : *merges) {
    if (m.is_string()) {
      merge_strs.push_back(GgufValue::Str(m.get<std::string>()));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merge_strs.push_back(GgufValue::Str(m[0].get<std::string>() + " " + m[1].get<std::string>()));
    } else {
      return CorruptData(path + ": malformed merge " + m.dump());
    }
  }
  md->Set("tokenizer.ggml.model", GgufValue::Str("gpt2"));
  md->Set("tokenizer.ggml.pre", GgufValue::Str(opts.pre));
  md->Set("tokenizer.ggml.tokens", GgufValue::Arr(GgufType::kString, std::move(tokens)));
  md->Set("tokenizer.ggml.token_type", GgufValue::Arr(GgufType::kInt32, std::move(types)));
  md->Set("tokenizer.ggml.merges", GgufValue::Arr(GgufType::kString, std::move(merge_strs)));
  if (opts.bos) md->Set("tokenizer.ggml.bos_token_id", GgufValue::U32(*opts.bos));
  if (opts.eos) md->Set("tokenizer.ggml.eos_token_id", GgufValue::U32(*opts.eos));
  if (opts.pad) md->Set("tokenizer.ggml.padding_token_id", GgufValue::U32(*opts.pad));
  md->Set("tokenizer.ggml.add_bos_token", GgufValue::Bool(opts.add_bos));
  md->Set("tokenizer.ggml.add_eos_token", GgufValue::Bool(false));
  return Status::Ok();
}

}  // namespace

Status AddGpt2TokenizerMetadataFromJson(std::string_view text, const std::string& path,
                                        const Gpt2VocabOptions& opts, GgufMetadata* md) {
  try {
    return AddGpt2Metadata(text, path, opts, md);
  } catch (const nlohmann::json::exception& e) {
    // A value of the wrong type the checks above do not cover; with
    // JSON_DIAGNOSTICS the message carries the field's JSON pointer.
    return CorruptData(path + ": unexpected JSON structure: " + e.what());
  }
}

Status AddGpt2TokenizerMetadata(const std::string& path, const Gpt2VocabOptions& opts, GgufMetadata* md) {
  SKIPKV_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return AddGpt2TokenizerMetadataFromJson(text, path, opts, md);
}

}  // namespace skipkv
