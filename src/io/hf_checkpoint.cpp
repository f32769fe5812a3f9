// Hugging Face checkpoint directory loader; the mapping is documented in hf_checkpoint.h.
#include "io/hf_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "io/model_limits.h"
#include "io/safetensors.h"
#include "util/aligned_buffer.h"
#include "util/json_depth.h"

namespace skipkv {
namespace fs = std::filesystem;

std::string HfTensorNameToGguf(const std::string& n) {
  static const std::map<std::string, std::string> kGlobal = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},
  };
  static const std::map<std::string, std::string> kLayer = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.bias", "attn_output.bias"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  if (auto it = kGlobal.find(n); it != kGlobal.end()) return it->second;
  static const std::regex kLayerRe(R"(model\.layers\.(\d+)\.(.+))");
  std::smatch m;
  if (std::regex_match(n, m, kLayerRe)) {
    if (auto it = kLayer.find(m[2].str()); it != kLayer.end()) return "blk." + m[1].str() + "." + it->second;
  }
  return "";
}

namespace {

// An integer config value in [1, hi], read as 64 bits so nothing is narrowed;
// errors quote the value as written in the file.
StatusOr<int64_t> ConfigInt(const nlohmann::json& c, const std::string& path, const char* key, int64_t hi) {
  auto it = c.find(key);
  if (it == c.end()) return NotFound(path + ": missing '" + key + "'");
  const std::string range = "[1, " + std::to_string(hi) + "]";
  if (!it->is_number_integer()) {
    return CorruptData(path + ": '" + key + "' = " + it->dump() + ", expected an integer in " + range);
  }
  const bool in_range = it->is_number_unsigned() ? it->get<uint64_t>() >= 1 && it->get<uint64_t>() <= uint64_t(hi)
                                                 : it->get<int64_t>() >= 1 && it->get<int64_t>() <= hi;
  if (!in_range) return OutOfRange(path + ": '" + key + "' = " + it->dump() + " is outside " + range);
  return it->get<int64_t>();
}

// A number that must be finite as a float (GGUF stores these as F32).
StatusOr<double> ConfigFloat(const nlohmann::json& c, const std::string& path, const char* key, double dflt) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return dflt;
  if (!it->is_number()) return CorruptData(path + ": '" + key + "' = " + it->dump() + ", expected a number");
  const double v = it->get<double>();
  if (!std::isfinite(static_cast<float>(v))) {
    return OutOfRange(path + ": '" + key + "' = " + it->dump() + " does not fit a 32-bit float");
  }
  return v;
}

}  // namespace

