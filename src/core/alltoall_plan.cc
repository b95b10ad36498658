#include "core/alltoall_plan.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <new>

#include "algo/agree.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "core/compressor.h"
#include "kernels/index_packing.h"
#include "transport/comm.h"

namespace dct {
namespace {

int indexWidth(size_t rowLength) { return rowLength <= 256 ? 1 : rowLength <= 65536 ? 2 : 4; }
int countWidth(size_t rowLength) { return rowLength < 256 ? 1 : rowLength < 65536 ? 2 : 4; }

void fillSide(RowSide& side, const size_t* rows, int P) {
  side.rows.assign(rows, rows + P);
  side.rowStart.assign(P + 1, 0);
  for (int q = 0; q < P; q++) side.rowStart[q + 1] = side.rowStart[q] + rows[q];
}

// Every rank's split against every other's: rank p's sendRows[q] must be
// rank q's recvRows[p]. The same verdict on every rank (same data).
dctResult_t checkSplits(dctComm_t comm, const std::vector<uint64_t>& all, const char* fn) {
  const int P = comm->size;
  for (int p = 0; p < P; p++)
    for (int q = 0; q < P; q++) {
      const uint64_t sent = all[size_t(p) * 2 * P + q], expected = all[size_t(q) * 2 * P + P + p];
      if (sent != expected)
        return fail(comm, dctInvalidUsage, "%s: rank %d sends %llu rows to rank %d, which expects %llu", fn, p,
                    (unsigned long long)sent, q, (unsigned long long)expected);
    }
  return dctSuccess;
}

// The settings every rank must share, beyond the header's own checks.
dctResult_t checkSettings(dctComm_t comm, const CallHeader& mine, const std::vector<CallHeader>& all,
                          const char* fn) {
  for (int r = 0; r < comm->size; r++)
    if (all[r].capacity != mine.capacity || all[r].mode != mine.mode)
      return fail(comm, dctInvalidUsage,
                  "%s: ranks disagree on the selection (rank %d keeps %llu per row with rowSelection %d, this rank "
                  "%llu with %d)",
                  fn, r, (unsigned long long)all[r].capacity, all[r].mode, (unsigned long long)mine.capacity,
                  mine.mode);
  return dctSuccess;
}

}  // namespace

size_t rowKeep(double density, size_t rowLength) {
  const double want = std::ceil(density * static_cast<double>(rowLength) - 1e-9);
  const size_t k = want < 1.0 ? 1 : static_cast<size_t>(want);
  return k < rowLength ? k : rowLength;
}

int rowMaskFormat(size_t k, size_t rowLength) {
  if (k >= rowLength) return -1;
  const int width = indexWidth(rowLength);
  return (rowLength + 7) / 8 < k * width ? 0 : width;
}

RowFormat rowFormat(double density, size_t rowLength, dctDataType_t dtype) {
  RowFormat f;
  f.rowLength = rowLength;
  f.dtype = dtype;
  f.k = rowKeep(density, rowLength);
  f.maskFormat = rowMaskFormat(f.k, rowLength);
  f.countBytes = countWidth(rowLength);
  return f;
}

BlockLayout blockLayout(const RowFormat& f, size_t rows, uint64_t entries, bool withCounts) {
  using packing::pad8;
  BlockLayout b;
  b.maskAt = withCounts ? pad8(rows * f.countBytes) : 0;
  const size_t maskBytes = f.maskFormat < 0    ? 0
                           : f.maskFormat == 0 ? pad8(rows * ((f.rowLength + 7) / 8))
                                               : pad8(entries * f.maskFormat);
  b.valuesAt = b.maskAt + maskBytes;
  b.bytes = b.valuesAt + pad8(entries * dtypeSize(f.dtype));
  return b;
}

BlockLayout blockLayout(const dctAlltoallPlan& p, size_t rows, uint64_t entries, bool withCounts) {
  RowFormat f;
  f.rowLength = p.rowLength;
  f.dtype = p.dtype;
  f.k = p.k;
  f.maskFormat = p.maskFormat;
  f.countBytes = p.countBytes;
  return blockLayout(f, rows, entries, withCounts);
}

dctResult_t alltoallPlanCreate(dctComm_t comm, const size_t* sendRows, const size_t* recvRows, size_t rowLength,
                               const dctDataType_t& dtype, const dctConfig_t& resolved, dctResult_t localError,
                               dctAlltoallPlan_t* out) {
  const char* fn = "dctAlltoallPlanCreate";
  const int P = comm->size;
  std::unique_ptr<dctAlltoallPlan> p(new (std::nothrow) dctAlltoallPlan());
  if (localError == dctSuccess && p == nullptr) localError = fail(comm, dctOutOfMemory, "%s: out of memory", fn);
  const uint64_t id = comm->plansCreated++;
  CallHeader mine;
  mine.localError = localError;
  mine.count = rowLength;
  std::memcpy(&mine.datatype, &dtype, sizeof(mine.datatype));
  if (localError == dctSuccess) {
    mine.capacity = rowKeep(resolved.density, rowLength);
    mine.mode = resolved.rowSelection;
  }
  std::vector<CallHeader> all;
  DCTCHECK(agree(comm, mine, all, nullptr, fn));
  DCTCHECK(checkSettings(comm, mine, all, fn));

  std::vector<uint64_t> splits(size_t(2) * P), gathered(size_t(2) * P * P);
  for (int q = 0; q < P; q++) {
    splits[q] = sendRows[q];
    splits[P + q] = recvRows[q];
  }
  dctResult_t res = comm->transport->allgather(comm, splits.data(), gathered.data(), splits.size() * 8, nullptr);
  if (res == dctSuccess) res = checkSplits(comm, gathered, fn);
  DCTCHECK(vote(comm, res, nullptr, fn, "split check"));

  p->comm = comm;
  p->id = id;
  fillSide(p->send, sendRows, P);
  fillSide(p->recv, recvRows, P);
  p->rowLength = rowLength;
  p->dtype = dtype;
  p->config = resolved;
  p->k = mine.capacity;
  p->maskFormat = rowMaskFormat(p->k, rowLength);
  p->countBytes = countWidth(rowLength);
  p->stats.maskFormat = p->maskFormat;
  const size_t es = dtypeSize(dtype);
  p->stats.denseBytesSent = (p->send.totalRows() - p->send.rows[comm->rank]) * rowLength * es;
  p->stats.denseBytesReceived = (p->recv.totalRows() - p->recv.rows[comm->rank]) * rowLength * es;
  *out = p.release();
  return dctSuccess;
}

void alltoallPlanDestroy(dctAlltoallPlan_t p) {
  if (p->ops) {
    for (MaskSet* m : {&p->sent[0], &p->sent[1], &p->received[0], &p->received[1]}) {
      m->mask.reset();
      m->offsets.reset();
    }
    for (TwinBuffer* b : {&p->counts, &p->wireOut, &p->wireIn}) b->reset();
    p->ops->destroyContext(p->kernels);
  }
  p->magic = 0;
  delete p;
}

dctResult_t bindPlanOps(dctAlltoallPlan_t p, const KernelOps& twin, const char* fn) {
  dctResult_t res = twin.createContext(&p->kernels);
  if (res != dctSuccess) return fail(p->comm, res, "%s: %s kernel workspace setup failed", fn, twin.name);
  p->ops = &twin;
  for (MaskSet* m : {&p->sent[0], &p->sent[1], &p->received[0], &p->received[1]}) {
    m->mask.bind(p->ops, p->kernels);
    m->offsets.bind(p->ops, p->kernels);
  }
  for (TwinBuffer* b : {&p->counts, &p->wireOut, &p->wireIn}) b->bind(p->ops, p->kernels);
  return dctSuccess;
}

dctResult_t bindPlanTwin(dctAlltoallPlan_t p, const void* buf, const char* fn) {
  const KernelOps& twin = twinFor(buf);
  if (p->ops == nullptr) return bindPlanOps(p, twin, fn);
  if (p->ops->device == twin.device) return dctSuccess;
  return fail(p->comm, dctInvalidArgument, "%s: buffers are in %s memory but this plan's state is in %s memory", fn,
              twin.device ? "device" : "host", p->ops->device ? "device" : "host");
}

}  // namespace dct
