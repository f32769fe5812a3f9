// `skipkv inspect FILE`: a model's format, architecture, metadata (long
// arrays abbreviated) and tensor table (type, shape, bytes), with totals.
// Works on .gguf files, Hugging Face directories, llama2.c checkpoints and
// :default: (the embedded model). --json prints the same as one JSON object.
// Internal tool: it shows a file's raw metadata and tensor table (src/io), which the
// public API does not expose.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "command_registry.h"
#include "io/model_source.h"

namespace skipkv::cli {
namespace {

struct InspectOptions {
  std::string path;
  std::string tokenizer;
  bool json = false;
  bool no_tensors = false;
  size_t max_items = 8;
};

nlohmann::json ValueJson(const GgufValue& v, size_t max_items) {
  switch (v.type) {
    case GgufType::kString: return v.AsString();
    case GgufType::kBool: return v.AsBool();
    case GgufType::kFloat32: case GgufType::kFloat64: return v.AsDouble();
    case GgufType::kArray: {
      const auto& a = v.AsArray();
      nlohmann::json items = nlohmann::json::array();
      for (size_t i = 0; i < a.items.size() && i < max_items; ++i) items.push_back(ValueJson(a.items[i], max_items));
      return {{"type", "array"}, {"elem_type", GgufTypeName(a.elem_type)}, {"length", a.items.size()},
              {"head", items}};
    }
    default:
      if (const auto* u = std::get_if<uint64_t>(&v.v)) return *u;
      return v.AsInt();
  }
}

std::string HumanBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return buf;
}

int Run(const InspectOptions& o) {
  auto m = OpenModel(o.path, o.tokenizer);
  if (!m.ok()) {
    std::fprintf(stderr, "skipkv inspect: %s\n", m.status().ToString().c_str());
    return 1;
  }
  const ModelSource& src = **m;
  const std::string arch = src.metadata.GetStringOr("general.architecture", "?").ok()
                               ? *src.metadata.GetStringOr("general.architecture", "?")
                               : "?";
  size_t total = 0;
  int64_t params = 0;
  for (const auto& t : src.tensors) {
    total += t.NumBytes();
    params += t.NumElements();
  }
  if (o.json) {
    nlohmann::json j;
    j["path"] = src.path;
    j["format"] = ModelFormatName(src.format);
    j["architecture"] = arch;
    nlohmann::json md = nlohmann::json::object();
    for (const auto& [k, v] : src.metadata.entries()) md[k] = ValueJson(v, o.max_items);
    j["metadata"] = md;
    if (!o.no_tensors) {
      nlohmann::json ts = nlohmann::json::array();
      for (const auto& t : src.tensors) {
        ts.push_back({{"name", t.name}, {"type", DTypeName(t.type)},
                      {"shape", std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)},
                      {"bytes", t.NumBytes()}});
      }
      j["tensors"] = ts;
    }
    j["tensor_count"] = src.tensors.size();
    j["parameters"] = params;
    j["total_bytes"] = total;
    if (!src.tokenizer_json_path.empty()) j["tokenizer_json"] = src.tokenizer_json_path;
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("path:         %s\nformat:       %s\narchitecture: %s\n", src.path.c_str(), ModelFormatName(src.format),
              arch.c_str());
  if (!src.tokenizer_json_path.empty()) std::printf("tokenizer:    %s\n", src.tokenizer_json_path.c_str());
  std::printf("\nmetadata (%zu keys):\n", src.metadata.entries().size());
  for (const auto& [k, v] : src.metadata.entries()) {
    std::string type = GgufTypeName(v.type);
    if (v.type == GgufType::kArray) {
      type += std::string("[") + GgufTypeName(v.AsArray().elem_type) + "; " + std::to_string(v.AsArray().items.size()) + "]";
    }
    std::printf("  %-44s %-18s %s\n", k.c_str(), type.c_str(), v.ToString(o.max_items).c_str());
  }
  if (!o.no_tensors) {
    std::printf("\ntensors (%zu):\n  %-36s %-6s %-22s %12s\n", src.tensors.size(), "name", "type", "shape", "bytes");
    for (const auto& t : src.tensors) {
      std::printf("  %-36s %-6s %-22s %12zu\n", t.name.c_str(), DTypeName(t.type), t.ShapeString().c_str(),
                  t.NumBytes());
    }
  }
  std::printf("\n%zu tensors, %lld parameters, %zu bytes (%s)\n", src.tensors.size(), static_cast<long long>(params),
              total, HumanBytes(static_cast<double>(total)).c_str());
  return 0;
}

CommandRegistrar reg("inspect", "Show a model's format, metadata and tensor table", [](CLI::App& sub) {
  auto o = std::make_shared<InspectOptions>();
  sub.add_option("model", o->path, "Model: .gguf, Hugging Face directory, llama2.c .bin, or :default: (embedded)")
      ->required();
  sub.add_option("--tokenizer", o->tokenizer, "llama2.c only: the tokenizer.bin to use");
  sub.add_flag("--json", o->json, "Print one JSON object instead of tables");
  sub.add_flag("--no-tensors", o->no_tensors, "Omit the tensor table");
  sub.add_option("--max-items", o->max_items, "Array items shown before abbreviating")->capture_default_str();
  return [o]() { return Run(*o); };
});

}  // namespace
}  // namespace skipkv::cli
