// Collective entry points: local checks, then agreement across ranks, then
// the algorithm. A rank with a bad argument still takes part in the
// agreement so that no other rank is left waiting.
#include "algo/agree.h"
#include "algo/algorithms.h"
#include "algo/stream_step.h"
#include "api/checks.h"
#include "api/guard.h"
#include "base/checked_size.h"
#include "base/dtype.h"
#include "transport/comm.h"
#include "core/compressor.h"

using namespace dct;

namespace {

dctResult_t checkAllreduce(const void* sendbuf, void* recvbuf, size_t count, const dctDataType_t& dtype,
                           const dctRedOp_t& op, dctCompressor_t c, dctComm_t comm, const char* fn) {
  DCTCHECK(checkDatatype(comm, dtype, fn));
  DCTCHECK(checkOp(comm, op, fn));
  if (count == 0) return dctSuccess;
  if (!validCompressor(c)) return fail(comm, dctInvalidArgument, "%s: invalid compressor", fn);
  if (c->comm != comm) return fail(comm, dctInvalidArgument, "%s: compressor belongs to another comm", fn);
  if (c->count != count || c->dtype != dtype)
    return fail(comm, dctInvalidArgument,
                "%s: count %zu / datatype %d differ from the compressor's (%zu / %d)", fn, count,
                static_cast<int>(dtype), c->count, static_cast<int>(c->dtype));
  const size_t es = dtypeSize(dtype);
  DCTCHECK(checkBuffer(comm, sendbuf, count, es, "sendbuf", fn));
  DCTCHECK(checkBuffer(comm, recvbuf, count, es, "recvbuf", fn));
  if (&twinFor(sendbuf) != &twinFor(recvbuf))
    return fail(comm, dctInvalidArgument, "%s: sendbuf and recvbuf are in different memory spaces", fn);
  DCTCHECK(checkTransportSpace(comm, sendbuf, fn));
  return bindTwin(c, sendbuf, fn);
}

// The entries every rank announced, summed without wrapping.
dctResult_t announcedTotal(dctComm_t comm, const std::vector<CallHeader>& all, size_t& sum, const char* fn) {
  sum = 0;
  for (int r = 0; r < comm->size; r++)
    if (!checkedAdd(sum, all[r].nnz, sum))
      return fail(comm, dctInternalError, "%s: rank %d announced %llu entries: too many in all", fn, r,
                  static_cast<unsigned long long>(all[r].nnz));
  return dctSuccess;
}

}  // namespace

extern "C" dctResult_t dctSparseAllreduce(const void* sendbuf, void* recvbuf, size_t count,
                                          dctDataType_t datatype, dctRedOp_t op,
                                          dctCompressor_t compressor, dctComm_t comm,
                                          void* stream) {
  const char* fn = "dctSparseAllreduce";
  if (!validComm(comm)) return fail(nullptr, dctInvalidArgument, "%s: invalid comm", fn);
  return guarded(comm, fn, [&] {
    // An exception in the checks still goes on to the agreement. The path
    // may follow this rank's own compressor: every path's first collective
    // is the same header allgather over the whole comm, and the header
    // names the path, so ranks that differ fail there together. (On a
    // device, a fixed-capacity step past its first opens with its slots:
    // stream_step.cc.)
    const dctResult_t local =
        caught(comm, fn, [&] { return checkAllreduce(sendbuf, recvbuf, count, datatype, op, compressor, comm, fn); });
    if (validCompressor(compressor) && compressor->config.compressor == dctCompressorOnebit)
      return onebitAllreduce(sendbuf, recvbuf, count, datatype, op, compressor, comm, stream, local, fn);
    if (validCompressor(compressor) && fixedCapacity(compressor) && !inWarmup(compressor))
      return streamStep(sendbuf, recvbuf, count, op, compressor, comm, stream, local, fn);
    if (comm->node) return hierarchicalAllreduce(sendbuf, recvbuf, count, datatype, op, compressor, comm, stream, local, fn);
    return sparseAllreduce(sendbuf, recvbuf, count, datatype, op, compressor, comm, stream, local, fn);
  });
}

