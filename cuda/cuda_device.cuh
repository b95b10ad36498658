// Device functions shared by the CUDA twin's kernels: the selection rule,
// magnitudes, grid-stride loops and per-block counter reduction. Every rule
// here mirrors the CPU twin operation for operation, so results are
// bit-identical (no contraction can apply: only single adds, multiplies and
// comparisons).
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cuda/std/cmath>
#include <cuda/std/limits>

#include "cuda_context.cuh"
#include "kernels/sampling.h"

namespace dct::gpu {

// 64-bit grid-stride loop over [0, n).
#define DCT_GRID_STRIDE(i, n)                                                        \
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<size_t>(gridDim.x) * blockDim.x)

// 64-bit grid-stride loop over [0, n) with one warp per item (the loop is
// warp-uniform, so warp primitives may run inside it). Launch
// gridFor(kWarp * n) threads.
constexpr unsigned kWarp = 32;
#define DCT_WARP_STRIDE(i, n)                                                                 \
  for (size_t i = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; i < (n); \
       i += static_cast<size_t>(gridDim.x) * blockDim.x / kWarp)

// The select rule of kernels.h: !(|acc| < tau), so NaN and +-Inf are taken.
template <typename T>
__device__ __forceinline__ bool taken(T acc, T tau) {
  return !(::cuda::std::fabs(acc) < tau);
}

template <typename T>
__device__ __forceinline__ bool finite(T x) {
  return ::cuda::std::isfinite(x);
}

// |x| with NaN mapped to +Inf (the CPU twin's threshold ordering).
template <typename T>
__device__ __forceinline__ T magnitude(T x) {
  return ::cuda::std::isnan(x) ? ::cuda::std::numeric_limits<T>::infinity() : ::cuda::std::fabs(x);
}

// Unsigned key with the bits of a non-negative float: for magnitudes
// (+0 .. +Inf, never NaN) unsigned order equals numeric order.
template <typename T>
struct MagnitudeKey;
template <>
struct MagnitudeKey<float> {
  using type = uint32_t;
  __device__ static type of(float m) { return __float_as_uint(m); }
};
template <>
struct MagnitudeKey<double> {
  using type = uint64_t;
  __device__ static type of(double m) { return static_cast<uint64_t>(__double_as_longlong(m)); }
};

// The i-th (0-based) draw of the CPU twin's sequential splitmix64 stream:
// call i sees state seed + (i + 1) * gamma, so draws are independent and
// identical to splitmix64() in kernels.h.
__device__ __forceinline__ uint64_t splitmix64At(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// samplePosition(): the high 64 bits of random * n.
__device__ __forceinline__ size_t samplePositionAt(uint64_t random, size_t n) {
  return static_cast<size_t>(__umul64hi(random, static_cast<uint64_t>(n)));
}

// Adds each thread's count to *counter: one atomic per block (integer
// atomics, so the total is exact and order-free). Every thread of the block
// must call it (it synchronizes); needs blockDim.x == kThreads.
__device__ __forceinline__ void addBlockCount(unsigned long long mine, unsigned long long* counter) {
  using Reduce = cub::BlockReduce<unsigned long long, kThreads>;
  __shared__ typename Reduce::TempStorage storage;
  unsigned long long total = Reduce(storage).Sum(mine);
  if (threadIdx.x == 0 && total) atomicAdd(counter, total);
  __syncthreads();  // storage may be reused by the next call
}

}  // namespace dct::gpu
