// CUDA twin of the dense-output select (what the dense algorithm sends):
// one pass, outValues[i] = taken ? acc : 0, residual = taken ? 0 : acc, with
// the selected and non-finite counts reduced per block into integer atomics.
#include "cuda_device.cuh"

namespace dct::gpu {
namespace {

template <typename T>
__global__ void selectDenseKernel(const T* grad, const T* in, T* residual,
                                  T* out, size_t n, T tau, Counters* counters) {
  unsigned long long hits = 0, nonFinite = 0;
  DCT_GRID_STRIDE(i, n) {
    T acc = in[i];  // in may be residual: read before written
    if (grad) acc += grad[i];
    const bool take = taken(acc, tau);
    out[i] = take ? acc : T(0);
    residual[i] = take ? T(0) : acc;
    hits += take;
    nonFinite += !finite(acc);  // non-finite entries are always taken
  }
  addBlockCount(hits, &counters->hits);
  addBlockCount(nonFinite, &counters->nonFinite);
}

}  // namespace

dctResult_t selectDense(KernelContext* ctx, SelectArgs* args, void* stream) {
  SelectArgs& a = *args;
  a.nnz = a.selected = a.nonFinite = 0;
  CudaContext* c = cudaCtx(ctx);
  cudaStream_t s = cudaStreamOf(stream);
  return dispatchValue(a.dtype, [&]<typename T>() -> dctResult_t {
    if (a.n == 0) return dctSuccess;
    CUDACHECK(resetCounters(c, s));
    selectDenseKernel<T><<<gridFor(a.n), kThreads, 0, s>>>(
        static_cast<const T*>(a.grad), static_cast<const T*>(a.in()), static_cast<T*>(a.residual),
        static_cast<T*>(a.outValues),
        a.n, static_cast<T>(a.tau), c->device);
    CUDACHECK_LAUNCH();
    CUDACHECK(fetchCounters(c, s));
    a.selected = a.nnz = static_cast<size_t>(c->host->hits);
    a.nonFinite = static_cast<size_t>(c->host->nonFinite);
    return dctSuccess;
  });
}

}  // namespace dct::gpu
