// CUDA twin of the 1-bit kernels (src/kernels/onebit_kernels.h), bit for
// bit equal to the CPU twin (src/kernels/cpu_onebit.cc):
//
//   entry     onebitCompress / onebitAverage / onebitDecode: type dispatch
//   compress  compressGroups: one warp per group of 32 sign words (1024
//             elements): lane l holds element 32w + l of word w, so loads are
//             coalesced, the sign word is one __ballot_sync and the word's
//             sum of squares the halving tree as a shuffle-down reduction;
//             lane k keeps word k's sum and the same tree gives the group's
//             partial. reduceLevel repeats the tree over 32 partials at a
//             time until one is left, which the host reads back to form the
//             scale (onebitScale, shared); feedback then updates the error.
//   average / decode: grid-stride element kernels over the shared rules of
//             onebit_math.h.
//
// CUB's reductions are not used for the sum of squares: their order is an
// implementation detail, and the twins must add in one specified order.
// Adds and squares use __dadd_rn/__dmul_rn so nothing is fused into an FMA.
#include <cmath>

#include "cuda_device.cuh"
#include "kernels/onebit_math.h"

namespace dct::gpu {
namespace {

constexpr unsigned kFullWarp = 0xffffffffu;

// Lane 0 gets the halving tree of the 32 lanes' values (onebitTree32): at
// step s lane i adds lane i + s, exactly t[i] = t[i] + t[i + s].
__device__ __forceinline__ double warpTree32(double v) {
  for (int s = 16; s > 0; s >>= 1) v = __dadd_rn(v, __shfl_down_sync(kFullWarp, v, s));
  return v;
}

__device__ __forceinline__ size_t warpIndex() { return (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; }
__device__ __forceinline__ size_t warpCount() { return static_cast<size_t>(gridDim.x) * blockDim.x / 32; }

// errIn and errOut may alias: each element is read before it is written,
// by the same thread.
template <typename T, typename A>
__global__ void compressGroups(const T* in, const A* errIn, A* errOut, size_t n, uint32_t* __restrict__ signs,
                               double* __restrict__ partials) {
  const unsigned lane = threadIdx.x & 31u;
  const size_t words = onebitWords(n), groups = (words + 31) / 32;
  for (size_t g = warpIndex(); g < groups; g += warpCount()) {  // uniform per warp
    double mine = 0.0;  // lane k: word 32g + k's sum
    for (unsigned k = 0; k < 32; k++) {
      const size_t w = g * 32 + k;
      if (w >= words) break;
      const size_t i = w * 32 + lane;
      const bool valid = i < n;
      A x = A(0);
      if (valid) {
        x = onebitInput(in, errIn, i);
        errOut[i] = x;
      }
      const uint32_t bits = __ballot_sync(kFullWarp, valid && onebitBit(x));
      if (lane == 0) signs[w] = bits;
      const double word = __shfl_sync(kFullWarp, warpTree32(valid ? onebitSquare(x) : 0.0), 0);
      if (lane == k) mine = word;
    }
    const double group = warpTree32(mine);
    if (lane == 0) partials[g] = group;
  }
}

// One level: out[g] = tree of in[32g .. 32g + 31] (zeros past count).
__global__ void reduceLevel(const double* __restrict__ in, size_t count, double* __restrict__ out) {
  const unsigned lane = threadIdx.x & 31u;
  const size_t groups = (count + 31) / 32;
  for (size_t g = warpIndex(); g < groups; g += warpCount()) {
    const size_t i = g * 32 + lane;
    const double v = warpTree32(i < count ? in[i] : 0.0);
    if (lane == 0) out[g] = v;
  }
}

template <typename A>
__global__ void feedback(A* __restrict__ err, size_t n, A scale, bool update, A* __restrict__ scaleOut) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *scaleOut = scale;
  if (!update) return;
  DCT_GRID_STRIDE(i, n) err[i] = onebitError(err[i], scale);
}

template <typename A>
__global__ void averageKernel(const uint32_t* __restrict__ signs, size_t stride, const A* __restrict__ scales,
                              int ranks, const A* errIn, A* out, size_t n) {
  DCT_GRID_STRIDE(i, n) out[i] = onebitMean(signs, stride, scales, ranks, i) + errIn[i];
}

template <typename T, typename A>
__global__ void decodeKernel(const uint32_t* __restrict__ signs, const A* __restrict__ scales, size_t chunkLength,
                             size_t n, A factor, bool nanFactor, T* __restrict__ out) {
  DCT_GRID_STRIDE(i, n) out[i] = onebitDecoded<T>(signs, scales, chunkLength, i, factor, nanFactor);
}

// Warps enough for `items` warp-sized work items.
unsigned gridForWarps(size_t items) { return gridFor(items * 32); }

// The sum of squares from the level-1 partials in scratch, on the host.
dctResult_t finishSum(double* scratch, size_t groups, cudaStream_t s, double* sum) {
  *sum = 0.0;
  if (groups == 0) return dctSuccess;
  double* a = scratch;
  double* b = scratch + groups;  // room for ceil(groups / 32) (onebitScratchBytes)
  size_t count = groups;
  while (count > 1) {
    const size_t next = (count + 31) / 32;
    reduceLevel<<<gridForWarps(next), kThreads, 0, s>>>(a, count, b);
    CUDACHECK_LAUNCH();
    double* t = a;
    a = b;
    b = t;
    count = next;
  }
  CUDACHECK(cudaMemcpyAsync(sum, a, sizeof(double), cudaMemcpyDeviceToHost, s));
  CUDACHECK(cudaStreamSynchronize(s));
  return dctSuccess;
}

template <typename T, typename A>
dctResult_t compressTyped(OnebitCompressArgs& a, cudaStream_t s) {
  const T* in = static_cast<const T*>(a.input);
  A* errOut = static_cast<A*>(a.errorOut);
  const size_t groups = (onebitWords(a.n) + 31) / 32;
  if (groups) {
    compressGroups<T, A><<<gridForWarps(groups), kThreads, 0, s>>>(in, static_cast<const A*>(a.errorIn), errOut, a.n,
                                                                   a.signs, a.scratch);
    CUDACHECK_LAUNCH();
  }
  DCTCHECK(finishSum(a.scratch, groups, s, &a.sumOfSquares));
  a.scaleValue = onebitScale(a.sumOfSquares, a.n, Value<A>::type);
  const bool finite = !std::isnan(a.scaleValue);  // a NaN scale: the step is never committed
  feedback<A><<<finite && a.n ? gridFor(a.n) : 1, kThreads, 0, s>>>(errOut, a.n, static_cast<A>(a.scaleValue),
                                                                    finite, static_cast<A*>(a.scale));
  CUDACHECK_LAUNCH();
  return dctSuccess;
}

}  // namespace

dctResult_t onebitCompress(KernelContext*, OnebitCompressArgs* args, void* stream) {
  return dispatchAnyValue(args->dtype, [&]<typename T>() -> dctResult_t {
    return compressTyped<T, typename Value<T>::Acc>(*args, cudaStreamOf(stream));
  });
}

dctResult_t onebitAverage(KernelContext*, const OnebitAverageArgs* args, void* stream) {
  const OnebitAverageArgs& a = *args;
  if (a.ranks < 1) return dctInternalError;
  return dispatchAnyValue(a.dtype, [&]<typename T>() -> dctResult_t {
    using A = typename Value<T>::Acc;
    if (a.n == 0) return dctSuccess;
    averageKernel<A><<<gridFor(a.n), kThreads, 0, cudaStreamOf(stream)>>>(
        a.signs, a.strideWords, static_cast<const A*>(a.scales), a.ranks, static_cast<const A*>(a.errorIn),
        static_cast<A*>(a.out), a.n);
    CUDACHECK_LAUNCH();
    return dctSuccess;
  });
}

dctResult_t onebitDecode(KernelContext*, const OnebitDecodeArgs* args, void* stream) {
  const OnebitDecodeArgs& a = *args;
  if (a.chunkLength == 0 || a.chunkLength % 32 != 0) return dctInternalError;
  return dispatchAnyValue(a.dtype, [&]<typename T>() -> dctResult_t {
    using A = typename Value<T>::Acc;
    if (a.n == 0) return dctSuccess;
    const bool nanFactor = std::isnan(a.factor);
    decodeKernel<T, A><<<gridFor(a.n), kThreads, 0, cudaStreamOf(stream)>>>(
        a.signs, static_cast<const A*>(a.scales), a.chunkLength, a.n, static_cast<A>(nanFactor ? 1.0 : a.factor),
        nanFactor, static_cast<T*>(a.out));
    CUDACHECK_LAUNCH();
    return dctSuccess;
  });
}

}  // namespace dct::gpu
