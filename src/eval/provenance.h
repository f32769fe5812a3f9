// Provenance of a run: a content digest of the model (file or checkpoint
// directory) and of the dataset file, and the source commit the binary was
// built from.
#pragma once

#include <string>

#include "util/status.h"

namespace skipkv::eval {

// "xh64:<16 hex digits>": a 64-bit multiply-xorshift hash of the bytes
// (not cryptographic; it tells files apart, fast enough for multi-GB
// weights). A directory hashes its regular files in name order (names and
// contents, subdirectories included). ":default:" and "" (the embedded model)
// give "embedded:stories260K". NotFound / IoError for unreadable paths.
StatusOr<std::string> ContentDigest(const std::string& path);

// `git rev-parse HEAD` of the source tree at build time, with "-dirty" when it
// had uncommitted changes; "unknown" outside a git checkout.
std::string SourceCommit();

}  // namespace skipkv::eval