namespace {

Status ConfigToMetadata(const nlohmann::json& c, const std::string& path, GgufMetadata* md) {
  if (!c.is_object()) return CorruptData(path + ": not a JSON object");
  auto archs = c.find("architectures");
  if (archs == c.end() || !archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
    return CorruptData(path + ": missing 'architectures' (a list of class names)");
  }
  const std::string cls = (*archs)[0].get<std::string>();
  std::string arch;
  if (cls == "LlamaForCausalLM") arch = "llama";
  else if (cls == "Qwen2ForCausalLM") arch = "qwen2";
  else return Unsupported(path + ": architecture '" + cls + "' (supported: LlamaForCausalLM, Qwen2ForCausalLM)");

  md->Set("general.architecture", GgufValue::Str(arch));
  SKIPKV_ASSIGN_OR_RETURN(int64_t layers, ConfigInt(c, path, "num_hidden_layers", model_limits::kMaxLayers));
  SKIPKV_ASSIGN_OR_RETURN(int64_t hidden, ConfigInt(c, path, "hidden_size", model_limits::kMaxDim));
  SKIPKV_ASSIGN_OR_RETURN(int64_t ffn, ConfigInt(c, path, "intermediate_size", model_limits::kMaxDim));
  SKIPKV_ASSIGN_OR_RETURN(int64_t heads, ConfigInt(c, path, "num_attention_heads", model_limits::kMaxHeads));
  int64_t kv_heads = heads;
  if (c.contains("num_key_value_heads") && !c["num_key_value_heads"].is_null()) {
    SKIPKV_ASSIGN_OR_RETURN(kv_heads, ConfigInt(c, path, "num_key_value_heads", model_limits::kMaxHeads));
  }
  if (heads % kv_heads != 0) {
    return CorruptData(path + ": num_attention_heads " + std::to_string(heads) +
                       " is not a multiple of num_key_value_heads " + std::to_string(kv_heads));
  }
  SKIPKV_ASSIGN_OR_RETURN(int64_t ctx, ConfigInt(c, path, "max_position_embeddings", model_limits::kMaxContext));
  SKIPKV_ASSIGN_OR_RETURN(int64_t vocab, ConfigInt(c, path, "vocab_size", model_limits::kMaxVocab));
  SKIPKV_ASSIGN_OR_RETURN(double theta, ConfigFloat(c, path, "rope_theta", 10000.0));
  SKIPKV_ASSIGN_OR_RETURN(double eps, ConfigFloat(c, path, "rms_norm_eps", 1e-6));
  const std::string p = arch + ".";
  md->Set(p + "block_count", GgufValue::U32(static_cast<uint32_t>(layers)));
  md->Set(p + "context_length", GgufValue::U32(static_cast<uint32_t>(ctx)));
  md->Set(p + "embedding_length", GgufValue::U32(static_cast<uint32_t>(hidden)));
  md->Set(p + "feed_forward_length", GgufValue::U32(static_cast<uint32_t>(ffn)));
  md->Set(p + "attention.head_count", GgufValue::U32(static_cast<uint32_t>(heads)));
  md->Set(p + "attention.head_count_kv", GgufValue::U32(static_cast<uint32_t>(kv_heads)));
  if (c.contains("head_dim") && !c["head_dim"].is_null()) {
    SKIPKV_ASSIGN_OR_RETURN(int64_t head_dim, ConfigInt(c, path, "head_dim", model_limits::kMaxHeadDim));
    md->Set(p + "attention.key_length", GgufValue::U32(static_cast<uint32_t>(head_dim)));
    md->Set(p + "attention.value_length", GgufValue::U32(static_cast<uint32_t>(head_dim)));
  }
  md->Set(p + "rope.freq_base", GgufValue::F32(static_cast<float>(theta)));
  md->Set(p + "attention.layer_norm_rms_epsilon", GgufValue::F32(static_cast<float>(eps)));
  md->Set(p + "vocab_size", GgufValue::U32(static_cast<uint32_t>(vocab)));

  auto rs = c.find("rope_scaling");
  if (rs != c.end() && !rs->is_null()) {
    if (!rs->is_object()) return CorruptData(path + ": 'rope_scaling' is not an object");
    std::string type;
    if (rs->contains("rope_type") && (*rs)["rope_type"].is_string()) type = (*rs)["rope_type"].get<std::string>();
    else if (rs->contains("type") && (*rs)["type"].is_string()) type = (*rs)["type"].get<std::string>();
    if (type != "llama3" && type != "linear" && type != "default") {
      return Unsupported(path + ": rope_scaling type '" + type + "' (supported: llama3, linear)");
    }
    if (type != "default") {
      md->Set(p + "rope.scaling.type", GgufValue::Str(type));
      SKIPKV_ASSIGN_OR_RETURN(double factor, ConfigFloat(*rs, path + " rope_scaling", "factor", 1.0));
      md->Set(p + "rope.scaling.factor", GgufValue::F32(static_cast<float>(factor)));
    }
    if (type == "llama3") {
      SKIPKV_ASSIGN_OR_RETURN(double lo, ConfigFloat(*rs, path + " rope_scaling", "low_freq_factor", 1.0));
      SKIPKV_ASSIGN_OR_RETURN(double hi, ConfigFloat(*rs, path + " rope_scaling", "high_freq_factor", 4.0));
      SKIPKV_ASSIGN_OR_RETURN(int64_t orig, ConfigInt(*rs, path + " rope_scaling", "original_max_position_embeddings", model_limits::kMaxContext));
      md->Set(p + "rope.scaling.low_freq_factor", GgufValue::F32(static_cast<float>(lo)));
      md->Set(p + "rope.scaling.high_freq_factor", GgufValue::F32(static_cast<float>(hi)));
      md->Set(p + "rope.scaling.original_context_length", GgufValue::U32(static_cast<uint32_t>(orig)));
    }
  }
  bool tie = false;
  if (c.contains("tie_word_embeddings") && c["tie_word_embeddings"].is_boolean()) tie = c["tie_word_embeddings"].get<bool>();
  md->Set("skipkv.tie_word_embeddings", GgufValue::Bool(tie));
  md->Set("skipkv.rope_layout", GgufValue::Str("rotate_half"));
  for (const char* k : {"bos_token_id", "eos_token_id"}) {
    // Absent, null or a list (several EOS ids) leave the tokenizer's own choice.
    if (c.contains(k) && c[k].is_number_integer()) {
      const int64_t id = c[k].is_number_unsigned() && c[k].get<uint64_t>() > uint64_t(model_limits::kMaxVocab)
                             ? -1
                             : c[k].get<int64_t>();
      if (id < 0 || id > model_limits::kMaxVocab) {
        return OutOfRange(path + ": '" + k + "' = " + c[k].dump() + " is outside [0, " +
                          std::to_string(model_limits::kMaxVocab) + "]");
      }
      md->Set(std::string("tokenizer.ggml.") + k, GgufValue::U32(static_cast<uint32_t>(id)));
    }
  }
  return Status::Ok();
}

}  // namespace

