// The steering vectors a server may use: loaded from the paths given on its
// command line (`serve --steer FILE`, the default, and `--steer-vector
// NAME=FILE`), never from a path in a request. A request picks one by name
// (kv.steer_vector) when its method preset steers (seal,
// rkv+sentence+steering, skipkv; docs/steering.md, docs/serving.md).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "skipkv/steering.h"
#include "util/status.h"

namespace skipkv::serve {

struct SteerVector {
  SteeringConfig config;     // enabled, the file, --steer-layer and the strengths
  std::set<int> directions;  // direction indices the file holds that the model can steer with
};

struct SteerVectors {
  static constexpr const char* kDefault = "default";  // the name of --steer's vector
  std::map<std::string, SteerVector> by_name;         // empty: the server does not steer
  bool empty() const { return by_name.empty(); }
  // "default, neg" (for messages); "" when empty.
  std::string Names() const;
};

// Loads `base.file` (when base.enabled) as "default" and each "NAME=FILE" of
// `named` with base's layer and strengths, and checks each against the
// model (n_layers, d_model; base.layer must be a direction of every file).
// Names are 1-64 characters of [A-Za-z0-9_-], unique, not "default".
// InvalidArgument naming the option and value (named vectors without
// base.enabled, a bad NAME=FILE), or the loader's error naming the file.
StatusOr<SteerVectors> LoadSteerVectors(const SteeringConfig& base, const std::vector<std::string>& named,
                                        int64_t n_layers, int64_t d_model);

}  // namespace skipkv::serve
