#include "base/debug.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/env.h"

namespace dct {

namespace {
thread_local std::string threadLastError;
thread_local unsigned long long threadFailures = 0;

LogLevel parseLevel() {
  static const char* const names[] = {"NONE", "WARN", "INFO", "TRACE"};
  EnvValue<int> v = envChoice("DCT_DEBUG", names, 4);
  return v.valid() && v.value >= 0 && v.value <= 3 ? static_cast<LogLevel>(v.value) : LogLevel::None;
}

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::Warn: return "WARN";
    case LogLevel::Info: return "INFO";
    default: return "TRACE";
  }
}
}  // namespace

LogLevel logLevel() {
  static const LogLevel level = parseLevel();
  return level;
}

void logf(LogLevel level, const char* file, int line, const char* fmt, ...) {
  if (level > logLevel()) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char* base = std::strrchr(file, '/');
  std::fprintf(stderr, "[pid %d] DCT %s %s:%d %s\n", static_cast<int>(getpid()),
               levelName(level), base ? base + 1 : file, line, msg);
}

dctResult_t fail(dctComm_t comm, dctResult_t result, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  threadLastError = msg;
  threadFailures++;
  if (comm != nullptr) setCommLastError(comm, msg);
  logf(LogLevel::Warn, "dct", 0, "%s: %s", dctGetErrorString(result), msg);
  return result;
}

const char* threadLastErrorMessage() { return threadLastError.c_str(); }
unsigned long long threadFailureCount() { return threadFailures; }

}  // namespace dct
