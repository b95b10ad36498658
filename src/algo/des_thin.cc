// Thinned DES rows (config->density < 1): the non-zero partial rows bound
// for a peer keep their per-row top-K entries (or those at or above tau),
// selected and laid out by the DCT-MP kernels and wire format
// (sparse_alltoall.cc). The flagged rows are gathered into a dense stage
// first, so the row kernels see contiguous rows, one block per peer; on
// the way in, each block is decoded into the stage and its flagged rows
// added, so the sums keep the exact path's rank order.
#include "algo/des_call.h"
#include "base/debug.h"
#include "kernels/sampling.h"
#include "transport/comm.h"

namespace dct::des {
namespace {

// Top-K rows hold at least K entries each, so K per row on average means
// exactly K in every row and no counts travel; thresholded rows vary.
bool withCounts(const dctDesPlan_t p, uint64_t flagged, uint64_t entries) {
  return p->config.rowSelection == dctRowThreshold || entries != flagged * p->format.k;
}

uint32_t* maskOf(MaskSet& m, const RowSide& side, int q, size_t rowLength) {
  return m.mask.as<uint32_t>() + side.rowStart[q] * maskWords(rowLength);
}
uint64_t* offsetsOf(MaskSet& m, const RowSide& side, int q) { return m.offsets.as<uint64_t>() + side.offsetsAt(q); }

dctResult_t reserveEntries(dctDesPlan_t p, MaskSet& m, size_t rows) {
  m.entries.assign(p->comm->size, 0);
  DCTCHECK(m.offsets.reserve((rows + p->comm->size) * sizeof(uint64_t)));
  return m.mask.reserve(rows * maskWords(p->rowLength) * sizeof(uint32_t));
}

dctResult_t estimateTau(Call& call, size_t rows, ForwardDraft& d) {
  dctDesPlan_t p = call.p;
  d.tau = p->tau;
  const bool due = !p->haveTau || p->stats.forwardSteps - p->lastEstimate >= uint64_t(p->config.thresholdInterval);
  if (p->config.rowSelection != dctRowThreshold || !due || rows == 0) return dctSuccess;
  ThresholdArgs args{p->stage.as(), rows * p->rowLength, p->dtype, p->config.density,
                     static_cast<dctThresholdMethod_t>(p->config.thresholdMethod),
                     stepSeed(p->config.seed, p->stats.forwardSteps)};
  DCTCHECK(p->ops->threshold(p->kernels, &args, &d.tau, call.stream));
  d.estimated = true;
  return dctSuccess;
}

dctResult_t malformed(Call& call, int q, dctResult_t res = dctInternalError) {
  return blockFailed(call.p->comm, res, call.fn, q, call.in.bytes[q]);
}

}  // namespace

size_t thinBlock(const dctDesPlan_t p, size_t rows, uint64_t flagged, uint64_t entries) {
  if (flagged == 0) return 0;
  return flagBytes(rows) + blockLayout(p->format, flagged, entries, withCounts(p, flagged, entries)).bytes;
}

dctResult_t thinReserve(dctDesPlan_t p, DesMasks& m) {
  return reserveEntries(p, m.receivedEntries, size_t(p->comm->size - 1) * p->mine());
}

dctResult_t thinSelect(Call& call, const void* partials, DesMasks& m, ForwardDraft& d) {
  dctDesPlan_t p = call.p;
  const int P = p->comm->size;
  const RowSide& side = m.sentSide;
  const size_t R = side.totalRows();
  DCTCHECK(reserveEntries(p, m.sentEntries, R));
  // The stage also takes what arrives (at most this rank's rows per peer),
  // and the backward's rows, which the committed forward's bounds cover.
  DCTCHECK(p->stage.reserve((R > p->mine() ? R : p->mine()) * rowBytes(p)));
  DCTCHECK(p->counts.reserve(R * sizeof(uint32_t)));
  char* stage = p->stage.as<char>();
  for (int q = 0; q < P; q++) {
    if (side.rows[q] == 0) continue;
    RowBlockArgs a = block(p, blockOf(partials, p, q), p->rows[q], sentFlags(m, p, q),
                           stage + side.rowStart[q] * rowBytes(p));
    DCTCHECK(p->ops->rowGather(p->kernels, &a, call.stream));
  }
  DCTCHECK(estimateTau(call, R, d));
  if (R > 0) {
    const bool topK = p->config.rowSelection == dctRowTopK;
    RowSelectArgs sel{stage, R, p->rowLength, p->dtype, topK ? p->format.k : 0, d.tau,
                      m.sentEntries.mask.as<uint32_t>(), p->counts.as<uint32_t>()};
    DCTCHECK(p->ops->rowSelect(p->kernels, &sel, call.stream));
  }
  for (int q = 0; q < P; q++) {
    RowOffsetsArgs off{p->counts.as<uint32_t>() + side.rowStart[q], 4, p->format.k, side.rows[q],
                       offsetsOf(m.sentEntries, side, q)};
    DCTCHECK(p->ops->rowOffsets(p->kernels, &off, call.stream));
    m.sentEntries.entries[q] = off.total;
    d.keptEntries += off.total;
  }
  return dctSuccess;
}

dctResult_t thinPack(Call& call, DesMasks& m, int q, char* body) {
  dctDesPlan_t p = call.p;
  const RowSide& side = m.sentSide;
  const uint64_t rows = side.rows[q], entries = m.sentEntries.entries[q];
  const bool counted = withCounts(p, rows, entries);
  const BlockLayout b = blockLayout(p->format, rows, entries, counted);
  RowWireArgs a{p->stage.as<char>() + side.rowStart[q] * rowBytes(p), rows, p->rowLength, p->dtype,
                maskOf(m.sentEntries, side, q, p->rowLength), offsetsOf(m.sentEntries, side, q), 0,
                p->format.maskFormat, body + b.maskAt, counted ? body + b.countsAt : nullptr, p->format.countBytes,
                body + b.valuesAt};
  return p->ops->rowPack(p->kernels, &a, call.stream);
}

dctResult_t thinAccumulate(Call& call, DesMasks& m, int q, const char* body, uint64_t entries, void* acc) {
  dctDesPlan_t p = call.p;
  const RowSide& side = m.receivedSide;
  const uint64_t rows = side.rows[q];
  const bool counted = withCounts(p, rows, entries);
  char* in = const_cast<char*>(body);
  RowOffsetsArgs off{counted ? in : nullptr, p->format.countBytes, p->format.k, rows,
                     offsetsOf(m.receivedEntries, side, q)};
  DCTCHECK(p->ops->rowOffsets(p->kernels, &off, call.stream));
  const BlockLayout b = blockLayout(p->format, rows, off.total, counted);
  if (off.total != entries || flagBytes(p->mine()) + b.bytes != call.in.bytes[q]) return malformed(call, q);
  m.receivedEntries.entries[q] = off.total;
  RowWireArgs a{p->stage.as(), rows, p->rowLength, p->dtype, maskOf(m.receivedEntries, side, q, p->rowLength),
                offsetsOf(m.receivedEntries, side, q), 0, p->format.maskFormat, in + b.maskAt, nullptr,
                p->format.countBytes, in + b.valuesAt};
  if (dctResult_t res = p->ops->rowUnpack(p->kernels, &a, call.stream); res != dctSuccess) return malformed(call, q, res);
  RowBlockArgs sum = block(p, acc, p->mine(), receivedFlags(m, p, q), p->stage.as());
  sum.count = rows;
  if (dctResult_t res = p->ops->rowAccumulate(p->kernels, &sum, call.stream); res != dctSuccess)
    return malformed(call, q, res);
  return dctSuccess;
}

dctResult_t thinPackGrad(Call& call, DesMasks& m, int q, const void* gradSummed, char* out) {
  dctDesPlan_t p = call.p;
  const RowSide& side = m.receivedSide;
  if (side.rows[q] == 0) return dctSuccess;
  RowBlockArgs g = block(p, const_cast<void*>(gradSummed), p->mine(), receivedFlags(m, p, q), p->stage.as());
  DCTCHECK(p->ops->rowGather(p->kernels, &g, call.stream));
  RowWireArgs a{p->stage.as(), side.rows[q], p->rowLength, p->dtype, maskOf(m.receivedEntries, side, q, p->rowLength),
                offsetsOf(m.receivedEntries, side, q), 0, -1, nullptr, nullptr, p->format.countBytes, out};
  return p->ops->rowPack(p->kernels, &a, call.stream);
}

dctResult_t thinScatterGrad(Call& call, DesMasks& m, int q, const char* in, void* gradPartials) {
  dctDesPlan_t p = call.p;
  const RowSide& side = m.sentSide;
  if (side.rows[q] > 0) {
    RowWireArgs a{p->stage.as(), side.rows[q], p->rowLength, p->dtype, maskOf(m.sentEntries, side, q, p->rowLength),
                  offsetsOf(m.sentEntries, side, q), 0, -1, nullptr, nullptr, p->format.countBytes,
                  const_cast<char*>(in)};
    DCTCHECK(p->ops->rowUnpack(p->kernels, &a, call.stream));
  }
  RowBlockArgs a = block(p, blockOf(gradPartials, p, q), p->rows[q], sentFlags(m, p, q), p->stage.as());
  return p->ops->rowScatter(p->kernels, &a, call.stream);
}

}  // namespace dct::des
