// SteeringConfig names, checks and the vector-file check of skipkv/steering.h.
#include <cmath>

#include "skipkv/steering.h"
#include "steer/steering_vector.h"

namespace skipkv {

const char* SteerCadenceName(SteerCadence c) {
  return c == SteerCadence::kCompression ? "compression" : "sentence";
}

StatusOr<SteerCadence> ParseSteerCadence(const std::string& name) {
  if (name == "compression") return SteerCadence::kCompression;
  if (name == "sentence") return SteerCadence::kSentenceClose;
  return InvalidField("steer_cadence", "steering cadence '" + name + "' (known: compression, sentence)");
}

Status ValidateSteeringConfig(const SteeringConfig& c) {
  if (!c.enabled) return Status::Ok();
  auto bad = [](const std::string& field, double v, const std::string& why) {
    return InvalidField("steer_" + field, "steering: " + field + " (" + std::to_string(v) + ") " + why);
  };
  if (c.file.empty()) return InvalidField("steer_file", "steering: no vector file given (--steer FILE)");
  if (c.layer < 0) return bad("layer", c.layer, "must be >= 0");
  if (!std::isfinite(c.coef)) return bad("coef", c.coef, "must be finite");
  if (!std::isfinite(c.alpha0)) return bad("alpha0", c.alpha0, "must be finite");
  if (!std::isfinite(c.gamma) || c.gamma < 0) return bad("gamma", c.gamma, "must be finite and >= 0");
  if (std::isnan(c.alpha_max) || c.alpha_max < c.alpha0) return bad("alpha_max", c.alpha_max, "must be >= alpha0");
  return Status::Ok();
}

Status CheckSteeringVectorFile(const std::string& path, int layer, int64_t n_layers, int64_t d_model) {
  SKIPKV_ASSIGN_OR_RETURN(ControlVector cv, LoadSteeringVector(path));
  return ValidateControlVectorForModel(cv, path, layer, n_layers, d_model);
}

}  // namespace skipkv
