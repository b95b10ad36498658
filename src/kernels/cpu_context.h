// Workspace of the CPU twin: per-worker compaction buffers and threshold
// scratch, owned by one compressor and reused every step.
#pragma once

#include <type_traits>
#include <unordered_map>
#include <vector>

#include "base/buffer.h"
#include "base/dtype.h"
#include "base/half_types.h"
#include "kernels/kernels.h"
#include "kernels/thread_pool.h"

namespace dct {

// One worker's compacted entries of a select call. It grows to what a call
// needs; after a spike (one step selecting far more than usual) it gives the
// memory back once it holds more than 4x what any of the last kHistory calls
// needed (buffers under kShrinkFloor bytes are kept: not worth the churn).
struct WorkerScratch {
  static constexpr int kHistory = 4;
  static constexpr size_t kShrinkFloor = size_t(1) << 16;
  Buffer indices, values;
  size_t count = 0, nonFinite = 0;
  bool outOfMemory = false;  // the last call could not grow the buffers
  size_t recent[kHistory] = {};  // entries the last calls needed (ring)
  unsigned calls = 0;

  // After a call's entries were emitted: `used` entries (0 for a worker that
  // sat the call out) of indexBytes + valueBytes each.
  void settle(size_t used, size_t indexBytes, size_t valueBytes) {
    recent[calls++ % kHistory] = used;
    size_t most = 0;
    for (size_t r : recent) most = r > most ? r : most;
    shrink(indices, most * indexBytes);
    shrink(values, most * valueBytes);
  }