Status HfConfigToMetadata(const nlohmann::json& c, const std::string& path, GgufMetadata* md) {
  try {
    return ConfigToMetadata(c, path, md);
  } catch (const nlohmann::json::exception& e) {
    // Last resort for a wrongly typed field the checks miss; the message names its JSON pointer.
    return CorruptData(path + ": unexpected JSON structure: " + e.what());
  }
}

namespace {

// Adds the tensors of one safetensors file to `src`. `wanted` (may be null)
// lists the names the index assigns to this file; each must be present.
Status AddSafetensorsFile(const std::string& path, const std::set<std::string>* wanted, FileLoad load,
                          ModelSource* src, std::set<std::string>* seen) {
  SKIPKV_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mf, MappedFile::Open(path, load));
  if (mf->load() == FileLoad::kMap) src->weights_load = FileLoad::kMap;  // kRead only if every shard was read
  SKIPKV_ASSIGN_OR_RETURN(SafetensorsHeader h, ParseSafetensorsHeader(mf->data(), mf->size(), path));
  std::shared_ptr<MappedFile> file(std::move(mf));
  for (const SafetensorsEntry& e : h.tensors) {
    if (e.name.find("rotary_emb.inv_freq") != std::string::npos) continue;
    const std::string what = path + ": tensor '" + e.name + "'";
    DType type;
    if (e.dtype == "F32") type = DType::kF32;
    else if (e.dtype == "F16") type = DType::kF16;
    else if (e.dtype == "BF16") type = DType::kBF16;
    else return Unsupported(what + " has dtype " + e.dtype + " (supported: F32, F16, BF16)");
    if (e.shape.empty() || e.shape.size() > 4) {
      return Unsupported(what + " has " + std::to_string(e.shape.size()) + " dimensions (supported: 1..4)");
    }
    TensorView t;
    std::string gguf = HfTensorNameToGguf(e.name);
    t.name = gguf.empty() ? e.name : gguf;
    if (!seen->insert(t.name).second) return CorruptData(what + ": tensor appears twice in the checkpoint");
    t.type = type;
    t.n_dims = static_cast<int>(e.shape.size());
    for (int d = 0; d < t.n_dims; ++d) {
      t.ne[d] = e.shape[e.shape.size() - 1 - d];
      if (t.ne[d] <= 0) return CorruptData(what + " has a zero dimension");
    }
    const uint8_t* p = file->data() + h.data_start + e.begin;
    const size_t elem = SafetensorsDTypeSize(e.dtype);
    if (reinterpret_cast<uintptr_t>(p) % elem != 0) {
      // Misaligned for its element type: copy so kernels may load it directly.
      auto buf = std::make_shared<AlignedBuffer>(e.end - e.begin);
      std::memcpy(buf->data(), p, e.end - e.begin);
      p = reinterpret_cast<const uint8_t*>(buf->data());
      src->owners.push_back(buf);
    }
    t.data = p;
    src->tensors.push_back(std::move(t));
  }
  if (wanted != nullptr) {
    std::set<std::string> present;
    for (const auto& e : h.tensors) present.insert(e.name);
    for (const auto& w : *wanted) {
      if (!present.count(w)) return CorruptData(path + ": tensor '" + w + "' listed in the index is missing");
    }
  }
  src->owners.push_back(file);
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<ModelSource>> OpenHfCheckpoint(const std::string& dir, FileLoad load) {
  auto src = std::make_unique<ModelSource>();
  src->path = dir;
  src->format = ModelFormat::kHuggingFace;
  src->weights_load = FileLoad::kRead;  // until a shard is mapped (AddSafetensorsFile)
  const std::string config_path = (fs::path(dir) / "config.json").string();
  if (!fs::exists(config_path)) return NotFound(dir + ": no config.json (not a Hugging Face checkpoint directory)");
  SKIPKV_ASSIGN_OR_RETURN(std::string config_text, ReadFileToString(config_path));
  SKIPKV_RETURN_IF_ERROR(CheckJsonDepth(config_text, config_path));  // before parsing: issue 43
  nlohmann::json config = nlohmann::json::parse(config_text, nullptr, false);
  if (config.is_discarded()) return CorruptData(config_path + ": not valid JSON");
  SKIPKV_RETURN_IF_ERROR(HfConfigToMetadata(config, config_path, &src->metadata));
  src->metadata.Set("general.name", GgufValue::Str(fs::path(dir).lexically_normal().filename().string()));

  std::set<std::string> seen;
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index_path)) {
    SKIPKV_ASSIGN_OR_RETURN(std::string text, ReadFileToString(index_path.string()));
    SKIPKV_RETURN_IF_ERROR(CheckJsonDepth(text, index_path.string()));
    nlohmann::json idx = nlohmann::json::parse(text, nullptr, false);
    if (idx.is_discarded() || !idx.is_object() || !idx.contains("weight_map") || !idx["weight_map"].is_object()) {
      return CorruptData(index_path.string() + ": expected a JSON object with a 'weight_map' object");
    }
    std::map<std::string, std::set<std::string>> by_file;
    for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
      if (!it.value().is_string()) return CorruptData(index_path.string() + ": weight_map['" + it.key() + "'] is not a string");
      const std::string shard = it.value().get<std::string>();
      if (shard.find('/') != std::string::npos || shard.empty() || shard == "..") {
        return CorruptData(index_path.string() + ": shard name '" + shard + "' is not a plain file name");
      }
      by_file[shard].insert(it.key());
    }
    for (const auto& [shard, names] : by_file) {
      SKIPKV_RETURN_IF_ERROR(AddSafetensorsFile((fs::path(dir) / shard).string(), &names, load, src.get(), &seen));
    }
  } else {
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.path().extension() == ".safetensors") files.push_back(entry.path().string());
    }
    if (ec) return IoError(dir + ": cannot list directory: " + ec.message());
    if (files.empty()) return NotFound(dir + ": no *.safetensors files and no model.safetensors.index.json");
    std::sort(files.begin(), files.end());
    for (const auto& f : files) SKIPKV_RETURN_IF_ERROR(AddSafetensorsFile(f, nullptr, load, src.get(), &seen));
  }
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    const fs::path p = fs::path(dir) / name;
    if (fs::exists(p)) (std::strcmp(name, "tokenizer.json") == 0 ? src->tokenizer_json_path : src->tokenizer_config_path) = p.string();
  }
  return src;
}

}  // namespace skipkv
