#include "steer/steering_vector.h"

#include <charconv>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <memory>
#include <system_error>

#include "io/gguf.h"

namespace skipkv {
namespace {

constexpr const char* kPrefix = "direction.";

// Parses "direction.<l>" (l a non-negative decimal without sign or padding);
// -1 if the name is not a direction, -2 if it is malformed.
int DirectionIndex(const std::string& name) {
  const std::string prefix = kPrefix;
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  const char* b = name.data() + prefix.size();
  const char* e = name.data() + name.size();
  if (b == e || (*b == '0' && e - b > 1)) return -2;
  int v = 0;
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e || v < 0) return -2;
  return v;
}

}  // namespace

int64_t ControlVector::ModelDepth() const {
  if (layer_count > 0) return directions.count(0) ? layer_count : layer_count + 1;
  return directions.empty() ? 0 : directions.rbegin()->first + 1;
}

std::string ControlVector::ShapeString() const {
  std::string s = std::to_string(ModelDepth()) + " layers (direction.";
  if (!directions.empty()) {
    s += std::to_string(directions.begin()->first) + ".." + std::to_string(directions.rbegin()->first);
  }
  return s + ") of width " + std::to_string(width);
}

StatusOr<ControlVector> LoadControlVector(const std::string& path) {
  SKIPKV_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  const GgufMetadata& md = file->metadata();
  ControlVector cv;
  auto err = [&](const std::string& what) { return CorruptData("control vector " + path + ": " + what); };
  {
    auto hint = md.GetStringOr("controlvector.model_hint", "");
    if (!hint.ok()) return hint.status().WithContext(path);
    cv.model_hint = *hint;
    auto count = md.GetFloatOr("controlvector.num_vectors_averaged", 0.0);
    if (!count.ok()) return count.status().WithContext(path);
    cv.num_vectors_averaged = *count;
    auto layers = md.GetIntOr("controlvector.layer_count", 0);
    if (!layers.ok()) return layers.status().WithContext(path);
    if (*layers < 0) return err("controlvector.layer_count = " + std::to_string(*layers) + " is negative");
    cv.layer_count = *layers;
  }
  for (const TensorView& t : file->tensors()) {
    const int l = DirectionIndex(t.name);
    if (l == -1) continue;
    if (l == -2) return err("tensor '" + t.name + "' is not direction.<layer index>");
    if (t.type != DType::kF32 || t.n_dims != 1) {
      return err("tensor " + t.name + " is " + DTypeName(t.type) + " " + t.ShapeString() + ", expected a 1-D f32 vector");
    }
    if (cv.width == 0) cv.width = t.ne[0];
    if (t.ne[0] != cv.width) {
      return err("tensor " + t.name + " has width " + std::to_string(t.ne[0]) + ", other directions have " +
                 std::to_string(cv.width));
    }
    std::vector<float> v(static_cast<size_t>(cv.width));
    std::memcpy(v.data(), t.data, v.size() * sizeof(float));
    for (float x : v) {
      if (!std::isfinite(x)) return err("tensor " + t.name + " holds a non-finite value");
    }
    cv.directions[l] = std::move(v);
  }
  if (cv.directions.empty()) return err("no direction.<layer> tensor");
  return cv;
}

Status WriteControlVector(const std::string& path, const ControlVector& cv, int64_t model_depth) {
  if (model_depth < 2) return InvalidArgument("control vector " + path + ": model depth " + std::to_string(model_depth) + " < 2");
  GgufWriter w;
  w.SetMetadata("general.architecture", GgufValue::Str("controlvector"));
  w.SetMetadata("controlvector.model_hint", GgufValue::Str(cv.model_hint));
  w.SetMetadata("controlvector.layer_count", GgufValue::I32(static_cast<int32_t>(model_depth - 1)));
  if (cv.num_vectors_averaged > 0) {
    w.SetMetadata("controlvector.num_vectors_averaged", GgufValue::F32(static_cast<float>(cv.num_vectors_averaged)));
  }
  int written = 0;
  for (const auto& [l, v] : cv.directions) {
    if (l == 0) continue;  // llama.cpp rejects direction.0
    if (l >= model_depth) {
      return InvalidArgument("control vector " + path + ": direction." + std::to_string(l) + " is beyond the model's " +
                             std::to_string(model_depth) + " layers");
    }
    if (static_cast<int64_t>(v.size()) != cv.width) {
      return InvalidArgument("control vector " + path + ": direction." + std::to_string(l) + " has width " +
                             std::to_string(v.size()) + ", expected " + std::to_string(cv.width));
    }
    SKIPKV_RETURN_IF_ERROR(
        w.AddTensor(kPrefix + std::to_string(l), DType::kF32, {cv.width}, v.data(), v.size() * sizeof(float)));
    ++written;
  }
  if (written == 0) return InvalidArgument("control vector " + path + ": no direction with index >= 1 to write");
  return w.WriteFile(path);
}

