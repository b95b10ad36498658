// CUDA twin of the dense-output select (what the dense algorithm sends):
// one pass, outValues[i] = taken ? V(acc) : 0 (saturated), residual = taken ?
// acc - V(acc) : acc, with the selected and non-finite counts reduced per
// block into integer atomics.
#include "cuda_device.cuh"
#include "cuda_values.cuh"
#include "kernels/rounding_residual.h"
#include "kernels/select_types.h"

namespace dct::gpu {
namespace {

// acc = in + T(grad): T the accumulation type, G the gradient's, V the values'.
template <typename T, typename G, typename V>
__global__ void selectDenseKernel(const G* grad, const T* in, T* residual,
                                  V* out, size_t n, T tau, AccOf<V> limit, Counters* counters) {
  unsigned long long hits = 0, nonFinite = 0;
  DCT_GRID_STRIDE(i, n) {
    T acc = in[i];  // in may be residual: read before written
    if (grad) acc = hostAdd(acc, widenValue<T>(grad[i]));
    const bool take = taken(acc, tau), fin = finite(acc);
    const V v = take ? saturateValue<V>(acc, limit) : V{};
    out[i] = v;
    residual[i] = take ? roundingResidual(acc, v) : acc;
    hits += take;
    nonFinite += !fin;  // non-finite entries are always taken
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
  // The gradient's type is withGradient's.
  return dispatchSelectValues(a, [&]<typename T, typename, typename V>() -> dctResult_t {
    if (a.n == 0) return dctSuccess;
    CUDACHECK(resetCounters(c, s));
    DCTCHECK(withGradient<T>(ctx, a, stream, [&]<typename G>(const G* grad, const T* in) -> dctResult_t {
      selectDenseKernel<T, G, V><<<gridFor(a.n), kThreads, 0, s>>>(
          grad, in, static_cast<T*>(a.residual), static_cast<V*>(a.outValues), a.n, static_cast<T>(a.tau),
          valueLimitOf<T, V>(a), c->device);
      CUDACHECK_LAUNCH();
      return dctSuccess;
    }));
    CUDACHECK(fetchCounters(c, s));
    a.selected = a.nnz = static_cast<size_t>(c->host->hits);
    a.nonFinite = static_cast<size_t>(c->host->nonFinite);
    return dctSuccess;
  });
}

}  // namespace dct::gpu
