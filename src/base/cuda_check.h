// The one CUDA error macro, for the CUDA twin, the NCCL transport and host
// staging: records the runtime's message (dctGetLastError) and returns
// dctCudaError (dctOutOfMemory for a failed allocation).
#pragma once

#include <cuda_runtime.h>

#include "base/debug.h"

namespace dct {
// Clears the runtime's last error so a non-sticky failure does not leak
// into the next check.
dctResult_t cudaFail(cudaError_t err, const char* call, const char* file, int line);
}  // namespace dct

#define CUDACHECK(call)                                                  \
  do {                                                                   \
    cudaError_t cuda_err_ = (call);                                      \
    if (cuda_err_ != cudaSuccess)                                        \
      return ::dct::cudaFail(cuda_err_, #call, __FILE__, __LINE__);      \
  } while (0)
