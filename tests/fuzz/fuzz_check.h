// The invariant check of every fuzz target: a failed invariant aborts, so libFuzzer reports it as a
// crash and keeps the input; the message names the target's file and line (of the caller) and what
// was violated.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace {

inline void Check(bool ok, const char* what, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  if (!ok) {
    std::fprintf(stderr, "%s:%d: invariant violated: %s\n", file, line, what);
    std::abort();
  }
}

}  // namespace
