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

dctResult_t everyone(dctComm_t comm, dctResult_t mine, const char* othersFailed) {
  int32_t worst = 0;
  const dctResult_t res = comm->transport->vote(comm, mine, &worst, nullptr);
  if (mine != dctSuccess) return mine;
  if (res != dctSuccess) return res;
  if (worst == dctSuccess) return dctSuccess;
  return fail(comm, dctInvalidUsage, "%s", othersFailed);
}
}  // namespace dct
