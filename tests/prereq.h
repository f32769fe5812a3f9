// Tests whose input is fetched by scripts/setup.sh (the npm tokenizer files
// under .deps/) report a missing prerequisite with SKIPKV_MISSING_PREREQ:
// a failure under CI=true or SKIPKV_REQUIRE_PREREQS=1 (scripts/test.sh, the
// README's test command, sets it), otherwise a skip. Either way the message
// starts with "missing prerequisite:" and names what is missing, which is what
// scripts/test.sh collects into its summary of skipped tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace skipkv::testing {

inline bool PrereqsRequired() {
  auto is = [](const char* name, const char* value) {
    const char* v = std::getenv(name);
    return v != nullptr && std::string(v) == value;
  };
  return is("CI", "true") || is("SKIPKV_REQUIRE_PREREQS", "1");
}

}  // namespace skipkv::testing

// Ends the test: FAIL when prerequisites are required, SKIP otherwise.
#define SKIPKV_MISSING_PREREQ(what)                                                    \
  do {                                                                                 \
    if (::skipkv::testing::PrereqsRequired()) {                                        \
      GTEST_FAIL() << "missing prerequisite: " << (what) << " (run scripts/setup.sh)"; \
    } else {                                                                           \
      GTEST_SKIP() << "missing prerequisite: " << (what) << " (run scripts/setup.sh)"; \
    }                                                                                  \
  } while (0)