StatusOr<ControlVector> CombineSealCategories(const ControlVector& execution, const ControlVector& reflection,
                                              const ControlVector& transition) {
  const double nr = reflection.num_vectors_averaged, nt = transition.num_vectors_averaged;
  if (!(nr > 0) || !(nt > 0)) {
    return InvalidArgument("SEAL categories: controlvector.num_vectors_averaged must be > 0 (reflection " +
                           std::to_string(nr) + ", transition " + std::to_string(nt) + ")");
  }
  if (execution.width != reflection.width || execution.width != transition.width) {
    return InvalidArgument("SEAL categories: widths differ (execution " + std::to_string(execution.width) +
                           ", reflection " + std::to_string(reflection.width) + ", transition " +
                           std::to_string(transition.width) + ")");
  }
  ControlVector out;
  out.width = execution.width;
  out.model_hint = execution.model_hint;
  out.layer_count = execution.layer_count;
  const double wr = nr / (nr + nt), wt = nt / (nr + nt);
  for (const auto& [l, e] : execution.directions) {
    auto r = reflection.directions.find(l);
    auto t = transition.directions.find(l);
    if (r == reflection.directions.end() || t == transition.directions.end()) continue;
    std::vector<float> v(e.size());
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = static_cast<float>(double{e[i]} - (wr * r->second[i] + wt * t->second[i]));
    }
    out.directions[l] = std::move(v);
  }
  if (out.directions.empty()) return InvalidArgument("SEAL categories: no layer is present in all three files");
  return out;
}

StatusOr<ControlVector> LoadSteeringVector(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return LoadControlVector(path);
  const char* kinds[3] = {"execution_avg_vector.gguf", "reflection_avg_vector.gguf", "transition_avg_vector.gguf"};
  std::string found[3];
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    for (int k = 0; k < 3; ++k) {
      const std::string suffix = kinds[k];
      if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        if (!found[k].empty()) {
          return InvalidArgument("steering directory " + path + ": two files end in " + suffix + " (" + found[k] +
                                 ", " + entry.path().string() + ")");
        }
        found[k] = entry.path().string();
      }
    }
  }
  if (ec) return IoError("steering directory " + path + ": " + ec.message());
  for (int k = 0; k < 3; ++k) {
    if (found[k].empty()) return NotFound("steering directory " + path + ": no file ending in " + kinds[k]);
  }
  SKIPKV_ASSIGN_OR_RETURN(ControlVector e, LoadControlVector(found[0]));
  SKIPKV_ASSIGN_OR_RETURN(ControlVector r, LoadControlVector(found[1]));
  SKIPKV_ASSIGN_OR_RETURN(ControlVector t, LoadControlVector(found[2]));
  auto v = CombineSealCategories(e, r, t);
  if (!v.ok()) return v.status().WithContext("steering directory " + path);
  return v;
}

Status ValidateControlVectorForModel(const ControlVector& cv, const std::string& path, int direction,
                                     int64_t n_layers, int64_t d_model) {
  if (cv.width != d_model || cv.ModelDepth() != n_layers || cv.directions.rbegin()->first >= n_layers) {
    return InvalidArgument("steering vector " + path + " has " + cv.ShapeString() + ", the model has " +
                           std::to_string(n_layers) + " layers of width " + std::to_string(d_model));
  }
  if (direction < 0 || direction > n_layers - 1) {
    return InvalidArgument("--steer-layer " + std::to_string(direction) +
                           ": direction.l is added to the output of decoder layer l (the input of layer l + 1), so "
                           "it must be in [0, " + std::to_string(n_layers - 1) + "] for a " +
                           std::to_string(n_layers) + "-layer model");
  }
  if (!cv.directions.count(direction)) {
    return InvalidArgument("steering vector " + path + " has no direction." + std::to_string(direction) + " (it has " +
                           cv.ShapeString() + ")");
  }
  return Status::Ok();
}

std::vector<float> SteeringDirection(const ControlVector& cv, int layer, bool authors_form) {
  std::vector<float> d = cv.directions.at(layer);
  if (authors_form)
    for (float& x : d) x = -x;
  return d;
}

}  // namespace skipkv
