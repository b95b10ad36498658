// Compressor entry points and the local (non-collective) kernels API.
#include <cmath>
#include <cstring>
#include <memory>

#include "algo/algorithms.h"
#include "api/config.h"
#include "api/checks.h"
#include "api/guard.h"
#include "api/local_context.h"
#include "base/dtype.h"
#include "kernels/onebit_kernels.h"
#include "kernels/onebit_math.h"
#include "transport/comm.h"
#include "core/compressor.h"

using namespace dct;

extern "C" dctResult_t dctCompressorCreate(dctComm_t comm, size_t count, dctDataType_t datatype,
                                           const dctConfig_t* config, dctCompressor_t* compressor) {
  const char* fn = "dctCompressorCreate";
  if (!validComm(comm)) return fail(nullptr, dctInvalidArgument, "%s: invalid comm", fn);
  return guarded(comm, fn, [&] {
    if (compressor == nullptr) return fail(comm, dctInvalidArgument, "%s: compressor is NULL", fn);
    *compressor = nullptr;
    DCTCHECK(checkDatatype(comm, datatype, fn));
    // Its residual and scratch hold count values of up to 8 bytes.
    if (count > SIZE_MAX / 8)
      return fail(comm, dctInvalidArgument, "%s: count %zu exceeds the address space in 8-byte values", fn, count);
    dctConfig_t resolved;
    DCTCHECK(resolveConfig(comm, comm->settings.config, config, &resolved));
    DCTCHECK(checkFixedCapacity(comm, resolved));
    return compressorCreate(comm, comm->size, count, datatype, resolved, compressor, comm->rank);
  });
}

extern "C" dctResult_t dctCompressorDestroy(dctCompressor_t compressor) {
  if (compressor == nullptr) return dctSuccess;
  if (!validCompressor(compressor))
    return fail(nullptr, dctInvalidArgument, "dctCompressorDestroy: not a dctCompressor_t");
  compressorDestroy(compressor);
  return dctSuccess;
}

extern "C" dctResult_t dctCompressorGetStats(dctCompressor_t compressor, dctStats_t* stats) {
  if (!validCompressor(compressor))
    return fail(nullptr, dctInvalidArgument, "dctCompressorGetStats: invalid compressor");
  if (stats == nullptr) return fail(compressor->comm, dctInvalidArgument, "dctCompressorGetStats: stats is NULL");
  const dctResult_t settled = settleStream(compressor);  // waits for a queued fixed-capacity step
  if (settled != dctSuccess)
    return fail(compressor->comm, settled, "dctCompressorGetStats: reading the fixed-capacity state failed (%s)",
                dctGetErrorString(settled));
  *stats = compressor->stats;
  return dctSuccess;
}

extern "C" dctResult_t dctCompressorGetConfig(dctCompressor_t compressor, dctConfig_t* config) {
  if (!validCompressor(compressor))
    return fail(nullptr, dctInvalidArgument, "dctCompressorGetConfig: invalid compressor");
  if (config == nullptr) return fail(compressor->comm, dctInvalidArgument, "dctCompressorGetConfig: config is NULL");
  *config = compressor->config;
  return dctSuccess;
}

namespace {
// Binds c to buffer's memory space when it has not run yet, then copies the
// committed residual into buffer, or (restore) buffer into the residual.
// Global top-k's owner residual is part of what this rank holds back: read
// added in at its range, and cleared by a restore (the buffer replaces both).
dctResult_t copyResidual(dctCompressor_t c, const void* buffer, bool restore, void* stream, const char* fn) {
  dctComm_t comm = c->comm;
  DCTCHECK(checkBuffer(comm, buffer, c->count, dtypeSize(c->accType), "residual", fn));
  if (c->count == 0) return dctSuccess;
  DCTCHECK(bindTwin(c, buffer, fn));
  DCTCHECK(settleStream(c));
  void* mine = c->residual();
  const size_t bytes = c->count * dtypeSize(c->accType);
  dctResult_t res = restore ? c->ops->copy(c->kernels, mine, buffer, bytes, stream)
                    : c->onebit.pending ? onebitResidual(c, const_cast<void*>(buffer), stream)
                                        : c->ops->copy(c->kernels, const_cast<void*>(buffer), mine, bytes, stream);
  if (res == dctSuccess && restore) {
    c->stream.live = false;  // the next queued step publishes the restored state
    c->onebit.pending = false;
    c->owner.zero = true;
    c->owner.length = 0;
  }
  const OwnerState& o = c->owner;
  if (res == dctSuccess && !restore && !o.zero) {
    void* at = static_cast<char*>(const_cast<void*>(buffer)) + o.begin * dtypeSize(c->accType);
    res = c->ops->add(c->kernels, at, at, o.residual(), o.length, c->accType, c->accType, stream);
  }
  if (res == dctSuccess) res = c->ops->synchronize(c->kernels, stream);
  return res == dctSuccess ? res : fail(comm, res, "%s: copying the residual failed", fn);
}

bool allFinite(const void* p, size_t n, dctDataType_t type) {
  for (size_t i = 0; i < n; i++) {
    const double v = type == dctFloat64 ? static_cast<const double*>(p)[i] : static_cast<const float*>(p)[i];
    if (!std::isfinite(v)) return false;
  }
  return true;
}
}  // namespace

