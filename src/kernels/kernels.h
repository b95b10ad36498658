// The kernels ops table: every compression kernel libdct needs, filled by a
// CPU twin (cpu_ops.cc) and, in CUDA builds, a CUDA twin (cuda/). Callers
// never branch on the twin; they pick an ops table once per compressor.
// The ops' argument structs have headers of their own (*_args.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "dct/dct.h"
#include "dct_config.h"
#include "kernels/message_args.h"
#include "kernels/onebit_kernels.h"
#include "kernels/onebit_step_args.h"
#include "kernels/row_args.h"
#include "kernels/select_args.h"
#include "kernels/stream_args.h"

namespace dct {

// Per-twin workspace (threads' scratch, device temp storage): each twin
// derives its own context type from this one and downcasts what it handed out.
struct KernelContext {
  virtual ~KernelContext() = default;
};

// All pointers handed to one twin live in that twin's memory space (host for
// the CPU twin, device for the CUDA twin); `stream` is a cudaStream_t for the
// CUDA twin and ignored by the CPU twin. Every op is stream-ordered; results
// the host needs (SelectArgs counts, tau) are valid when the op returns.
struct KernelOps {
  const char* name;
  bool device;  // buffers live in device memory
  dctResult_t (*createContext)(KernelContext** ctx);
  void (*destroyContext)(KernelContext* ctx);
  // Memory of this twin's space. copy: non-overlapping, stream-ordered.
  dctResult_t (*allocate)(KernelContext* ctx, void** ptr, size_t bytes);
  void (*release)(KernelContext* ctx, void* ptr);
  dctResult_t (*copy)(KernelContext* ctx, void* dst, const void* src, size_t bytes, void* stream);
  dctResult_t (*synchronize)(KernelContext* ctx, void* stream);
  // Ordering across calls: the context's buffers are reused every call, so
  // a call on `stream` first waits for what the previous call queued on its
  // stream (streamBegin), and marks its own end (streamEnd). The CPU twin
  // runs synchronously: nothing to order.
  dctResult_t (*streamBegin)(KernelContext* ctx, void* stream);
  dctResult_t (*streamEnd)(KernelContext* ctx, void* stream);
  // residual += grad
  dctResult_t (*accumulate)(KernelContext* ctx, void* residual, const void* grad, size_t n,
                            dctDataType_t dtype, void* stream);
  // out = a + b (out may be a): an accumulator built beside the residual
  // it came from. out and a are dtype (fp32/fp64), b is bType (any; a
  // half gradient is widened exactly).
  dctResult_t (*add)(KernelContext* ctx, void* out, const void* a, const void* b, size_t n,
                     dctDataType_t dtype, dctDataType_t bType, void* stream);
  // dst[i] = src[i] * factor, computed in the wider accumulation type and
  // rounded to dstType (IEEE: overflow is Inf; NaN canonical in halves).
  // Any pair of types; dst and src must not overlap unless they are the
  // same pointer with types of equal size.
  dctResult_t (*convert)(KernelContext* ctx, void* dst, dctDataType_t dstType, const void* src,
                         dctDataType_t srcType, size_t n, double factor, void* stream);
  dctResult_t (*selectCompact)(KernelContext* ctx, SelectArgs* args, void* stream);
  // The same selection written densely: outValues[i] = acc_i if selected
  // else 0 (capacity and outIndices unused; nnz = selected). One pass, no
  // compaction: what the dense algorithm sends.
  dctResult_t (*selectDense)(KernelContext* ctx, SelectArgs* args, void* stream);
  // tau such that about density*n entries have |x| >= tau; tau > 0 always
  // (+Inf for n == 0). Both twins return the same tau bit for bit.
  dctResult_t (*threshold)(KernelContext* ctx, ThresholdArgs* args, double* tau, void* stream);
  dctResult_t (*scatterAdd)(KernelContext* ctx, const ScatterArgs* args, void* stream);
  dctResult_t (*packIndices)(KernelContext* ctx, PackArgs* args, void* stream);
  dctResult_t (*lowerBounds)(KernelContext* ctx, const BoundsArgs* args, void* stream);
  // scatterAdd of a message whose `indices` are a packed list of
  // `packedBytes` bytes. Both twins validate the whole list first (sizes,
  // offsets, widths, indices strictly ascending within and across groups and
  // < n: packing::validGroup) and, if anything is malformed, write nothing
  // and return dctInternalError, so every rank and twin fails alike. The CUDA
  // twin reads its count of malformed groups back before scattering (one
  // stream synchronisation per call).
  dctResult_t (*scatterAddPacked)(KernelContext* ctx, const ScatterArgs* args, void* stream);
  // MergeArgs above. A malformed message (the check of scatterAddPacked)
  // returns dctInternalError with args->malformed set; dense is then
  // undefined. The CPU twin checks every message before writing anything;
  // once a check (checkOnly) passed, merging the same messages on the CPU
  // allocates nothing and cannot fail, so it may follow a call's last vote.
  dctResult_t (*mergePacked)(KernelContext* ctx, MergeArgs* args, void* stream);
  // MergeCooArgs: the sum of packed messages as COO (a malformed message:
  // as mergePacked, nothing written). The CPU twin only: NULL in the CUDA
  // table, whose callers build the dense sum and select it instead.
  dctResult_t (*mergePackedCoo)(KernelContext* ctx, MergeCooArgs* args, void* stream);
  // DenseCooArgs: a dense array's nonzeros as COO (dctInvalidArgument past
  // capacity). The CPU twin only, as mergePackedCoo.
  dctResult_t (*denseCoo)(KernelContext* ctx, DenseCooArgs* args, void* stream);
  dctResult_t (*zero)(KernelContext* ctx, void* data, size_t bytes, void* stream);
  dctResult_t (*scale)(KernelContext* ctx, void* data, size_t n, dctDataType_t dtype,
                       double factor, void* stream);
  // *sum = sum of |data[i]| in fp64 (fp32/fp64 data): a statistic, in no
  // fixed order (the twins may differ in the last bits).
  dctResult_t (*absSum)(KernelContext* ctx, const void* data, size_t n, dctDataType_t dtype, double* sum,
                        void* stream);
  // DCT-MP rows (RowSelectArgs ... RowWireArgs above).
  dctResult_t (*rowSelect)(KernelContext* ctx, RowSelectArgs* args, void* stream);
  dctResult_t (*rowOffsets)(KernelContext* ctx, RowOffsetsArgs* args, void* stream);
  // rows + mask -> values (+ wireMask, wireCounts): the kept entries in
  // ascending column order per row.
  dctResult_t (*rowPack)(KernelContext* ctx, const RowWireArgs* args, void* stream);
  // values (+ wireMask decoded into mask) -> dense rows, zeros elsewhere.
  // A wire mask is validated first (index lists strictly ascending and < D,
  // bitmaps with popcount = the row's count and no bit >= D): if any row is
  // malformed nothing is written and the op returns dctInternalError.
  dctResult_t (*rowUnpack)(KernelContext* ctx, const RowWireArgs* args, void* stream);
  // DES rows (RowBlockArgs above).
  dctResult_t (*rowFlags)(KernelContext* ctx, RowBlockArgs* args, void* stream);
  dctResult_t (*rowGather)(KernelContext* ctx, const RowBlockArgs* args, void* stream);
  dctResult_t (*rowScatter)(KernelContext* ctx, const RowBlockArgs* args, void* stream);
  dctResult_t (*rowAccumulate)(KernelContext* ctx, const RowBlockArgs* args, void* stream);
  // --- 1-bit compressed allreduce (onebit_kernels.h: bit layout, the fixed
  // sum-of-squares order, the NaN rule) ---
  dctResult_t (*onebitCompress)(KernelContext* ctx, OnebitCompressArgs* args, void* stream);
  dctResult_t (*onebitDecode)(KernelContext* ctx, const OnebitDecodeArgs* args, void* stream);
  // The queued step's ops (onebit_step_args.h); server: the server's
  // compression, else the worker's.
  dctResult_t (*onebitStepCompress)(KernelContext* ctx, const OnebitStepArgs* args, int server, void* stream);
  dctResult_t (*onebitStepCheck)(KernelContext* ctx, const OnebitStepArgs* args, void* stream);
  dctResult_t (*onebitStepDecode)(KernelContext* ctx, const OnebitStepArgs* args, void* stream);
  // --- end 1-bit ---
  // --- the fixed-capacity step (stream_args.h), each op a no-op while
  // *args->failed is set (but merge then votes it, post still raises the
  // vote, and commit follows the vote alone);
  // nothing is read back to the host ---
  dctResult_t (*streamEstimate)(KernelContext* ctx, const StreamStepArgs* args, void* stream);
  dctResult_t (*streamSelect)(KernelContext* ctx, const StreamStepArgs* args, void* stream);
  dctResult_t (*streamMerge)(KernelContext* ctx, const StreamStepArgs* args, void* stream);
  // state->vote = max(state->vote, code): a failure the host saw (a launch,
  // a transport call) joins the step's verdict before the vote.
  dctResult_t (*streamPost)(KernelContext* ctx, const StreamStepArgs* args, int32_t code, void* stream);
  dctResult_t (*streamCommit)(KernelContext* ctx, const StreamStepArgs* args, void* stream);
  dctResult_t (*streamFinish)(KernelContext* ctx, const StreamStepArgs* args, void* stream);
};

const KernelOps& cpuKernelOps();
#if DCT_HAVE_CUDA
const KernelOps& cudaKernelOps();  // cuda/: the CUDA twin (in libdct_cuda.so)
#endif
// Device buffers without the CUDA component: every context fails, saying why.
const KernelOps& missingDeviceOps();

}  // namespace dct
