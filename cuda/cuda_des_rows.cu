// CUDA twin of the DES row-block ops (RowBlockArgs, kernels.h "DES rows").
//
//   rowFlags       one block per row: cub::BlockReduce of "any magnitude
//                  bit set" and of the NaN/Inf entries; thread 0 sets the
//                  row's flag (atomicOr) and adds to the counters, which
//                  come back to the host (one stream synchronisation)
//   places         a flagged row's place in `packed`: the flagged rows of
//                  the words before its own (cub::DeviceScan::ExclusiveSum
//                  over the words' popcounts, W + 1 items into scratch) plus
//                  the flags below it in its word
//   rowGather, rowScatter, rowAccumulate
//                  grid-stride over the R x D entries; gather and scatter
//                  move bits (one instantiation per width), accumulate adds
//                  in the accumulation type as the CPU twin (addInto)
//
// rowAccumulate checks wire flags (popcount total, bits past R) on the
// host before adding anything, so a malformed block writes nothing, as on
// the CPU twin. Every op that uses scratch synchronizes before returning.
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "base/dtype.h"
#include "cuda_values.cuh"

namespace dct::gpu {
namespace {

// The unsigned integer as wide as T, its sign bit and its exponent field.
template <typename T>
struct BitsOf;
template <>
struct BitsOf<float> {
  using U = uint32_t;
  static constexpr U sign = 0x80000000u, exponent = 0x7f800000u;
};
template <>
struct BitsOf<double> {
  using U = uint64_t;
  static constexpr U sign = 0x8000000000000000ull, exponent = 0x7ff0000000000000ull;
};
template <>
struct BitsOf<Half> {
  using U = uint16_t;
  static constexpr U sign = 0x8000u, exponent = 0x7c00u;
};
template <>
struct BitsOf<BFloat16> {
  using U = uint16_t;
  static constexpr U sign = 0x8000u, exponent = 0x7f80u;
};

// fn.template operator()<U>() with U the unsigned integer as wide as dtype.
template <typename Fn>
dctResult_t dispatchWidth(dctDataType_t dtype, Fn&& fn) {
  switch (dtype) {
    case dctFloat16:
    case dctBFloat16: return fn.template operator()<uint16_t>();
    case dctFloat32: return fn.template operator()<uint32_t>();
    case dctFloat64: return fn.template operator()<uint64_t>();
    default: return dctNotSupported;
  }
}

constexpr int kFlagThreads = 128;
constexpr size_t kMaxFlagBlocks = size_t(1) << 16;

template <typename T>
__global__ void __launch_bounds__(kFlagThreads)
    flagRows(const typename BitsOf<T>::U* rows, size_t R, size_t D, uint32_t* flags, Counters* counters) {
  using U = typename BitsOf<T>::U;
  using Reduce = cub::BlockReduce<unsigned long long, kFlagThreads>;
  __shared__ typename Reduce::TempStorage storage;
  for (size_t r = blockIdx.x; r < R; r += gridDim.x) {
    unsigned long long any = 0, nonFinite = 0;
    for (size_t j = threadIdx.x; j < D; j += kFlagThreads) {
      const U x = rows[r * D + j];
      any += (x & static_cast<U>(~BitsOf<T>::sign)) != 0;
      nonFinite += (x & BitsOf<T>::exponent) == BitsOf<T>::exponent;
    }
    const unsigned long long anyAll = Reduce(storage).Sum(any);
    __syncthreads();
    const unsigned long long nonFiniteAll = Reduce(storage).Sum(nonFinite);
    __syncthreads();
    if (threadIdx.x == 0 && anyAll != 0) {
      atomicOr(&flags[r / 32], 1u << (r % 32));
      atomicAdd(&counters->hits, 1ull);
      atomicAdd(&counters->nonFinite, nonFiniteAll);
    }
  }
}

struct WordPopcount {
  const uint32_t* flags;
  size_t words;
  __device__ uint64_t operator()(size_t w) const { return w < words ? __popc(flags[w]) : 0; }
};

__device__ __forceinline__ bool flagOf(const uint32_t* flags, size_t r) {
  return flags == nullptr || ((flags[r / 32] >> (r % 32)) & 1u);
}
__device__ __forceinline__ uint64_t placeOf(const uint32_t* flags, const uint64_t* prefix, size_t r) {
  if (flags == nullptr) return r;
  return prefix[r / 32] + __popc(flags[r / 32] & ((1u << (r % 32)) - 1u));
}

template <typename U>
__global__ void gatherRows(const U* rows, size_t R, size_t D, const uint32_t* flags, const uint64_t* prefix,
                           U* packed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < R * D; i += size_t(gridDim.x) * blockDim.x) {
    const size_t r = i / D;
    if (flagOf(flags, r)) packed[placeOf(flags, prefix, r) * D + i % D] = rows[i];
  }
}

template <typename U>
__global__ void scatterRows(U* rows, size_t R, size_t D, const uint32_t* flags, const uint64_t* prefix,
                            const U* packed, bool denseSource) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < R * D; i += size_t(gridDim.x) * blockDim.x) {
    const size_t r = i / D;
    if (!flagOf(flags, r)) {
      rows[i] = U(0);
      continue;
    }
    rows[i] = packed[(denseSource ? r : placeOf(flags, prefix, r)) * D + i % D];
  }
}

