#include "core/alltoall_plan.h"

#include <cmath>

#include "base/debug.h"
#include "base/dtype.h"
#include "core/compressor.h"
#include "kernels/index_packing.h"

namespace dct {
namespace {

int indexWidth(size_t rowLength) { return rowLength <= 256 ? 1 : rowLength <= 65536 ? 2 : 4; }
int countWidth(size_t rowLength) { return rowLength < 256 ? 1 : rowLength < 65536 ? 2 : 4; }

void fillSide(RowSide& side, const size_t* rows, int P) {
  side.rows.assign(rows, rows + P);
  side.rowStart.assign(P + 1, 0);
  for (int q = 0; q < P; q++) side.rowStart[q + 1] = side.rowStart[q] + rows[q];
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
  f.valueType = dtype;
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
  b.bytes = b.valuesAt + pad8(entries * dtypeSize(f.valueType));
  return b;
}

BlockLayout blockLayout(const dctAlltoallPlan& p, size_t rows, uint64_t entries, bool withCounts) {
  RowFormat f;
  f.rowLength = p.rowLength;
  f.dtype = p.dtype;
  f.valueType = p.wireType;
  f.k = p.k;
  f.maskFormat = p.maskFormat;
  f.countBytes = p.countBytes;
  return blockLayout(f, rows, entries, withCounts);
}

void buildAlltoallPlan(dctAlltoallPlan& p, const PlanPlace& at, const size_t* sendRows, const size_t* recvRows,
                       size_t rowLength, dctDataType_t dtype, const dctConfig_t& resolved) {
  p.comm = at.comm;
  p.id = at.id;
  fillSide(p.send, sendRows, at.ranks);
  fillSide(p.recv, recvRows, at.ranks);
  p.rowLength = rowLength;
  p.dtype = dtype;
  p.wireType = wireTypeFor(resolved.wireType, dtype);
  p.config = resolved;
  p.config.wireType = p.wireType;  // resolved: the type in use
  p.k = rowKeep(resolved.density, rowLength);
  p.maskFormat = rowMaskFormat(p.k, rowLength);
  p.countBytes = countWidth(rowLength);
  p.stats.maskFormat = p.maskFormat;
  const size_t es = dtypeSize(dtype);
  p.stats.denseBytesSent = (p.send.totalRows() - p.send.rows[at.rank]) * rowLength * es;
  p.stats.denseBytesReceived = (p.recv.totalRows() - p.recv.rows[at.rank]) * rowLength * es;
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
  if (res != dctSuccess) return fail(p->comm, res, "%s: %s kernel workspace setup failed (%s)", fn, twin.name,
                                          dctGetErrorString(res));
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
