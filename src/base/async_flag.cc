#include "base/async_flag.h"

#include "dct_config.h"

#if DCT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace dct {

AsyncFlag::~AsyncFlag() {
#if DCT_HAVE_CUDA
  if (mapped_) (void)cudaFreeHost(mapped_);
#endif
}

dctResult_t AsyncFlag::mapForDevice() {
  if (mapped_) return dctSuccess;
#if DCT_HAVE_CUDA
  void* host = nullptr;
  if (cudaHostAlloc(&host, sizeof(int32_t), cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
    (void)cudaGetLastError();
    return dctCudaError;
  }
  void* device = nullptr;
  if (cudaHostGetDevicePointer(&device, host, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    (void)cudaFreeHost(host);
    return dctCudaError;
  }
  mapped_ = static_cast<int32_t*>(host);
  *mapped_ = plain_;
  deviceView_ = static_cast<int32_t*>(device);
  return dctSuccess;
#else
  return dctNotSupported;
#endif
}

}  // namespace dct