extern "C" dctResult_t dctCompressorGetResidual(dctCompressor_t c, void* residual, void* stream) {
  const char* fn = "dctCompressorGetResidual";
  if (!validCompressor(c)) return fail(nullptr, dctInvalidArgument, "%s: invalid compressor", fn);
  return guarded(c->comm, fn, [&] { return copyResidual(c, residual, false, stream, fn); });
}

extern "C" dctResult_t dctCompressorSetResidual(dctCompressor_t c, const void* residual, void* stream) {
  const char* fn = "dctCompressorSetResidual";
  if (!validCompressor(c)) return fail(nullptr, dctInvalidArgument, "%s: invalid compressor", fn);
  return guarded(c->comm, fn, [&] {
    DCTCHECK(checkBuffer(c->comm, residual, c->count, dtypeSize(c->accType), "residual", fn));
    if (c->count > 0 && !twinFor(residual).device && !allFinite(residual, c->count, c->accType))
      return fail(c->comm, dctInvalidArgument, "%s: the residual holds NaN or Inf", fn);
    DCTCHECK(copyResidual(c, residual, true, stream, fn));
    c->residualZero = c->count == 0;
    return dctSuccess;
  });
}

extern "C" dctResult_t dctCompressorGetOwnerResidual(dctCompressor_t c, void* residual, size_t* begin,
                                                     size_t* length, void* stream) {
  const char* fn = "dctCompressorGetOwnerResidual";
  if (!validCompressor(c)) return fail(nullptr, dctInvalidArgument, "%s: invalid compressor", fn);
  if (begin == nullptr || length == nullptr) return fail(c->comm, dctInvalidArgument, "%s: begin or length is NULL", fn);
  return guarded(c->comm, fn, [&] {
    const OwnerState& o = c->owner;
    *begin = o.zero ? 0 : o.begin;
    *length = o.zero ? 0 : o.length;
    if (residual == nullptr || *length == 0) return dctSuccess;
    const size_t bytes = *length * dtypeSize(c->accType);
    DCTCHECK(checkBuffer(c->comm, residual, *length, dtypeSize(c->accType), "residual", fn));
    if (twinFor(residual).device != c->ops->device)
      return fail(c->comm, dctInvalidArgument, "%s: residual is not in the compressor's memory space", fn);
    dctResult_t res = c->ops->copy(c->kernels, residual, o.residual(), bytes, stream);
    if (res == dctSuccess) res = c->ops->synchronize(c->kernels, stream);
    return res == dctSuccess ? res : fail(c->comm, res, "%s: copying the owner residual failed", fn);
  });
}

namespace {
// The server error as the kernels keep it (possibly the x that formed it,
// with its scale) into host memory, as the error itself.
template <typename A>
dctResult_t copyServerError(dctCompressor_t c, A* out, size_t length, void* stream) {
  const OnebitState& ob = c->onebit;
  DCTCHECK(c->ops->copy(c->kernels, out, ob.serverErrors[ob.serverCommitted].as(), length * sizeof(A), stream));
  DCTCHECK(c->ops->synchronize(c->kernels, stream));
  if (!ob.serverPending) return dctSuccess;
  const bool pieces = ob.seg.many() && length > 0;  // each piece's own scale
  const int count = pieces ? ob.seg.serverCount() : 1;
  for (int k = 0; k < count; k++) {
    const A p = static_cast<A>(pieces ? ob.serverPendingScales[k] : ob.serverPendingScale);
    const size_t lo = pieces ? ob.seg.serverOffsets[k] : 0, hi = pieces ? ob.seg.serverOffsets[k + 1] : length;
    for (size_t i = lo; i < hi; i++) out[i] = onebitError(out[i], p);
  }
  return dctSuccess;
}
}  // namespace

