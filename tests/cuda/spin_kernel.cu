// A kernel that keeps a stream busy for a while (the GPU's global timer,
// nanoseconds): work queued before a call under test that must still be
// running when the call returns.
#include <cuda_runtime.h>

namespace {

__device__ unsigned long long globalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spinKernel(unsigned long long nanoseconds) {
  const unsigned long long start = globalTimer();
  while (globalTimer() - start < nanoseconds) __nanosleep(1000);
}

}  // namespace

cudaError_t dctTestSpin(cudaStream_t stream, double milliseconds) {
  spinKernel<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(milliseconds * 1e6));
  return cudaGetLastError();
}
