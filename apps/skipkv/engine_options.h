// Engine options shared by the commands that run a model (run, perplexity):
// model and tokenizer paths, threads, KV element type and the micro-batch
// size, parsed and checked in one place.
#pragma once

#include <algorithm>
#include <string>

#include <CLI/CLI.hpp>

#include "skipkv/engine.h"

namespace skipkv::cli {

// --weights, for every command that runs a model.
inline void AddWeightsOption(CLI::App& sub, std::string* weights) {
  sub.add_option("--weights", *weights,
                 "How the weight files reach memory: auto (read when they fit in 3/4 of available memory, else "
                 "map), read (into memory with transparent huge pages advised: fewer TLB misses, faster and "
                 "steadier decode; costs the weights' size in RAM; Q4_K, Q6_K and Q8_0 matrices, and on "
                 "AVX-512 F32 and F16 ones, are re-laid out in place in 16-row groups for faster kernels, "
                 "SKIPKV_REPACK=0 keeps the file's layout), map "
                 "(mmap: no copy, page cache shared with other processes; the file's layout)")
      ->check(CLI::IsMember({"auto", "read", "map"}))
      ->capture_default_str();
}

// n_batch is at least 2048 and at least n_ubatch. A bad kv_type or weights
// name is an InvalidArgument naming it.
inline StatusOr<EngineOptions> CommonEngineOptions(const std::string& model, const std::string& tokenizer,
                                                   int threads, const std::string& kv_type, int n_ubatch,
                                                   const std::string& weights = "auto") {
  EngineOptions eo;
  eo.model_path = model;
  eo.tokenizer_path = tokenizer;
  eo.threads = threads;
  SKIPKV_ASSIGN_OR_RETURN(eo.weights, ParseFileLoad(weights));
  SKIPKV_ASSIGN_OR_RETURN(eo.kv_type, ParseKvDType(kv_type));
  eo.n_ubatch = n_ubatch;
  eo.n_batch = std::max(2048, n_ubatch);
  return eo;
}

}  // namespace skipkv::cli
