// Workspace of the CUDA twin and the helpers every cuda/ file shares: grown
// device scratch, the counters that carry results back to the host, launch
// sizing and the dtype/index dispatch. Errors go through base/cuda_check.h.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "base/cuda_check.h"
#include "base/half_types.h"
#include "kernels/kernels.h"

// After a <<<>>> launch: configuration errors are reported here, faults in
// the kernel by the next synchronizing call.
#define CUDACHECK_LAUNCH() CUDACHECK(cudaGetLastError())

namespace dct::gpu {

// Results read back by the host, one pinned copy per context.
struct Counters {
  int64_t selected;             // select: entries taken (the last tile's inclusive prefix)
  unsigned long long nonFinite; // atomics
  unsigned long long hits;      // atomics (dense select)
  unsigned long long malformed; // atomics: malformed groups of a packed list
  uint64_t kth;                 // threshold: bits of the k-th largest magnitude
  uint32_t packedWords;         // packIndices: data words of the packed list
  uint64_t entries;             // rowOffsets: offsets[rowCount]
  double sum;                   // absSum
};

// A device allocation that only grows (geometrically); reused every step.
struct DeviceScratch {
  void* ptr = nullptr;
  size_t bytes = 0;
  // Every op that uses scratch synchronizes its stream before returning, so
  // nothing is in flight on the old block when it is freed here.
  dctResult_t reserve(size_t want);
  void release();
  template <typename T>
  T* as(size_t byteOffset = 0) const {
    return reinterpret_cast<T*>(static_cast<char*>(ptr) + byteOffset);
  }
};

struct CudaContext final : KernelContext {
  DeviceScratch temp;     // CUB temp storage
  DeviceScratch scratch;  // threshold magnitudes (two buffers)
  // The fixed-capacity step's words and region (cuda_stream.cuh): reserved
  // by its first step, never moved after (a captured graph holds its
  // pointers), and only ever used in stream order.
  DeviceScratch stream;
  Counters* device = nullptr;
  Counters* host = nullptr;  // pinned
  cudaEvent_t lastCall = nullptr;  // end of the previous call's work (streamEnd)
  bool callPending = false;
};

inline CudaContext* cudaCtx(KernelContext* ctx) { return static_cast<CudaContext*>(ctx); }
inline cudaStream_t cudaStreamOf(void* stream) { return static_cast<cudaStream_t>(stream); }

// Clears the device counters, on the stream.
inline cudaError_t resetCounters(CudaContext* c, cudaStream_t s) {
  return cudaMemsetAsync(c->device, 0, sizeof(Counters), s);
}
// Copies the device counters to the pinned host copy and waits for them.
inline cudaError_t fetchCounters(CudaContext* c, cudaStream_t s) {
  cudaError_t err = cudaMemcpyAsync(c->host, c->device, sizeof(Counters), cudaMemcpyDeviceToHost, s);
  return err == cudaSuccess ? cudaStreamSynchronize(s) : err;
}

// Grid-stride launches: enough blocks to fill any current GPU, never more
// than needed for n. Kernels loop with 64-bit indices.
constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 4096;
inline unsigned gridFor(size_t n) {
  size_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// fn.template operator()<T>() for float / double.
template <typename Fn>
dctResult_t dispatchValue(dctDataType_t dtype, Fn&& fn) {
  if (dtype == dctFloat32) return fn.template operator()<float>();
  if (dtype == dctFloat64) return fn.template operator()<double>();
  return dctNotSupported;
}

// fn.template operator()<T, I>() for float / double x uint32 / uint64.
template <typename Fn>
dctResult_t dispatchTypes(dctDataType_t dtype, int indexBytes, Fn&& fn) {
  return dispatchValue(dtype, [&]<typename T>() {
    return indexBytes == 8 ? fn.template operator()<T, uint64_t>()
                           : fn.template operator()<T, uint32_t>();
  });
}

// fn.template operator()<T>() for any of the four value types.
template <typename Fn>
dctResult_t dispatchAnyValue(dctDataType_t dtype, Fn&& fn) {
  switch (dtype) {
    case dctFloat32: return fn.template operator()<float>();
    case dctFloat64: return fn.template operator()<double>();
    case dctFloat16: return fn.template operator()<Half>();
    case dctBFloat16: return fn.template operator()<BFloat16>();
    default: return dctNotSupported;
  }
}

// fn.template operator()<D, V>() for a wide type D and a value type V no
// wider than it (11 of the 16 type pairs: what libdct sends, a wire type at
// most as wide as the tensor's); the rest are dctNotSupported, which keeps
// the build small.
template <typename Fn>
dctResult_t dispatchNarrowing(dctDataType_t wide, dctDataType_t narrow, Fn&& fn) {
  return dispatchAnyValue(wide, [&]<typename D>() {
    return dispatchAnyValue(narrow, [&]<typename V>() -> dctResult_t {
      if constexpr (sizeof(V) > sizeof(D)) return dctNotSupported;
      else return fn.template operator()<D, V>();
    });
  });
}

// fn.template operator()<D, V, I>() for a scatter's dense, value and index
// types (22 instantiations per kernel).
template <typename Fn>
dctResult_t dispatchScatter(const ScatterArgs& a, Fn&& fn) {
  return dispatchNarrowing(a.dtype, a.valueT(), [&]<typename D, typename V>() {
    return a.indexBytes == 8 ? fn.template operator()<D, V, uint64_t>() : fn.template operator()<D, V, uint32_t>();
  });
}

// Entry points of the table, one file each.
dctResult_t selectCompact(KernelContext* ctx, SelectArgs* args, void* stream);
dctResult_t selectDense(KernelContext* ctx, SelectArgs* args, void* stream);
dctResult_t threshold(KernelContext* ctx, ThresholdArgs* args, double* tau, void* stream);
dctResult_t scatterAdd(KernelContext* ctx, const ScatterArgs* args, void* stream);
dctResult_t packIndices(KernelContext* ctx, PackArgs* args, void* stream);
dctResult_t lowerBounds(KernelContext* ctx, const BoundsArgs* args, void* stream);
dctResult_t scatterAddPacked(KernelContext* ctx, const ScatterArgs* args, void* stream);
dctResult_t mergePacked(KernelContext* ctx, MergeArgs* args, void* stream);
dctResult_t add(KernelContext* ctx, void* out, const void* a, const void* b, size_t n, dctDataType_t dtype,
                dctDataType_t bType, void* stream);
dctResult_t convert(KernelContext* ctx, void* dst, dctDataType_t dstType, const void* src,
                    dctDataType_t srcType, size_t n, double factor, void* stream);
dctResult_t accumulate(KernelContext* ctx, void* residual, const void* grad, size_t n,
                       dctDataType_t dtype, void* stream);
dctResult_t scale(KernelContext* ctx, void* data, size_t n, dctDataType_t dtype, double factor,
                  void* stream);
dctResult_t absSum(KernelContext* ctx, const void* data, size_t n, dctDataType_t dtype, double* sum, void* stream);
// DCT-MP rows: cuda_rows_select.cu (rowSelect), cuda_rows.cu (the rest).
dctResult_t rowSelect(KernelContext* ctx, RowSelectArgs* args, void* stream);
dctResult_t rowOffsets(KernelContext* ctx, RowOffsetsArgs* args, void* stream);
dctResult_t rowPack(KernelContext* ctx, const RowWireArgs* args, void* stream);
dctResult_t rowUnpack(KernelContext* ctx, const RowWireArgs* args, void* stream);
// DES row blocks: cuda_des_rows.cu.
dctResult_t rowFlags(KernelContext* ctx, RowBlockArgs* args, void* stream);
dctResult_t rowGather(KernelContext* ctx, const RowBlockArgs* args, void* stream);
dctResult_t rowScatter(KernelContext* ctx, const RowBlockArgs* args, void* stream);
dctResult_t rowAccumulate(KernelContext* ctx, const RowBlockArgs* args, void* stream);
// 1-bit compressed allreduce: cuda_onebit.cu.
dctResult_t onebitCompress(KernelContext* ctx, OnebitCompressArgs* args, void* stream);
dctResult_t onebitDecode(KernelContext* ctx, const OnebitDecodeArgs* args, void* stream);
dctResult_t onebitStepCompress(KernelContext* ctx, const OnebitStepArgs* args, int server, void* stream);
dctResult_t onebitStepCheck(KernelContext* ctx, const OnebitStepArgs* args, void* stream);
dctResult_t onebitStepDecode(KernelContext* ctx, const OnebitStepArgs* args, void* stream);
// The fixed-capacity step: cuda_stream_step.cu, cuda_stream_merge.cu (merge).
dctResult_t streamEstimate(KernelContext* ctx, const StreamStepArgs* args, void* stream);
dctResult_t streamSelect(KernelContext* ctx, const StreamStepArgs* args, void* stream);
dctResult_t streamMerge(KernelContext* ctx, const StreamStepArgs* args, void* stream);
dctResult_t streamPost(KernelContext* ctx, const StreamStepArgs* args, int32_t code, void* stream);
dctResult_t streamCommit(KernelContext* ctx, const StreamStepArgs* args, void* stream);
dctResult_t streamFinish(KernelContext* ctx, const StreamStepArgs* args, void* stream);

}  // namespace dct::gpu
