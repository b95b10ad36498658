// CUDA twin of scatter-add: dense[indices[j]] += values[j].
//
// Strictly ascending (unique) indices never share a target, so one thread per
// entry is race-free and each target sees exactly one add: bit-identical to
// the CPU twin. Repeated indices must be added in j order to match the CPU
// twin's sequential loop bit for bit; that path runs as one sequential
// thread. Every libdct device path scatters sorted unique messages; the
// ordered path exists for completeness (and for user-supplied indices).
#include "cuda_device.cuh"

namespace dct::gpu {
namespace {

template <typename T, typename I>
__global__ void scatterUnique(T* __restrict__ dense, const I* __restrict__ indices,
                              const T* __restrict__ values, size_t nnz) {
  DCT_GRID_STRIDE(j, nnz) dense[indices[j]] += values[j];
}

template <typename T, typename I>
__global__ void scatterInOrder(T* __restrict__ dense, const I* __restrict__ indices,
                               const T* __restrict__ values, size_t nnz) {
  for (size_t j = 0; j < nnz; j++) dense[indices[j]] += values[j];
}

}  // namespace

dctResult_t scatterAdd(KernelContext*, const ScatterArgs* args, void* stream) {
  const ScatterArgs& a = *args;
  cudaStream_t s = cudaStreamOf(stream);
  return dispatchTypes(a.dtype, a.indexBytes, [&]<typename T, typename I>() -> dctResult_t {
    if (a.nnz == 0) return dctSuccess;
    T* dense = static_cast<T*>(a.dense);
    const I* idx = static_cast<const I*>(a.indices);
    const T* val = static_cast<const T*>(a.values);
    if (a.sortedUnique) scatterUnique<T, I><<<gridFor(a.nnz), kThreads, 0, s>>>(dense, idx, val, a.nnz);
    else scatterInOrder<T, I><<<1, 1, 0, s>>>(dense, idx, val, a.nnz);
    CUDACHECK_LAUNCH();
    return dctSuccess;
  });
}

}  // namespace dct::gpu
