// Minimal leveled logging to stderr. Level from SKIPKV_LOG (error|warn|info|debug),
// default warn, or SetLogLevel(). printf-style so hot paths can skip formatting.
#pragma once

namespace skipkv {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
void Log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace skipkv

#define SKIPKV_LOG_INFO(...) \
  do { if (::skipkv::GetLogLevel() >= ::skipkv::LogLevel::kInfo) ::skipkv::Log(::skipkv::LogLevel::kInfo, __VA_ARGS__); } while (0)
#define SKIPKV_LOG_DEBUG(...) \
  do { if (::skipkv::GetLogLevel() >= ::skipkv::LogLevel::kDebug) ::skipkv::Log(::skipkv::LogLevel::kDebug, __VA_ARGS__); } while (0)
#define SKIPKV_LOG_WARN(...) ::skipkv::Log(::skipkv::LogLevel::kWarn, __VA_ARGS__)
#define SKIPKV_LOG_ERROR(...) ::skipkv::Log(::skipkv::LogLevel::kError, __VA_ARGS__)
