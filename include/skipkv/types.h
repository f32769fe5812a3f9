// Small enums of the public API shared by every layer (public API;
// self-contained: standard library and skipkv/status.h only): how weight
// files reach memory, the element type of cached K/V, and how padding slots
// of a left-padded batch are treated. Implemented in src/util (ParseFileLoad);
// the engine parses the others (skipkv/engine.h).
#pragma once

#include <string>

#include "skipkv/status.h"

namespace skipkv {

// How the weight files reach memory (src/util/mapped_file.h holds the loader).
enum class FileLoad {
  kMap,   // mmap: no copy, pages shared with the page cache and other processes
  kRead,  // read() into anonymous memory, huge pages advised; costs the file's size in RAM
  kAuto,  // kRead when the file fits in 3/4 of MemAvailable, else kMap
};
// "map" / "mmap", "read", "auto"; anything else is an InvalidArgument naming it.
StatusOr<FileLoad> ParseFileLoad(const std::string& name);

// Element type of cached K and V.
enum class KvDType { kF16, kF32 };

// How padding slots of a left-padded batch are treated (spec §6.12 A10).
enum class PadPolicy {
  kRagged,  // no pad slots exist (every sequence has its own cache length)
  kPadded,  // paper-faithful: pad slots (valid == false) occupy the budget,
            // are masked in scoring and never evicted, so a row keeps
            // B − Δpad real tokens (SkipKV Eq. 12)
};

}  // namespace skipkv
