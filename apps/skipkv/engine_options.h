// Engine options shared by the commands that run a model (run, perplexity):
// model and tokenizer paths, threads, KV element type and the micro-batch
// size, parsed and checked in one place.
#pragma once

#include <algorithm>
#include <string>

#include "skipkv/engine.h"

namespace skipkv::cli {

// n_batch is at least 2048 and at least n_ubatch. A bad kv_type name is an
// InvalidArgument naming it.
inline StatusOr<EngineOptions> CommonEngineOptions(const std::string& model, const std::string& tokenizer,
                                                   int threads, const std::string& kv_type, int n_ubatch) {
  EngineOptions eo;
  eo.model_path = model;
  eo.tokenizer_path = tokenizer;
  eo.threads = threads;
  SKIPKV_ASSIGN_OR_RETURN(eo.kv_type, ParseKvDType(kv_type));
  eo.n_ubatch = n_ubatch;
  eo.n_batch = std::max(2048, n_ubatch);
  return eo;
}

}  // namespace skipkv::cli
