// Loading and checking the server's steering vectors; see steer_vectors.h.
#include "serve/steer_vectors.h"

#include "steer/steering_vector.h"

namespace skipkv::serve {
namespace {

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

StatusOr<SteerVector> Load(const SteeringConfig& config, int64_t n_layers, int64_t d_model) {
  SKIPKV_ASSIGN_OR_RETURN(ControlVector cv, LoadSteeringVector(config.file));
  SKIPKV_RETURN_IF_ERROR(ValidateControlVectorForModel(cv, config.file, config.layer, n_layers, d_model));
  SteerVector v;
  v.config = config;
  for (const auto& [l, dir] : cv.directions) {
    if (ValidateControlVectorForModel(cv, config.file, static_cast<int>(l), n_layers, d_model).ok())
      v.directions.insert(static_cast<int>(l));
  }
  return v;
}

}  // namespace

std::string SteerVectors::Names() const {
  std::string s;
  for (const auto& [name, v] : by_name) s += (s.empty() ? "" : ", ") + name;
  return s;
}

StatusOr<SteerVectors> LoadSteerVectors(const SteeringConfig& base, const std::vector<std::string>& named,
                                        int64_t n_layers, int64_t d_model) {
  SteerVectors out;
  if (!base.enabled) {
    if (!named.empty()) {
      return InvalidArgument("--steer-vector '" + named.front() +
                             "' needs --steer FILE (the default vector; named vectors share its "
                             "--steer-layer and strengths)");
    }
    return out;
  }
  SKIPKV_RETURN_IF_ERROR(ValidateSteeringConfig(base));
  SKIPKV_ASSIGN_OR_RETURN(out.by_name[SteerVectors::kDefault], Load(base, n_layers, d_model));
  for (const std::string& spec : named) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq + 1 == spec.size())
      return InvalidArgument("--steer-vector '" + spec + "' must be NAME=FILE");
    const std::string name = spec.substr(0, eq);
    if (!ValidName(name)) {
      return InvalidArgument("--steer-vector '" + spec +
                             "': NAME must be 1-64 characters of letters, digits, '_' and '-'");
    }
    if (out.by_name.count(name)) {
      return InvalidArgument("--steer-vector '" + spec + "': the name '" + name + "' is " +
                             (name == SteerVectors::kDefault ? "--steer's vector" : "given twice"));
    }
    SteeringConfig c = base;
    c.file = spec.substr(eq + 1);
    StatusOr<SteerVector> v = Load(c, n_layers, d_model);
    if (!v.ok()) return v.status().WithContext("--steer-vector " + name);
    out.by_name[name] = std::move(v).value();
  }
  return out;
}

}  // namespace skipkv::serve