template <typename T>
__global__ void accumulateRows(AccOf<T>* acc, size_t R, size_t D, const uint32_t* flags, const uint64_t* prefix,
                               const T* packed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < R * D; i += size_t(gridDim.x) * blockDim.x) {
    const size_t r = i / D;
    if (flagOf(flags, r)) addInto(acc[i], packed[placeOf(flags, prefix, r) * D + i % D]);
  }
}

// prefix[w] = flagged rows before word w (W + 1 entries, in scratch); null
// when flags is null (every row: place r).
dctResult_t wordPrefix(CudaContext* c, const uint32_t* flags, size_t R, cudaStream_t s, uint64_t** prefix) {
  *prefix = nullptr;
  if (flags == nullptr) return dctSuccess;
  const size_t W = maskWords(R);
  DCTCHECK(c->scratch.reserve((W + 1) * sizeof(uint64_t)));
  *prefix = c->scratch.as<uint64_t>();
  const auto in = thrust::make_transform_iterator(thrust::counting_iterator<size_t>(0), WordPopcount{flags, W});
  size_t bytes = 0;
  CUDACHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, *prefix, W + 1, s));
  DCTCHECK(c->temp.reserve(bytes));
  CUDACHECK(cub::DeviceScan::ExclusiveSum(c->temp.ptr, bytes, in, *prefix, W + 1, s));
  return dctSuccess;
}

// Wire flags hold exactly `count` rows and no bit past R (host check).
dctResult_t checkFlags(CudaContext* c, const RowBlockArgs& a, const uint64_t* prefix, cudaStream_t s) {
  const size_t W = maskWords(a.rowCount);
  CUDACHECK(cudaMemcpyAsync(&c->host->entries, prefix + W, sizeof(uint64_t), cudaMemcpyDeviceToHost, s));
  CUDACHECK(cudaMemcpyAsync(&c->host->packedWords, a.flags + W - 1, sizeof(uint32_t), cudaMemcpyDeviceToHost, s));
  CUDACHECK(cudaStreamSynchronize(s));
  const bool tailClear = a.rowCount % 32 == 0 || (c->host->packedWords >> (a.rowCount % 32)) == 0;
  return tailClear && c->host->entries == a.count ? dctSuccess : dctInternalError;
}

}  // namespace