extern "C" dctResult_t dctCompressorGetServerError(dctCompressor_t c, void* error, size_t* begin, size_t* length,
                                                   void* stream) {
  const char* fn = "dctCompressorGetServerError";
  if (!validCompressor(c)) return fail(nullptr, dctInvalidArgument, "%s: invalid compressor", fn);
  if (begin == nullptr || length == nullptr) return fail(c->comm, dctInvalidArgument, "%s: begin or length is NULL", fn);
  if (c->config.compressor != dctCompressorOnebit)
    return fail(c->comm, dctInvalidUsage, "%s: not a 1-bit compressor (dctCompressorOnebit)", fn);
  return guarded(c->comm, fn, [&] {
    const OnebitChunks chunks(c->count, c->ranks);
    *begin = chunks.begin(c->rank);
    *length = chunks.length(c->rank);
    if (error == nullptr || *length == 0) return dctSuccess;
    const size_t es = dtypeSize(c->accType);
    DCTCHECK(checkBuffer(c->comm, error, *length, es, "error", fn));
    if (twinFor(error).device) return fail(c->comm, dctInvalidArgument, "%s: error must be host memory", fn);
    DCTCHECK(settleStream(c));  // a queued 1-bit step: which error is committed, and its pending scale
    const bool present = c->ops != nullptr && c->onebit.readyFor(c->ops, c->kernels);
    if (!present) {
      std::memset(error, 0, *length * es);
      return dctSuccess;
    }
    dctResult_t res = c->accType == dctFloat64 ? copyServerError(c, static_cast<double*>(error), *length, stream)
                                               : copyServerError(c, static_cast<float*>(error), *length, stream);
    return res == dctSuccess ? res : fail(c->comm, res, "%s: copying the server error failed", fn);
  });
}

extern "C" dctResult_t dctCompress(dctCompressor_t c, const void* sendbuf, void* indices,
                                   void* values, size_t capacity, size_t* nnz, void* stream) {
  const char* fn = "dctCompress";
  if (!validCompressor(c)) return fail(nullptr, dctInvalidArgument, "%s: invalid compressor", fn);
  dctComm_t comm = c->comm;
  if (c->config.compressor == dctCompressorOnebit)  // no COO form: its step is the collective itself
    return fail(comm, dctInvalidUsage, "%s: a 1-bit compressor (dctCompressorOnebit) has no local step; use dctSparseAllreduce", fn);
  return guarded(comm, fn, [&] {
    if (nnz == nullptr) return fail(comm, dctInvalidArgument, "%s: nnz is NULL", fn);
    const size_t es = dtypeSize(c->dtype), vs = dtypeSize(c->wireType);
    DCTCHECK(checkBuffer(comm, sendbuf, c->count, es, "sendbuf", fn));
    DCTCHECK(checkBuffer(comm, indices, capacity, c->indexBytes, "indices", fn));
    DCTCHECK(checkBuffer(comm, values, capacity, vs, "values", fn));
    *nnz = 0;
    if (c->count == 0) return dctSuccess;
    if (capacity > 0 && (&twinFor(indices) != &twinFor(sendbuf) || &twinFor(values) != &twinFor(sendbuf)))
      return fail(comm, dctInvalidArgument, "%s: sendbuf, indices and values are in different memory spaces", fn);
    DCTCHECK(bindTwin(c, sendbuf, fn));
    DCTCHECK(settleStream(c));
    c->stream.live = false;  // the host state moves on: the next fixed-capacity step publishes it
    Message msg{indices, values, capacity, 0, nullptr};
    StepDraft draft;
    DCTCHECK(compressStep(c, sendbuf, msg, draft, stream));
    *nnz = msg.nnz;
    commitStep(c, draft, msg.nnz * (c->indexBytes + vs), 0, static_cast<dctAlgorithm_t>(c->config.algorithm));
    return dctSuccess;
  });
}

extern "C" dctResult_t dctScatterAdd(void* dense, size_t count, const uint32_t* indices,
                                     const void* values, size_t nnz, dctDataType_t datatype,
                                     void* stream) {
  const char* fn = "dctScatterAdd";
  return guarded(nullptr, fn, [&] {
    DCTCHECK(checkDatatype(nullptr, datatype, fn));
    const size_t es = dtypeSize(datatype);
    DCTCHECK(checkBuffer(nullptr, dense, count, es, "dense", fn));
    DCTCHECK(checkBuffer(nullptr, indices, nnz, sizeof(uint32_t), "indices", fn));
    DCTCHECK(checkBuffer(nullptr, values, nnz, es, "values", fn));
    const KernelOps& ops = twinFor(dense);
    if (nnz > 0 && (twinFor(indices).device != ops.device || twinFor(values).device != ops.device))
      return fail(nullptr, dctInvalidArgument, "%s: dense, indices and values must all be host or all device memory", fn);
    // Strictly ascending indices (seen by the check) take both twins'
    // parallel path; others keep j order for repeated indices.
    bool ascending = false;
    DCTCHECK(checkIndices(nullptr, indices, nnz, count, fn, stream, &ascending));
    if (nnz == 0) return dctSuccess;
    ScatterArgs args{dense, count, datatype, 4, indices, values, nnz, ascending};
    return withLocalContext(ops, [&](KernelContext* ctx) { return ops.scatterAdd(ctx, &args, stream); });
  });
}
