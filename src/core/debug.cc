#include "core/debug.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/comm.h"

namespace dct {

namespace {
thread_local std::string threadLastError;

LogLevel parseLevel() {
  const char* env = std::getenv("DCT_DEBUG");
  if (env == nullptr) return LogLevel::None;
  if (strcasecmp(env, "WARN") == 0) return LogLevel::Warn;
  if (strcasecmp(env, "INFO") == 0) return LogLevel::Info;
  if (strcasecmp(env, "TRACE") == 0) return LogLevel::Trace;
  return LogLevel::None;
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
  if (comm != nullptr) comm->setLastError(msg);
  logf(LogLevel::Warn, "dct", 0, "%s: %s", dctGetErrorString(result), msg);
  return result;
}

const char* threadLastErrorMessage() { return threadLastError.c_str(); }

}  // namespace dct
