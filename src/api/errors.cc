// Error strings, last-error lookup and version.
#include "transport/comm.h"
#include "base/debug.h"

using namespace dct;

extern "C" const char* dctGetErrorString(dctResult_t result) {
  switch (result) {
    case dctSuccess: return "no error";
    case dctInvalidArgument: return "invalid argument";
    case dctInvalidUsage: return "invalid usage (ranks disagree or wrong call order)";
    case dctSystemError: return "system error";
    case dctInternalError: return "internal error (please report)";
    case dctTransportError: return "transport (MPI/NCCL) error";
    case dctCudaError: return "CUDA error";
    case dctNotSupported: return "not supported by this build or version";
    case dctOutOfMemory: return "out of memory";
    default: return "unknown result code";
  }
}

extern "C" const char* dctGetLastError(dctComm_t comm) {
  if (validComm(comm)) return comm->lastErrorMessage();
  return threadLastErrorMessage();
}

extern "C" dctResult_t dctGetVersion(int* version) {
  if (version == nullptr) return fail(nullptr, dctInvalidArgument, "dctGetVersion: version is NULL");
  *version = DCT_VERSION_CODE;
  return dctSuccess;
}
