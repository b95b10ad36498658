#include "core/des_plan.h"

#include <cstring>
#include <memory>
#include <new>

#include "algo/agree.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "core/compressor.h"
#include "transport/comm.h"

size_t dctDesPlan::mine() const { return rows[comm->rank]; }

namespace dct {
namespace {

// Every rank's split against this rank's; the same verdict everywhere.
dctResult_t checkSplits(dctComm_t comm, const std::vector<uint64_t>& mine, const std::vector<uint64_t>& all,
                        const char* fn) {
  const int P = comm->size;
  for (int r = 0; r < P; r++)
    for (int q = 0; q < P; q++)
      if (all[size_t(r) * P + q] != mine[q])
        return fail(comm, dctInvalidUsage, "%s: ranks disagree on rowsPerRank[%d] (rank %d: %llu, this rank %d: %llu)",
                    fn, q, r, (unsigned long long)all[size_t(r) * P + q], comm->rank, (unsigned long long)mine[q]);
  return dctSuccess;
}

// The selection a thinned plan's ranks must share (density and K are
// checked with the header).
dctResult_t checkSelection(dctComm_t comm, const CallHeader& mine, const std::vector<CallHeader>& all,
                           const char* fn) {
  for (int r = 0; r < comm->size; r++)
    if (all[r].flags != mine.flags)
      return fail(comm, dctInvalidUsage, "%s: ranks disagree on config.rowSelection (rank %d: %d, this rank %d: %d)",
                  fn, r, all[r].flags, comm->rank, mine.flags);
  return dctSuccess;
}

}  // namespace

RowSide flaggedSide(const std::vector<uint64_t>& flagged, int me) {
  const int P = static_cast<int>(flagged.size());
  RowSide side;
  side.rows.assign(P, 0);
  side.rowStart.assign(P + 1, 0);
  for (int q = 0; q < P; q++) {
    side.rows[q] = q == me ? 0 : flagged[q];
    side.rowStart[q + 1] = side.rowStart[q] + side.rows[q];
  }
  return side;
}

dctResult_t desPlanCreate(dctComm_t comm, const size_t* rowsPerRank, size_t rowLength, const dctDataType_t& dtype,
                          const dctConfig_t& resolved, dctResult_t localError, dctDesPlan_t* out) {
  const char* fn = "dctDesPlanCreate";
  const int P = comm->size;
  std::unique_ptr<dctDesPlan> p(new (std::nothrow) dctDesPlan());
  if (localError == dctSuccess && p == nullptr) localError = fail(comm, dctOutOfMemory, "%s: out of memory", fn);
  const uint64_t id = comm->plansCreated++;
  CallHeader mine;
  mine.localError = localError;
  mine.count = rowLength;
  std::memcpy(&mine.datatype, &dtype, sizeof(mine.datatype));
  RowFormat format{};
  if (localError == dctSuccess) {  // dtype is a valid enum only then
    format = rowFormat(resolved.density, rowLength, dtype);
    mine.density = resolved.density;
    mine.flags = format.maskFormat >= 0 ? resolved.rowSelection : -1;
  }
  std::vector<CallHeader> all;
  DCTCHECK(agree(comm, mine, all, nullptr, fn));
  DCTCHECK(checkSelection(comm, mine, all, fn));

  std::vector<uint64_t> split(rowsPerRank, rowsPerRank + P), gathered(size_t(P) * P);
  dctResult_t res = comm->transport->allgather(comm, split.data(), gathered.data(), split.size() * 8, nullptr);
  if (res == dctSuccess) res = checkSplits(comm, split, gathered, fn);
  DCTCHECK(vote(comm, res, nullptr, fn, "split check"));

  p->comm = comm;
  p->id = id;
  p->rows.assign(rowsPerRank, rowsPerRank + P);
  p->rowStart.assign(P + 1, 0);
  p->sentAt.assign(P + 1, 0);
  for (int q = 0; q < P; q++) {
    p->rowStart[q + 1] = p->rowStart[q] + p->rows[q];
    p->sentAt[q + 1] = p->sentAt[q] + maskWords(p->rows[q]);
  }
  p->rowLength = rowLength;
  p->dtype = dtype;
  p->config = resolved;
  p->format = format;
  dctAlltoallStats_t& s = p->stats;
  s.maskFormat = format.maskFormat;
  const size_t rowBytes = rowLength * dtypeSize(dtype);
  s.denseBytesSent = (p->totalRows() - p->mine()) * rowBytes;
  s.denseBytesReceived = size_t(P - 1) * p->mine() * rowBytes;
  *out = p.release();
  return dctSuccess;
}

void desPlanDestroy(dctDesPlan_t p) {
  if (p->ops) {
    for (DesMasks& m : p->masks) {
      for (TwinBuffer* b : {&m.sent, &m.received, &m.sentEntries.mask, &m.sentEntries.offsets,
                            &m.receivedEntries.mask, &m.receivedEntries.offsets})
        b->reset();
    }
    for (TwinBuffer* b : {&p->wireOut, &p->wireIn, &p->acc, &p->stage, &p->counts}) b->reset();
    p->ops->destroyContext(p->kernels);
  }
  p->magic = 0;
  delete p;
}

dctResult_t bindDesOps(dctDesPlan_t p, const KernelOps& twin, const char* fn) {
  dctResult_t res = twin.createContext(&p->kernels);
  if (res != dctSuccess) return fail(p->comm, res, "%s: %s kernel workspace setup failed", fn, twin.name);
  p->ops = &twin;
  for (DesMasks& m : p->masks) {
    for (TwinBuffer* b : {&m.sent, &m.received, &m.sentEntries.mask, &m.sentEntries.offsets,
                          &m.receivedEntries.mask, &m.receivedEntries.offsets})
      b->bind(p->ops, p->kernels);
  }
  for (TwinBuffer* b : {&p->wireOut, &p->wireIn, &p->acc, &p->stage, &p->counts}) b->bind(p->ops, p->kernels);
  return dctSuccess;
}

dctResult_t bindDesTwin(dctDesPlan_t p, const void* buf, const char* fn) {
  const KernelOps& twin = twinFor(buf);
  if (p->ops == nullptr) return bindDesOps(p, twin, fn);
  if (p->ops->device == twin.device) return dctSuccess;
  return fail(p->comm, dctInvalidArgument, "%s: buffers are in %s memory but this plan's state is in %s memory", fn,
              twin.device ? "device" : "host", p->ops->device ? "device" : "host");
}

}  // namespace dct
