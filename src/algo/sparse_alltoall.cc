// DCT-MP sparse all-to-all, forward and backward, each one transaction like
// the DP allreduce (sparse_allreduce.cc):
//
//   forward   select rows (bitmaps + counts), pack each peer's block
//             [counts][mask][values]; header allgather + vote (+ an allgather
//             of per-peer entry counts when some rank's rows vary in size);
//             alltoallv; decode and validate each block into dense rows and
//             the spare masks; vote; commit (masks swap in, backward due)
//   backward  values only at the committed masks, reverse route, same steps
//
// Values travel in the plan's wireType (config.wireType): rounded by the
// pack, widened by the unpack; the masks are chosen on the rows as given.
//
// Fixed-size rows (top-K without non-finite overflow) need no counts at
// all: the split and K fix every block's size.
#include <cstring>

#include "algo/agree.h"
#include "algo/algorithms.h"
#include "algo/alltoall_call.h"
#include "base/checked_size.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "core/alltoall_plan.h"
#include "kernels/index_packing.h"
#include "kernels/sampling.h"
#include "transport/comm.h"

namespace dct {
namespace {

using Call = AlltoallCall;

// Room for what arrives, and the transport's staging for both buffers.
dctResult_t reserveWire(Call& call) { return reserveBlocks(call.p, call.out, call.in, call.stream); }

dctResult_t exchange(Call& call) { return exchangeBlocks(call.p, call.out, call.in, call.allBytes, call.stream); }

dctResult_t malformed(Call& call, int q, dctResult_t res = dctInternalError) {
  return blockFailed(call.p->comm, res, call.fn, q, call.in.bytes[q]);
}

// --- forward -------------------------------------------------------------

dctResult_t estimateTau(Call& call, const void* send, ForwardDraft& d) {
  dctAlltoallPlan_t p = call.p;
  d.tau = p->tau;
  const bool due = !p->haveTau || p->stats.forwardSteps - p->lastEstimate >= uint64_t(p->config.thresholdInterval);
  if (p->config.rowSelection != dctRowThreshold || !due || p->send.totalRows() == 0) return dctSuccess;
  ThresholdArgs args{send, p->send.totalRows() * p->rowLength, p->dtype, p->config.density,
                     static_cast<dctThresholdMethod_t>(p->config.thresholdMethod),
                     stepSeed(p->config.seed, p->stats.forwardSteps)};
  DCTCHECK(p->ops->threshold(p->kernels, &args, &d.tau, call.stream));
  d.estimated = true;
  return dctSuccess;
}

// Selection of every send row into the spare masks; entry counts per peer.
dctResult_t selectRows(Call& call, const void* send, MaskSet& m, ForwardDraft& d) {
  dctAlltoallPlan_t p = call.p;
  const RowSide& side = p->send;
  const size_t R = side.totalRows();
  DCTCHECK(reserveMasks(p, m, side));
  if (p->maskFormat >= 0) {
    DCTCHECK(p->counts.reserve(R * sizeof(uint32_t)));
    DCTCHECK(estimateTau(call, send, d));
    const bool topK = p->config.rowSelection == dctRowTopK;
    RowSelectArgs sel{send, R, p->rowLength, p->dtype, topK ? p->k : 0, d.tau, m.mask.as<uint32_t>(),
                      p->counts.as<uint32_t>()};
    DCTCHECK(p->ops->rowSelect(p->kernels, &sel, call.stream));
    d.nonFinite = sel.nonFinite;
  }
  for (int q = 0; q < p->comm->size; q++) {
    const void* counts = p->maskFormat >= 0 ? p->counts.as<uint32_t>() + side.rowStart[q] : nullptr;
    RowOffsetsArgs off{counts, 4, keepPerRow(p), side.rows[q], offsetsOf(m, side, q)};
    DCTCHECK(p->ops->rowOffsets(p->kernels, &off, call.stream));
    m.entries[q] = off.total;
    d.kept += off.total;
  }
  // Top-K rows hold at least K each, so K per row on average means exactly
  // K in every row; thresholded rows vary whatever the total.
  const bool thresholded = p->maskFormat >= 0 && p->config.rowSelection == dctRowThreshold;
  d.variable = thresholded || d.kept != R * keepPerRow(p);
  return dctSuccess;
}

dctResult_t packForward(Call& call, const void* send, MaskSet& m, const ForwardDraft& d) {
  dctAlltoallPlan_t p = call.p;
  const int P = p->comm->size;
  std::vector<BlockLayout> layout(P);
  call.out.bytes.resize(P);
  for (int q = 0; q < P; q++)
    call.out.bytes[q] = (layout[q] = blockLayout(*p, p->send.rows[q], m.entries[q], d.variable)).bytes;
  call.out.place();
  DCTCHECK(p->wireOut.reserve(call.out.total));
  DCTCHECK(p->ops->zero(p->kernels, p->wireOut.as(), call.out.total, call.stream));  // padding included
  for (int q = 0; q < P; q++) {
    if (p->send.rows[q] == 0) continue;
    char* block = p->wireOut.as<char>() + call.out.offsets[q];
    const BlockLayout& b = layout[q];
    RowWireArgs a{const_cast<char*>(static_cast<const char*>(send)) + p->send.rowStart[q] * rowBytes(p),
                  p->send.rows[q], p->rowLength, p->dtype,
                  p->maskFormat >= 0 ? maskOf(m, p->send, q, p->rowLength) : nullptr, offsetsOf(m, p->send, q), 0,
                  p->maskFormat, p->maskFormat >= 0 ? block + b.maskAt : nullptr,
                  d.variable ? block + b.countsAt : nullptr, p->countBytes, block + b.valuesAt, p->wireType};
    DCTCHECK(p->ops->rowPack(p->kernels, &a, call.stream));
  }
  return dctSuccess;
}

// What arrives from each peer: fixed blocks from the split and K, or the
// entry counts every rank published (a peer's count sizes a buffer: at most
// the entries of its rows).
dctResult_t layoutIncoming(Call& call, const std::vector<PlanCallHeader>& all, const std::vector<uint64_t>* entries) {
  dctAlltoallPlan_t p = call.p;
  const int P = p->comm->size, me = p->comm->rank;
  call.in.bytes.resize(P);
  call.inLayout.resize(P);
  call.inCounts.assign(P, false);
  size_t total = 0;
  for (int q = 0; q < P; q++) {
    call.inCounts[q] = all[q].variableRows != 0;
    const uint64_t e = entries ? (*entries)[size_t(q) * P + me] : p->recv.rows[q] * keepPerRow(p);
    size_t most = 0;
    if (!checkedMul(p->recv.rows[q], p->rowLength, most) || e > most)
      return fail(p->comm, dctInternalError, "%s: rank %d announced %llu entries for %zu rows of %zu", call.fn, q,
                  static_cast<unsigned long long>(e), p->recv.rows[q], p->rowLength);
    call.inLayout[q] = blockLayout(*p, p->recv.rows[q], e, call.inCounts[q]);
    call.in.bytes[q] = call.inLayout[q].bytes;
    if (!checkedAdd(total, call.in.bytes[q], total))
      return fail(p->comm, dctInternalError, "%s: the blocks to receive are too large", call.fn);
  }
  call.in.place();
  return dctSuccess;
}

dctResult_t unpackForward(Call& call, void* recv, MaskSet& m) {
  dctAlltoallPlan_t p = call.p;
  for (int q = 0; q < p->comm->size; q++) {
    const size_t rows = p->recv.rows[q];
    if (rows == 0) continue;
    char* block = p->wireIn.as<char>() + call.in.offsets[q];
    const BlockLayout& b = call.inLayout[q];
    RowOffsetsArgs off{call.inCounts[q] ? block : nullptr, p->countBytes, keepPerRow(p), rows,
                       offsetsOf(m, p->recv, q)};
    DCTCHECK(p->ops->rowOffsets(p->kernels, &off, call.stream));
    if (blockLayout(*p, rows, off.total, call.inCounts[q]).bytes != call.in.bytes[q]) return malformed(call, q);
    m.entries[q] = off.total;
    RowWireArgs a{static_cast<char*>(recv) + p->recv.rowStart[q] * rowBytes(p), rows, p->rowLength, p->dtype,
                  p->maskFormat >= 0 ? maskOf(m, p->recv, q, p->rowLength) : nullptr, offsetsOf(m, p->recv, q), 0,
                  p->maskFormat, p->maskFormat >= 0 ? block + b.maskAt : nullptr, nullptr, p->countBytes,
                  block + b.valuesAt, p->wireType};
    if (dctResult_t res = p->ops->rowUnpack(p->kernels, &a, call.stream); res != dctSuccess) return malformed(call, q, res);
  }
  return dctSuccess;
}

// Entry counts of every rank's blocks, when some rank's rows vary in size.
dctResult_t shareEntries(Call& call, const MaskSet& sent, std::vector<uint64_t>& entries) {
  dctComm_t comm = call.p->comm;
  entries.assign(size_t(comm->size) * comm->size, 0);
  return comm->transport->allgather(comm, sent.entries.data(), entries.data(), comm->size * sizeof(uint64_t),
                                    call.stream);
}

}  // namespace

dctResult_t reserveMasks(dctAlltoallPlan_t p, MaskSet& m, const RowSide& side) {
  const int P = p->comm->size;
  m.entries.assign(P, 0);
  DCTCHECK(m.offsets.reserve((side.totalRows() + P) * sizeof(uint64_t)));
  if (p->maskFormat >= 0) DCTCHECK(m.mask.reserve(side.totalRows() * maskWords(p->rowLength) * 4));
  return dctSuccess;
}

void commitForward(Call& call, const ForwardDraft& d) {
  dctAlltoallPlan_t p = call.p;
  const int me = p->comm->rank;
  dctAlltoallStats_t& s = p->stats;
  p->committed = 1 - p->committed;
  p->backwardDue = true;
  if (d.estimated) {
    p->tau = d.tau;
    p->haveTau = true;
    p->lastEstimate = s.forwardSteps;
  }
  s.forwardSteps++;
  s.forwardBytesSent = call.out.total - call.out.bytes[me];
  s.forwardBytesReceived = call.in.total - call.in.bytes[me];
  s.keptEntries = d.kept;
  s.nonFinite = d.nonFinite;
  const double cells = static_cast<double>(p->send.totalRows() * p->rowLength);
  s.density = cells > 0 ? static_cast<double>(d.kept) / cells : 0;
  s.threshold = p->config.rowSelection == dctRowThreshold && p->maskFormat >= 0 ? p->tau : 0;
  s.totalBytesSent += s.forwardBytesSent;
  s.totalBytesReceived += s.forwardBytesReceived;
  s.totalDenseBytes += s.denseBytesSent;
}

dctResult_t sparseAlltoallForward(dctAlltoallPlan_t p, const void* send, void* recv, void* stream,
                                  dctResult_t localError, const char* fn) {
  if (p->chunks > 1 && localError == dctSuccess) {
    bool fallback = false;
    DCTCHECK(pipelinedForward(p, send, recv, stream, fn, fallback));
    if (!fallback) return dctSuccess;
  }
  Call call{p, stream, fn};
  const int spare = 1 - p->committed;
  MaskSet &sent = p->sent[spare], &received = p->received[spare];
  ForwardDraft d;
  PlanCallHeader mine = planCallHeader(p, kForward, localError);
  if (mine.localError == dctSuccess) {
    mine.localError = caught(p->comm, fn, [&]() -> dctResult_t {
      DCTCHECK(p->ops->streamBegin(p->kernels, stream));
      DCTCHECK(selectRows(call, send, sent, d));
      DCTCHECK(packForward(call, send, sent, d));
      return reserveMasks(p, received, p->recv);
    });
  }
  mine.bytes = call.out.total;
  mine.variableRows = d.variable;
  std::vector<PlanCallHeader> all;
  std::vector<uint64_t> entries;
  bool variable = false;
  DCTCHECK(agree(p->comm, mine, all, stream, fn, [&] {
    call.allBytes = sentTogether(all);
    for (const PlanCallHeader& h : all) variable = variable || h.variableRows != 0;
    // Room for the incoming layout (and the entry counts): nothing allocates after the agreement.
    const size_t P = p->comm->size;
    call.in.reserve(P);
    call.inLayout.reserve(P);
    call.inCounts.reserve(P);
    if (variable) {
      entries.reserve(P * P);
      return dctSuccess;  // sizes come with the entry counts
    }
    DCTCHECK(layoutIncoming(call, all, nullptr));
    return reserveWire(call);
  }));
  if (variable) {
    dctResult_t res = shareEntries(call, sent, entries);
    if (res == dctSuccess) res = layoutIncoming(call, all, &entries);
    if (res == dctSuccess) res = reserveWire(call);
    DCTCHECK(vote(p->comm, res, stream, fn, "size exchange"));
  }
  dctResult_t res = exchange(call);
  if (res == dctSuccess) res = unpackForward(call, recv, received);
  // The stream's end joins the vote: a device twin's can fail on one rank,
  // and every rank must then fail before anything commits.
  if (res == dctSuccess) res = p->ops->streamEnd(p->kernels, stream);
  DCTCHECK(vote(p->comm, res, stream, fn, "exchange"));
  commitForward(call, d);
  return dctSuccess;
}

dctResult_t sparseAlltoallBackward(dctAlltoallPlan_t p, const void* gradSend, void* gradRecv, void* stream,
                                   dctResult_t localError, const char* fn) {
  Call call{p, stream, fn};
  const int P = p->comm->size, me = p->comm->rank;
  if (localError == dctSuccess && !p->backwardDue)
    localError = fail(p->comm, dctInvalidUsage, "%s: no forward to go back through (backward runs once per forward)", fn);
  PlanCallHeader mine = planCallHeader(p, kBackward, localError);
  MaskSet &sent = p->sent[p->committed], &received = p->received[p->committed];
  const size_t ws = dtypeSize(p->wireType);
  auto maskOrNull = [&](MaskSet& m, const RowSide& side, int q) {
    return p->maskFormat >= 0 ? maskOf(m, side, q, p->rowLength) : nullptr;
  };
  if (mine.localError == dctSuccess) {
    mine.localError = caught(p->comm, fn, [&]() -> dctResult_t {
      call.out.bytes.resize(P);
      call.in.bytes.resize(P);
      for (int q = 0; q < P; q++) {
        call.out.bytes[q] = packing::pad8(received.entries[q] * ws);
        call.in.bytes[q] = packing::pad8(sent.entries[q] * ws);
      }
      call.out.place();
      call.in.place();
      DCTCHECK(p->ops->streamBegin(p->kernels, stream));
      DCTCHECK(reserveWire(call));
      for (int q = 0; q < P; q++) {
        if (p->recv.rows[q] == 0) continue;
        RowWireArgs a{const_cast<char*>(static_cast<const char*>(gradSend)) + p->recv.rowStart[q] * rowBytes(p),
                      p->recv.rows[q], p->rowLength, p->dtype, maskOrNull(received, p->recv, q),
                      offsetsOf(received, p->recv, q), 0, -1, nullptr, nullptr, p->countBytes,
                      p->wireOut.as<char>() + call.out.offsets[q], p->wireType};
        DCTCHECK(p->ops->rowPack(p->kernels, &a, stream));
      }
      return dctSuccess;
    });
  }
  mine.bytes = call.out.total;
  std::vector<PlanCallHeader> all;
  DCTCHECK(agree(p->comm, mine, all, stream, fn));
  call.allBytes = sentTogether(all);
  dctResult_t res = exchange(call);
  for (int q = 0; q < P && res == dctSuccess; q++) {
    if (p->send.rows[q] == 0) continue;
    RowWireArgs a{static_cast<char*>(gradRecv) + p->send.rowStart[q] * rowBytes(p), p->send.rows[q], p->rowLength,
                  p->dtype, maskOrNull(sent, p->send, q), offsetsOf(sent, p->send, q), 0, -1, nullptr, nullptr,
                  p->countBytes, p->wireIn.as<char>() + call.in.offsets[q], p->wireType};
    res = p->ops->rowUnpack(p->kernels, &a, stream);
  }
  // The stream's end joins the vote: a device twin's can fail on one rank,
  // and every rank must then fail before anything commits.
  if (res == dctSuccess) res = p->ops->streamEnd(p->kernels, stream);
  DCTCHECK(vote(p->comm, res, stream, fn, "exchange"));
  dctAlltoallStats_t& s = p->stats;
  p->backwardDue = false;
  s.backwardSteps++;
  s.backwardBytesSent = call.out.total - call.out.bytes[me];
  s.backwardBytesReceived = call.in.total - call.in.bytes[me];
  s.totalBytesSent += s.backwardBytesSent;
  s.totalBytesReceived += s.backwardBytesReceived;
  s.totalDenseBytes += s.denseBytesReceived;  // backward's dense rows go the reverse way
  return dctSuccess;
}

}  // namespace dct
