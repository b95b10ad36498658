#include "core/des_plan.h"

#include "base/debug.h"
#include "base/dtype.h"
#include "core/compressor.h"

namespace dct {

void fillFlaggedSide(const std::vector<uint64_t>& flagged, int me, RowSide& side) {
  const int P = static_cast<int>(flagged.size());
  side.rows.assign(P, 0);
  side.rowStart.assign(P + 1, 0);
  for (int q = 0; q < P; q++) {
    side.rows[q] = q == me ? 0 : flagged[q];
    side.rowStart[q + 1] = side.rowStart[q] + side.rows[q];
  }
}

void reserveSide(RowSide& side, size_t peers) {
  side.rows.reserve(peers);
  side.rowStart.reserve(peers + 1);
}

RowSide flaggedSide(const std::vector<uint64_t>& flagged, int me) {
  RowSide side;
  fillFlaggedSide(flagged, me, side);
  return side;
}

void buildDesPlan(dctDesPlan& p, const PlanPlace& at, const size_t* rowsPerRank, size_t rowLength,
                  dctDataType_t dtype, const dctConfig_t& resolved) {
  const int P = at.ranks;
  p.comm = at.comm;
  p.rank = at.rank;
  p.id = at.id;
  p.rows.assign(rowsPerRank, rowsPerRank + P);
  p.rowStart.assign(P + 1, 0);
  p.sentAt.assign(P + 1, 0);
  for (int q = 0; q < P; q++) {
    p.rowStart[q + 1] = p.rowStart[q] + p.rows[q];
    p.sentAt[q + 1] = p.sentAt[q] + maskWords(p.rows[q]);
  }
  p.rowLength = rowLength;
  p.dtype = dtype;
  p.config = resolved;
  p.format = rowFormat(resolved.density, rowLength, dtype);
  dctAlltoallStats_t& s = p.stats;
  s.maskFormat = p.format.maskFormat;
  const size_t rowBytes = rowLength * dtypeSize(dtype);
  s.denseBytesSent = (p.totalRows() - p.mine()) * rowBytes;
  s.denseBytesReceived = size_t(P - 1) * p.mine() * rowBytes;
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
  if (res != dctSuccess) return fail(p->comm, res, "%s: %s kernel workspace setup failed (%s)", fn, twin.name,
                                          dctGetErrorString(res));
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
