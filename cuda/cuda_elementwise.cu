// CUDA twin: the streaming element-wise ops (residual += grad, out = a + b, x *= factor)
// and the sum of magnitudes.
// Entry (type dispatch) -> launch -> grid-stride kernel.
#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>

#include "cuda_device.cuh"
#include "cuda_values.cuh"

namespace dct::gpu {
namespace {

template <typename T>
__global__ void accumulateKernel(T* __restrict__ residual, const T* __restrict__ grad, size_t n) {
  DCT_GRID_STRIDE(i, n) residual[i] += grad[i];
}

// out may alias a: each element is read before it is written. b (any
// type) is widened to T first, as on the CPU twin: out = a + T(b).
template <typename T, typename B>
__global__ void addKernel(T* out, const T* a, const B* b, size_t n) {
  DCT_GRID_STRIDE(i, n) out[i] = hostAdd(a[i], widenValue<T>(b[i]));
}

template <typename T>
__global__ void scaleKernel(T* __restrict__ x, size_t n, T factor) {
  DCT_GRID_STRIDE(i, n) x[i] *= factor;
}

template <typename T>
struct Magnitude {
  __device__ double operator()(T x) const { return fabs(static_cast<double>(x)); }
};

}  // namespace

dctResult_t accumulate(KernelContext*, void* residual, const void* grad, size_t n,
                       dctDataType_t dtype, void* stream) {
  return dispatchValue(dtype, [&]<typename T>() -> dctResult_t {
    if (n == 0) return dctSuccess;
    accumulateKernel<T><<<gridFor(n), kThreads, 0, cudaStreamOf(stream)>>>(
        static_cast<T*>(residual), static_cast<const T*>(grad), n);
    CUDACHECK_LAUNCH();
    return dctSuccess;
  });
}

dctResult_t add(KernelContext*, void* out, const void* a, const void* b, size_t n, dctDataType_t dtype,
                dctDataType_t bType, void* stream) {
  return dispatchValue(dtype, [&]<typename T>() {
    return dispatchAnyValue(bType, [&]<typename B>() -> dctResult_t {
      if (n == 0) return dctSuccess;
      addKernel<T, B><<<gridFor(n), kThreads, 0, cudaStreamOf(stream)>>>(
          static_cast<T*>(out), static_cast<const T*>(a), static_cast<const B*>(b), n);
      CUDACHECK_LAUNCH();
      return dctSuccess;
    });
  });
}

dctResult_t scale(KernelContext*, void* data, size_t n, dctDataType_t dtype, double factor,
                  void* stream) {
  return dispatchValue(dtype, [&]<typename T>() -> dctResult_t {
    if (n == 0) return dctSuccess;
    // The factor is rounded to T on the host, as the CPU twin does.
    scaleKernel<T><<<gridFor(n), kThreads, 0, cudaStreamOf(stream)>>>(
        static_cast<T*>(data), n, static_cast<T>(factor));
    CUDACHECK_LAUNCH();
    return dctSuccess;
  });
}

dctResult_t absSum(KernelContext* ctx, const void* data, size_t n, dctDataType_t dtype, double* sum,
                   void* stream) {
  CudaContext* c = cudaCtx(ctx);
  cudaStream_t s = cudaStreamOf(stream);
  *sum = 0;
  if (n == 0) return dctSuccess;
  return dispatchValue(dtype, [&]<typename T>() -> dctResult_t {
    const T* x = static_cast<const T*>(data);
    double* out = &c->device->sum;
    size_t bytes = 0;
    CUDACHECK(cub::DeviceReduce::TransformReduce(nullptr, bytes, x, out, n, ::cuda::std::plus<double>{},
                                                 Magnitude<T>{}, 0.0, s));
    DCTCHECK(c->temp.reserve(bytes));
    CUDACHECK(cub::DeviceReduce::TransformReduce(c->temp.ptr, bytes, x, out, n, ::cuda::std::plus<double>{},
                                                 Magnitude<T>{}, 0.0, s));
    CUDACHECK(fetchCounters(c, s));
    *sum = c->host->sum;
    return dctSuccess;
  });
}

}  // namespace dct::gpu
