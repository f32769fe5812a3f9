// The log level (SKIPKV_LOG or SetLogLevel) and the stderr sink; see logging.h.
#include "util/logging.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace skipkv {
namespace {

LogLevel LevelFromEnv() {
  const char* env = std::getenv("SKIPKV_LOG");
  if (env == nullptr) return LogLevel::kWarn;
  if (std::strcmp(env, "error") == 0) return LogLevel::kError;
  if (std::strcmp(env, "info") == 0) return LogLevel::kInfo;
  if (std::strcmp(env, "debug") == 0) return LogLevel::kDebug;
  return LogLevel::kWarn;
}

std::atomic<int>& LevelStorage() {
  static std::atomic<int> level{static_cast<int>(LevelFromEnv())};
  return level;
}

}  // namespace

void SetLogLevel(LogLevel level) { LevelStorage().store(static_cast<int>(level)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(LevelStorage().load()); }

void Log(LogLevel level, const char* fmt, ...) {
  if (level > GetLogLevel()) return;
  static const char* kNames[] = {"error", "warn", "info", "debug"};
  char buf[2048];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  std::fprintf(stderr, "skipkv %s: %s\n", kNames[static_cast<int>(level)], buf);
}

}  // namespace skipkv
