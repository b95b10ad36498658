// Logging (off unless DCT_DEBUG=WARN|INFO|TRACE), error recording and the
// DCTCHECK macro. Internal functions return dctResult_t; these macros
// propagate it and leave a file:line breadcrumb in TRACE logs.
#pragma once

#include "dct/dct.h"

namespace dct {

enum class LogLevel { None = 0, Warn = 1, Info = 2, Trace = 3 };

LogLevel logLevel();
void logf(LogLevel level, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

// Records a failure message for dctGetLastError (thread-local and, when comm
// is not null, on the comm too), logs it at WARN, and returns `result`.
dctResult_t fail(dctComm_t comm, dctResult_t result, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

// This thread's last failure message (empty if none).
const char* threadLastErrorMessage();
// How many failures this thread has recorded (tells whether a call recorded one).
unsigned long long threadFailureCount();
// Stores msg as comm's last error; defined with the comm (transport/comm.cc)
// so this layer needs no comm internals.
void setCommLastError(dctComm_t comm, const char* msg);

}  // namespace dct

#define DCT_WARN(...) ::dct::logf(::dct::LogLevel::Warn, __FILE__, __LINE__, __VA_ARGS__)
#define DCT_INFO(...) ::dct::logf(::dct::LogLevel::Info, __FILE__, __LINE__, __VA_ARGS__)
#define DCT_TRACE(...) ::dct::logf(::dct::LogLevel::Trace, __FILE__, __LINE__, __VA_ARGS__)

#define DCTCHECK(call)                                                  \
  do {                                                                  \
    dctResult_t dct_res_ = (call);                                      \
    if (dct_res_ != dctSuccess) {                                       \
      DCT_TRACE("%s -> %s", #call, dctGetErrorString(dct_res_));        \
      return dct_res_;                                                  \
    }                                                                   \
  } while (0)
