// CUDA twin of convert: dst[i] = round_D(src[i] * factor), any pair of the
// four value types. The product is formed in W (double when either side is
// fp64, else float) and rounded once to D's accumulation type, then to D:
// the CPU twin's expression (cpu_ops.cc), its NaN signs included
// (cuda_values.cuh). A factor of exactly 1 is a plain conversion there, so
// it is here too: no multiply, so even fp32 NaN payloads match.
#include "cuda_device.cuh"
#include "cuda_values.cuh"

namespace dct::gpu {
namespace {

// dst may be src (same size types): each element is read before it is written.
template <typename D, typename S, typename W>
__global__ void convertKernel(D* dst, const S* src, size_t n, W factor, bool unit) {
  DCT_GRID_STRIDE(i, n) dst[i] = convertElement<D, S, W>(src[i], factor, unit);
}

}  // namespace

dctResult_t convert(KernelContext*, void* dst, dctDataType_t dstType, const void* src,
                    dctDataType_t srcType, size_t n, double factor, void* stream) {
  return dispatchAnyValue(dstType, [&]<typename D>() {
    return dispatchAnyValue(srcType, [&]<typename S>() -> dctResult_t {
      if (n == 0) return dctSuccess;
      using W = WideOf<D, S>;
      const W f = static_cast<W>(factor);  // rounded on the host, as the CPU twin does
      convertKernel<D, S, W><<<gridFor(n), kThreads, 0, cudaStreamOf(stream)>>>(
          static_cast<D*>(dst), static_cast<const S*>(src), n, f, f == W(1));
      CUDACHECK_LAUNCH();
      return dctSuccess;
    });
  });
}

}  // namespace dct::gpu