extern "C" dctResult_t dctSparseAllgather(const void* values, const uint32_t* indices, size_t nnz,
                                          size_t count, void* recvValues, uint32_t* recvIndices,
                                          size_t recvCapacity, size_t* recvCounts, size_t* total,
                                          dctDataType_t datatype, dctComm_t comm, void* stream) {
  const char* fn = "dctSparseAllgather";
  if (!validComm(comm)) return fail(nullptr, dctInvalidArgument, "%s: invalid comm", fn);
  return guarded(comm, fn, [&]() -> dctResult_t {
    const bool query = recvValues == nullptr && recvIndices == nullptr;
    auto local = [&]() -> dctResult_t {
      DCTCHECK(checkDatatype(comm, datatype, fn));
      const size_t es = dtypeSize(datatype);
      DCTCHECK(checkBuffer(comm, values, nnz, es, "values", fn));
      DCTCHECK(checkBuffer(comm, indices, nnz, sizeof(uint32_t), "indices", fn));
      if (recvCounts == nullptr || total == nullptr)
        return fail(comm, dctInvalidArgument, "%s: recvCounts and total must not be NULL", fn);
      if (!query) {
        DCTCHECK(checkBuffer(comm, recvValues, recvCapacity, es, "recvValues", fn));
        DCTCHECK(checkBuffer(comm, recvIndices, recvCapacity, sizeof(uint32_t), "recvIndices", fn));
        if ((recvValues == nullptr) != (recvIndices == nullptr))
          return fail(comm, dctInvalidArgument, "%s: give both receive buffers or neither", fn);
      }
      DCTCHECK(checkTransportSpace(comm, query ? values : recvValues, fn));
      return checkIndices(comm, indices, nnz, count, fn, stream);
    };
    CallHeader mine;
    mine.localError = caught(comm, fn, local);  // an exception still goes on to the agreement
    mine.count = count;
    mine.datatype = rawEnum(datatype);
    mine.nnz = nnz;
    mine.capacity = recvCapacity;
    mine.mode = query ? 1 : 0;
    std::vector<CallHeader> all;
    std::vector<uint64_t> counts;
    std::vector<size_t> table;
    // The transport's room for the exchange (and NCCL's device check)
    // before the vote, sized by the agreed total: prepared, the data ops
    // allocate nothing; the counts and the exchange's table neither.
    auto prepare = [&]() -> dctResult_t {
      // The exchange sends as many entries as this rank's header announced:
      // a header altered on the way (its own copy too) must not size a read
      // past the caller's buffers.
      if (all[comm->rank].nnz != nnz)
        return fail(comm, dctInternalError, "%s: this rank's header arrived altered (nnz %llu, not %zu)", fn,
                    static_cast<unsigned long long>(all[comm->rank].nnz), nnz);
      counts.assign(comm->size, 0);
      table.reserve(4 * size_t(comm->size));
      if (query) return comm->transport->prepare(comm, values, 0, stream);
      size_t sum = 0, bytes = 0;
      const size_t widest = dtypeSize(datatype) > sizeof(uint32_t) ? dtypeSize(datatype) : sizeof(uint32_t);
      DCTCHECK(announcedTotal(comm, all, sum, fn));
      if (!checkedMul(sum, widest, bytes))
        return fail(comm, dctInternalError, "%s: %zu entries in all are too many to receive", fn, sum);
      return comm->transport->prepare(comm, recvValues, bytes, stream);
    };
    DCTCHECK(agree(comm, mine, all, stream, fn, prepare));
    size_t sum = 0;
    DCTCHECK(announcedTotal(comm, all, sum, fn));  // the query's (fetches checked it before the vote)
    for (int r = 0; r < comm->size; r++) counts[r] = all[r].nnz;
    if (query) {
      for (int r = 0; r < comm->size; r++) recvCounts[r] = counts[r];
      *total = sum;
      return dctSuccess;
    }
    for (int r = 0; r < comm->size; r++)
      if (all[r].capacity < sum)
        return fail(comm, r == comm->rank ? dctInvalidArgument : dctInvalidUsage,
                    "%s: rank %d's recvCapacity %llu < total %zu", fn, r,
                    (unsigned long long)all[r].capacity, sum);
    dctResult_t res = sparseAllgather(comm, values, indices, dtypeSize(datatype), counts, recvValues, recvIndices,
                                      table, stream);
    // The peers' indices reach the caller: out of range is a corrupt message.
    if (res == dctSuccess && checkIndices(comm, recvIndices, sum, count, fn, stream) != dctSuccess)
      res = fail(comm, dctInternalError, "%s: a peer sent an index out of range (count %zu)", fn, count);
    DCTCHECK(vote(comm, res, stream, fn, "exchange"));
    for (int r = 0; r < comm->size; r++) recvCounts[r] = counts[r];
    *total = sum;
    return dctSuccess;
  });
}