 private:
  static void shrink(Buffer& b, size_t need) {
    if (b.capacity() <= kShrinkFloor || b.capacity() <= 4 * need) return;
    b = Buffer();
    (void)b.reserve(need);  // empty if that fails: the next call grows it
  }
};

struct CpuContext final : KernelContext {
  ThreadPool& pool = ThreadPool::instance();
  std::vector<WorkerScratch> workers = std::vector<WorkerScratch>(ThreadPool::instance().size());
  Buffer thresholdScratch;
  Buffer cursors;  // the merges' per-worker message cursors (packed_cursor.h)
  std::unordered_map<void*, size_t> mapped;  // allocate()'s huge-page blocks: bytes mapped
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

// Calls fn.template operator()<T>() for any of the four value types.
template <typename Fn>
dctResult_t dispatchAnyValue(dctDataType_t dtype, Fn&& fn) {
  switch (dtype) {
    case dctFloat32: fn.template operator()<float>(); break;
    case dctFloat64: fn.template operator()<double>(); break;
    case dctFloat16: fn.template operator()<Half>(); break;
    case dctBFloat16: fn.template operator()<BFloat16>(); break;
    default: return dctNotSupported;
  }
  return dctSuccess;
}

// Calls fn.template operator()<D, V>() for a wide type D and a value type
// V no wider than it (a scatter's dense buffer and message values, a row
// and its wire values: the CUDA twin's set); wider V: dctNotSupported.
template <typename Fn>
dctResult_t dispatchNarrowing(dctDataType_t wide, dctDataType_t narrow, Fn&& fn) {
  if (dtypeSize(narrow) > dtypeSize(wide)) return dctNotSupported;
  dctResult_t inner = dctSuccess;
  const dctResult_t outer = dispatchAnyValue(wide, [&]<typename D>() {
    inner = dispatchAnyValue(narrow, [&]<typename V>() {
      if constexpr (sizeof(V) <= sizeof(D)) fn.template operator()<D, V>();
    });
  });
  return outer != dctSuccess ? outer : inner;
}

// Calls fn.template operator()<D, V, I>() for a scatter's dense, value and
// index types.
template <typename Fn>
dctResult_t dispatchScatter(const ScatterArgs& a, Fn&& fn) {
  return dispatchNarrowing(a.dtype, a.valueT(), [&]<typename D, typename V>() {
    if (a.indexBytes == 8) fn.template operator()<D, V, uint64_t>();
    else fn.template operator()<D, V, uint32_t>();
  });
}

// dense += value, the sum formed in D's accumulation type, rounded once.
template <typename D, typename V>
inline void addInto(D& dense, V value) {
  using Acc = typename Value<D>::Acc;
  if constexpr (std::is_same_v<D, V> && std::is_same_v<D, Acc>) dense += value;
  else dense = Value<D>::store(Value<D>::load(dense) + static_cast<Acc>(Value<V>::load(value)));
}

inline CpuContext* cpuCtx(KernelContext* ctx) { return static_cast<CpuContext*>(ctx); }

// Bytes the select scratch holds now (tests watch it shrink).
inline size_t selectScratchBytes(KernelContext* ctx) {
  size_t bytes = 0;
  for (const WorkerScratch& w : cpuCtx(ctx)->workers) bytes += w.indices.capacity() + w.values.capacity();
  return bytes;
}

dctResult_t cpuSelectCompact(KernelContext* ctx, SelectArgs* args, void* stream);
dctResult_t cpuSelectDense(KernelContext* ctx, SelectArgs* args, void* stream);
dctResult_t cpuThreshold(KernelContext* ctx, ThresholdArgs* args, double* tau, void* stream);
dctResult_t cpuScatterAdd(KernelContext* ctx, const ScatterArgs* args, void* stream);
dctResult_t cpuPackIndices(KernelContext* ctx, PackArgs* args, void* stream);
dctResult_t cpuLowerBounds(KernelContext* ctx, const BoundsArgs* args, void* stream);
dctResult_t cpuScatterAddPacked(KernelContext* ctx, const ScatterArgs* args, void* stream);
// packing::validGroup over every group of a packed list (in parallel).
bool cpuValidPackedList(KernelContext* ctx, const void* list, size_t packedBytes, size_t nnz, int indexBytes,
                        uint64_t n);
dctResult_t cpuZero(KernelContext* ctx, void* data, size_t bytes, void* stream);
dctResult_t cpuScale(KernelContext* ctx, void* data, size_t n, dctDataType_t dtype, double factor, void* stream);
dctResult_t cpuMergePacked(KernelContext* ctx, MergeArgs* args, void* stream);
dctResult_t cpuMergePackedCoo(KernelContext* ctx, MergeCooArgs* args, void* stream);
dctResult_t cpuDenseCoo(KernelContext* ctx, DenseCooArgs* args, void* stream);
// Before a merge walks P packed messages (packed_cursor.h): each message
// checked unless `checked` (the first malformed one in `malformed`), their
// entries added up, and every worker's cursors reserved, `cursorBytes`
// each, so the walk itself allocates nothing.
dctResult_t cpuPrepareCursors(KernelContext* ctx, const PackedMessage* messages, int count, int indexBytes,
                              uint64_t n, bool checked, size_t cursorBytes, int& malformed, size_t& entries);
dctResult_t cpuRowSelect(KernelContext* ctx, RowSelectArgs* args, void* stream);
dctResult_t cpuRowOffsets(KernelContext* ctx, RowOffsetsArgs* args, void* stream);
dctResult_t cpuRowPack(KernelContext* ctx, const RowWireArgs* args, void* stream);
dctResult_t cpuRowUnpack(KernelContext* ctx, const RowWireArgs* args, void* stream);
// DES row blocks: cpu_des_rows.cc.
dctResult_t cpuRowFlags(KernelContext* ctx, RowBlockArgs* args, void* stream);
dctResult_t cpuRowGather(KernelContext* ctx, const RowBlockArgs* args, void* stream);
dctResult_t cpuRowScatter(KernelContext* ctx, const RowBlockArgs* args, void* stream);
dctResult_t cpuRowAccumulate(KernelContext* ctx, const RowBlockArgs* args, void* stream);
// 1-bit compressed allreduce: cpu_onebit.cc.
dctResult_t cpuOnebitCompress(KernelContext* ctx, OnebitCompressArgs* args, void* stream);
dctResult_t cpuOnebitDecode(KernelContext* ctx, const OnebitDecodeArgs* args, void* stream);
dctResult_t cpuOnebitStepCompress(KernelContext* ctx, const OnebitStepArgs* args, int server, void* stream);
dctResult_t cpuOnebitStepCheck(KernelContext* ctx, const OnebitStepArgs* args, void* stream);
dctResult_t cpuOnebitStepDecode(KernelContext* ctx, const OnebitStepArgs* args, void* stream);
// The fixed-capacity step: cpu_stream_step.cc.
dctResult_t cpuStreamEstimate(KernelContext* ctx, const StreamStepArgs* args, void* stream);
dctResult_t cpuStreamSelect(KernelContext* ctx, const StreamStepArgs* args, void* stream);
dctResult_t cpuStreamMerge(KernelContext* ctx, const StreamStepArgs* args, void* stream);
dctResult_t cpuStreamPost(KernelContext* ctx, const StreamStepArgs* args, int32_t code, void* stream);
dctResult_t cpuStreamCommit(KernelContext* ctx, const StreamStepArgs* args, void* stream);
dctResult_t cpuStreamFinish(KernelContext* ctx, const StreamStepArgs* args, void* stream);

}  // namespace dct
