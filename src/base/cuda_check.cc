#include "base/cuda_check.h"

#include <cstring>

namespace dct {

dctResult_t cudaFail(cudaError_t err, const char* call, const char* file, int line) {
  (void)cudaGetLastError();
  const char* base = std::strrchr(file, '/');
  dctResult_t res = fail(nullptr, dctCudaError, "%s: %s (%s) at %s:%d", call, cudaGetErrorString(err),
                         cudaGetErrorName(err), base ? base + 1 : file, line);
  return err == cudaErrorMemoryAllocation ? dctOutOfMemory : res;
}

}  // namespace dct