dctResult_t rowFlags(KernelContext* ctx, RowBlockArgs* args, void* stream) {
  RowBlockArgs& a = *args;
  CudaContext* c = cudaCtx(ctx);
  cudaStream_t s = cudaStreamOf(stream);
  a.count = a.nonFinite = 0;
  if (a.rowCount == 0) return dctSuccess;
  CUDACHECK(cudaMemsetAsync(a.flags, 0, maskWords(a.rowCount) * sizeof(uint32_t), s));
  CUDACHECK(resetCounters(c, s));
  const unsigned grid = static_cast<unsigned>(a.rowCount < kMaxFlagBlocks ? a.rowCount : kMaxFlagBlocks);
  DCTCHECK(dispatchAnyValue(a.dtype, [&]<typename T>() -> dctResult_t {
    flagRows<T><<<grid, kFlagThreads, 0, s>>>(static_cast<const typename BitsOf<T>::U*>(a.rows), a.rowCount,
                                               a.rowLength, a.flags, c->device);
    CUDACHECK_LAUNCH();
    return dctSuccess;
  }));
  CUDACHECK(fetchCounters(c, s));
  a.count = c->host->hits;
  a.nonFinite = c->host->nonFinite;
  return dctSuccess;
}

dctResult_t rowGather(KernelContext* ctx, const RowBlockArgs* args, void* stream) {
  const RowBlockArgs& a = *args;
  CudaContext* c = cudaCtx(ctx);
  cudaStream_t s = cudaStreamOf(stream);
  if (a.rowCount == 0) return dctSuccess;
  uint64_t* prefix = nullptr;
  DCTCHECK(wordPrefix(c, a.flags, a.rowCount, s, &prefix));
  DCTCHECK(dispatchWidth(a.dtype, [&]<typename U>() -> dctResult_t {
    gatherRows<U><<<gridFor(a.rowCount * a.rowLength), kThreads, 0, s>>>(
        static_cast<const U*>(a.rows), a.rowCount, a.rowLength, a.flags, prefix, static_cast<U*>(a.packed));
    CUDACHECK_LAUNCH();
    return dctSuccess;
  }));
  CUDACHECK(cudaStreamSynchronize(s));  // scratch is free again
  return dctSuccess;
}

dctResult_t rowScatter(KernelContext* ctx, const RowBlockArgs* args, void* stream) {
  const RowBlockArgs& a = *args;
  CudaContext* c = cudaCtx(ctx);
  cudaStream_t s = cudaStreamOf(stream);
  if (a.rowCount == 0) return dctSuccess;
  uint64_t* prefix = nullptr;
  if (!a.denseSource) DCTCHECK(wordPrefix(c, a.flags, a.rowCount, s, &prefix));
  DCTCHECK(dispatchWidth(a.dtype, [&]<typename U>() -> dctResult_t {
    scatterRows<U><<<gridFor(a.rowCount * a.rowLength), kThreads, 0, s>>>(
        static_cast<U*>(a.rows), a.rowCount, a.rowLength, a.flags, prefix, static_cast<const U*>(a.packed),
        a.denseSource);
    CUDACHECK_LAUNCH();
    return dctSuccess;
  }));
  CUDACHECK(cudaStreamSynchronize(s));
  return dctSuccess;
}

dctResult_t rowAccumulate(KernelContext* ctx, const RowBlockArgs* args, void* stream) {
  const RowBlockArgs& a = *args;
  CudaContext* c = cudaCtx(ctx);
  cudaStream_t s = cudaStreamOf(stream);
  if (a.accType != accumulationType(a.dtype)) return dctNotSupported;
  if (a.rowCount == 0) return dctSuccess;
  uint64_t* prefix = nullptr;
  DCTCHECK(wordPrefix(c, a.flags, a.rowCount, s, &prefix));
  if (a.flags) DCTCHECK(checkFlags(c, a, prefix, s));
  DCTCHECK(dispatchAnyValue(a.dtype, [&]<typename T>() -> dctResult_t {
    accumulateRows<T><<<gridFor(a.rowCount * a.rowLength), kThreads, 0, s>>>(
        static_cast<AccOf<T>*>(a.rows), a.rowCount, a.rowLength, a.flags, prefix, static_cast<const T*>(a.packed));
    CUDACHECK_LAUNCH();
    return dctSuccess;
  }));
  CUDACHECK(cudaStreamSynchronize(s));
  return dctSuccess;
}

}  // namespace dct::gpu
