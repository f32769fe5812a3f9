// SKIPKV_CHECK / SKIPKV_DCHECK: internal invariants. A failure is a bug in
// skipkv, never a user error (those are Status values); it prints the
// condition, file and line and aborts.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace skipkv::detail {
[[noreturn]] inline void CheckFailed(const char* cond, const char* file, int line, const char* msg) {
  std::fprintf(stderr, "skipkv: CHECK failed: %s at %s:%d %s\n", cond, file, line, msg ? msg : "");
  std::abort();
}
}  // namespace skipkv::detail

#define SKIPKV_CHECK(cond)                                                  \
  do {                                                                      \
    if (!(cond)) ::skipkv::detail::CheckFailed(#cond, __FILE__, __LINE__, nullptr); \
  } while (0)
#define SKIPKV_CHECK_MSG(cond, msg)                                         \
  do {                                                                      \
    if (!(cond)) ::skipkv::detail::CheckFailed(#cond, __FILE__, __LINE__, msg); \
  } while (0)

#ifdef NDEBUG
#define SKIPKV_DCHECK(cond) \
  do {                      \
  } while (0)
#else
#define SKIPKV_DCHECK(cond) SKIPKV_CHECK(cond)
#endif
