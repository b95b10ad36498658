// libdct_cuda.so's table: the CUDA twin, the runtime services the rest of
// libdct asks for (base/components.h), and the NCCL transport when built.
#include <cuda_runtime.h>

#include "base/components.h"
#include "base/cuda_check.h"
#include "dct_config.h"
#include "kernels/kernels.h"

#if DCT_HAVE_NCCL
#include <nccl.h>
#endif

namespace dct {
#if DCT_HAVE_NCCL
dctResult_t createNcclComm(ncclComm_t ncclComm, dctComm_t* out);
#endif

namespace {

bool runtimeDeviceMemory(const void* ptr) {
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

int currentDevice() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return device;
}

dctResult_t hostAlloc(void** ptr, size_t bytes, void** deviceView) {
  *ptr = nullptr;
  if (deviceView == nullptr) {
    CUDACHECK(cudaMallocHost(ptr, bytes));
    return dctSuccess;
  }
  void* host = nullptr;
  CUDACHECK(cudaHostAlloc(&host, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  if (const cudaError_t err = cudaHostGetDevicePointer(deviceView, host, 0); err != cudaSuccess) {
    (void)cudaFreeHost(host);
    return cudaFail(err, "cudaHostGetDevicePointer", __FILE__, __LINE__);
  }
  *ptr = host;
  return dctSuccess;
}

void hostFree(void* ptr) {
  if (ptr != nullptr && cudaFreeHost(ptr) != cudaSuccess) (void)cudaGetLastError();
}

dctResult_t copyAsync(void* dst, const void* src, size_t bytes, void* stream) {
  CUDACHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)));
  return dctSuccess;
}

dctResult_t streamSync(void* stream) {
  CUDACHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
  return dctSuccess;
}

#if DCT_HAVE_NCCL
dctResult_t ncclComm(void* comm, dctComm_t* out) { return createNcclComm(static_cast<ncclComm_t>(comm), out); }
#endif

}  // namespace
}  // namespace dct

extern "C" __attribute__((visibility("default"))) const dct::DeviceComponent* dctComponentCuda_v1() {
  static const dct::DeviceComponent table = {
      dct::kComponentAbi,
      DCT_BUILD_VERSION,
      &dct::cudaKernelOps(),
      dct::runtimeDeviceMemory,
      dct::currentDevice,
      dct::hostAlloc,
      dct::hostFree,
      dct::copyAsync,
      dct::streamSync,
#if DCT_HAVE_NCCL
      dct::ncclComm,
#else
      nullptr,
#endif
  };
  return &table;
}
