// Workspace of the CPU twin: per-worker compaction buffers and threshold
// scratch, owned by one compressor and reused every step.
#pragma once

#include <vector>

#include "base/buffer.h"
#include "kernels/kernels.h"
#include "kernels/thread_pool.h"

namespace dct {

struct WorkerScratch {
  Buffer indices, values;
  size_t count = 0, nonFinite = 0;
};

struct CpuContext final : KernelContext {
  ThreadPool& pool = ThreadPool::instance();
  std::vector<WorkerScratch> workers = std::vector<WorkerScratch>(ThreadPool::instance().size());
  Buffer thresholdScratch;
};

// Below this many elements per worker, threading costs more than it saves.
constexpr size_t kMinPerWorker = 1 << 16;

// Calls fn.template operator()<T, I>() for the runtime dtype / index width.
template <typename Fn>
dctResult_t dispatchTypes(dctDataType_t dtype, int indexBytes, Fn&& fn) {
  if (dtype == dctFloat32) {
    if (indexBytes == 8) fn.template operator()<float, uint64_t>();
    else fn.template operator()<float, uint32_t>();
  } else if (dtype == dctFloat64) {
    if (indexBytes == 8) fn.template operator()<double, uint64_t>();
    else fn.template operator()<double, uint32_t>();
  } else {
    return dctNotSupported;
  }
  return dctSuccess;
}

inline CpuContext* cpuCtx(KernelContext* ctx) { return static_cast<CpuContext*>(ctx); }

dctResult_t cpuSelectCompact(KernelContext* ctx, SelectArgs* args, void* stream);
dctResult_t cpuSelectDense(KernelContext* ctx, SelectArgs* args, void* stream);
dctResult_t cpuThreshold(KernelContext* ctx, const ThresholdArgs* args, double* tau, void* stream);
dctResult_t cpuScatterAdd(KernelContext* ctx, const ScatterArgs* args, void* stream);
dctResult_t cpuPackIndices(KernelContext* ctx, PackArgs* args, void* stream);
dctResult_t cpuScatterAddPacked(KernelContext* ctx, const ScatterArgs* args, void* stream);

}  // namespace dct
