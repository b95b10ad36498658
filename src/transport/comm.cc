#include "transport/comm.h"

#include "base/debug.h"

void dctComm::setLastError(const char* msg) {
  std::lock_guard<std::mutex> lock(errorMutex);
  lastError = msg;
}

const char* dctComm::lastErrorMessage() {
  thread_local std::string copy;
  std::lock_guard<std::mutex> lock(errorMutex);
  copy = lastError;
  return copy.c_str();
}

namespace dct {
void setCommLastError(dctComm_t comm, const char* msg) { comm->setLastError(msg); }
}  // namespace dct
