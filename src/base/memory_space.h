// Which memory a pointer lives in. Host-only builds have only host memory.
#pragma once

#include "dct_config.h"

namespace dct {

#if DCT_HAVE_CUDA
// Device or managed memory. A process with no CUDA context cannot hold
// device memory, so until one exists the answer is "host" without touching
// the CUDA runtime: host-only MPI jobs on GPU nodes create no context (and
// pay no context's memory and start-up) just to classify their buffers.
bool isDeviceMemory(const void* ptr);
#else
inline bool isDeviceMemory(const void*) { return false; }
#endif

}  // namespace dct
