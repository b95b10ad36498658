// DES sparse reduce-scatter, forward and backward, each one transaction
// like the DCT-MP all-to-all (sparse_alltoall.cc):
//
//   forward   flag the non-zero partial rows of every owner's block; pack
//             each peer's block [row flags][flagged rows]; header agreement;
//             allgather of the flagged-row counts (sizes every block) +
//             vote; alltoallv; the owner adds its own rows and each peer's
//             in rank order from +0 in the accumulation type, rounds once;
//             vote; commit (flags swap in, backward due)
//   backward  the owner gathers the gradient rows each peer flagged, the
//             reverse alltoallv, each rank scatters them where its partial
//             rows were flagged, zeros elsewhere; vote; commit
//
// A block with no flagged row is empty (the counts say so), and a rank's
// own rows never go on the wire. A thinned plan (des_thin.cc) sends each
// flagged row's kept entries instead of the whole row, publishes entry
// counts beside the row counts, and returns gradient values only there.
#include "algo/agree.h"
#include "algo/algorithms.h"
#include "algo/des_call.h"
#include "base/checked_size.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "transport/comm.h"

namespace dct {
using namespace des;
namespace {

// A forward block: the flags of the owner's rows, then the flagged rows
// (thinned: their kept entries).
size_t forwardBlock(const dctDesPlan_t p, size_t rows, uint64_t flagged, uint64_t entries) {
  if (p->thinned()) return thinBlock(p, rows, flagged, entries);
  return flagged == 0 ? 0 : flagBytes(rows) + packing::pad8(flagged * rowBytes(p));
}

dctResult_t reserveWire(Call& call) { return reserveBlocks(call.p, call.out, call.in, call.stream); }

dctResult_t exchange(Call& call) { return exchangeBlocks(call.p, call.out, call.in, call.allBytes, call.stream); }


// A backward block: the gradient values of the flagged rows (thinned: at
// the kept entries only).
size_t backwardBlock(const dctDesPlan_t p, uint64_t flagged, const MaskSet& entries, int q) {
  const uint64_t values = p->thinned() ? entries.entries[q] : flagged * p->rowLength;
  return packing::pad8(values * dtypeSize(p->dtype));
}

// --- forward -------------------------------------------------------------

// Flags of every owner's block of partials into the spare masks, and each
// peer's packed block.
dctResult_t packForward(Call& call, const void* partials, DesMasks& m, ForwardDraft& d) {
  dctDesPlan_t p = call.p;
  const int P = p->comm->size, me = p->comm->rank;
  m.sentRows.assign(P, 0);
  DCTCHECK(m.sent.reserve(p->sentAt[P] * sizeof(uint32_t)));
  for (int q = 0; q < P; q++) {
    if (p->rows[q] == 0) continue;
    RowBlockArgs a = block(p, blockOf(partials, p, q), p->rows[q], sentFlags(m, p, q), nullptr);
    DCTCHECK(p->ops->rowFlags(p->kernels, &a, call.stream));
    m.sentRows[q] = a.count;
    if (q != me) d.keptRows += a.count, d.nonFinite += a.nonFinite;
  }
  fillFlaggedSide(m.sentRows, me, m.sentSide);
  if (p->thinned()) DCTCHECK(thinSelect(call, partials, m, d));
  call.out.bytes.assign(P, 0);
  for (int q = 0; q < P; q++)
    if (q != me)
      call.out.bytes[q] = forwardBlock(p, p->rows[q], m.sentRows[q], p->thinned() ? m.sentEntries.entries[q] : 0);
  call.out.place();
  DCTCHECK(p->wireOut.reserve(call.out.total));
  DCTCHECK(p->ops->zero(p->kernels, p->wireOut.as(), call.out.total, call.stream));  // padding included
  for (int q = 0; q < P; q++) {
    char* out = blockAt(p->wireOut, call.out, q);
    if (out == nullptr) continue;
    DCTCHECK(p->ops->copy(p->kernels, out, sentFlags(m, p, q), maskWords(p->rows[q]) * sizeof(uint32_t), call.stream));
    if (p->thinned()) {
      DCTCHECK(thinPack(call, m, q, out + flagBytes(p->rows[q])));
      continue;
    }
    RowBlockArgs a = block(p, blockOf(partials, p, q), p->rows[q], sentFlags(m, p, q),
                           out + flagBytes(p->rows[q]));
    DCTCHECK(p->ops->rowGather(p->kernels, &a, call.stream));
  }
  return dctSuccess;
}

// Room for the size exchange (the agreement's reservation step): this
// rank's counts to publish, every rank's, and the incoming layout.
void reserveLayout(Call& call, DesMasks& m, std::vector<uint64_t>& published, std::vector<uint64_t>& counts) {
  dctDesPlan_t p = call.p;
  const size_t P = p->comm->size;
  published = m.sentRows;
  if (p->thinned()) published.insert(published.end(), m.sentEntries.entries.begin(), m.sentEntries.entries.end());
  counts.assign(published.size() * P, 0);
  m.receivedRows.reserve(P);
  reserveSide(m.receivedSide, P);
  call.in.reserve(P);
}

// Every rank's flagged-row counts per owner (thinned: then its kept-entry
// counts); sizes what arrives here. Allocates nothing (reserveLayout).
dctResult_t layoutIncoming(Call& call, DesMasks& m, const std::vector<uint64_t>& published,
                           std::vector<uint64_t>& counts) {
  dctDesPlan_t p = call.p;
  dctComm_t comm = p->comm;
  const int P = comm->size, me = comm->rank;
  const size_t stride = published.size();
  DCTCHECK(comm->transport->allgather(comm, published.data(), counts.data(), stride * sizeof(uint64_t), call.stream));
  m.receivedRows.assign(P, 0);
  call.in.bytes.assign(P, 0);
  size_t total = 0;
  for (int q = 0; q < P; q++) {
    if (q == me) continue;
    // A peer's counts size what this rank receives and where it writes:
    // at most this rank's rows, and at most their entries.
    const uint64_t rows = counts[q * stride + me], entries = p->thinned() ? counts[q * stride + P + me] : 0;
    size_t most = 0;
    if (rows > p->mine() || !checkedMul(rows, p->rowLength, most) || entries > most ||
        !checkedAdd(total, forwardBlock(p, p->mine(), rows, entries), total))
      return fail(comm, dctInternalError, "%s: rank %d announced %llu rows (%llu entries) for this rank's %zu rows",
                  call.fn, q, static_cast<unsigned long long>(rows), static_cast<unsigned long long>(entries),
                  p->mine());
    m.receivedRows[q] = rows;
    if (p->thinned()) m.receivedEntries.entries[q] = entries;
    call.in.bytes[q] = forwardBlock(p, p->mine(), rows, entries);
  }
  fillFlaggedSide(m.receivedRows, me, m.receivedSide);
  call.in.place();
  return reserveWire(call);
}

dctResult_t reserveSums(dctDesPlan_t p, DesMasks& m) {
  const size_t n = p->mine() * p->rowLength;
  const dctDataType_t accType = accumulationType(p->dtype);
  if (accType != p->dtype) DCTCHECK(p->acc.reserve(n * dtypeSize(accType)));
  if (p->thinned()) DCTCHECK(thinReserve(p, m));
  return m.received.reserve(size_t(p->comm->size) * maskWords(p->mine()) * sizeof(uint32_t));
}

dctResult_t malformed(Call& call, int q, dctResult_t res = dctInternalError) {
  return blockFailed(call.p->comm, res, call.fn, q, call.in.bytes[q]);
}

// summed = the rows of every rank in rank order, from +0 in the
// accumulation type. A rank's own rows are added whole: a zero row changes
// no sum that started from +0, so this equals adding its flagged rows.
dctResult_t reduceForward(Call& call, const void* partials, void* summed, DesMasks& m) {
  dctDesPlan_t p = call.p;
  const int P = p->comm->size, me = p->comm->rank;
  const size_t mine = p->mine(), n = mine * p->rowLength, W = maskWords(mine);
  if (mine == 0) return dctSuccess;
  const dctDataType_t accType = accumulationType(p->dtype);
  void* acc = accType == p->dtype ? summed : p->acc.as();
  DCTCHECK(p->ops->zero(p->kernels, acc, n * dtypeSize(accType), call.stream));
  for (int q = 0; q < P; q++) {
    uint32_t* flags = receivedFlags(m, p, q);
    const char* in = blockAt(p->wireIn, call.in, q);
    if (q == me) {
      RowBlockArgs a = block(p, acc, mine, nullptr, blockOf(partials, p, me));
      DCTCHECK(p->ops->rowAccumulate(p->kernels, &a, call.stream));
    }
    if (in == nullptr) {
      DCTCHECK(p->ops->zero(p->kernels, flags, W * sizeof(uint32_t), call.stream));
      continue;
    }
    DCTCHECK(p->ops->copy(p->kernels, flags, in, W * sizeof(uint32_t), call.stream));
    if (p->thinned()) {
      DCTCHECK(thinAccumulate(call, m, q, in + flagBytes(mine), m.receivedEntries.entries[q], acc));
      continue;
    }
    RowBlockArgs a = block(p, acc, mine, flags, const_cast<char*>(in) + flagBytes(mine));
    a.count = m.receivedRows[q];
    if (dctResult_t res = p->ops->rowAccumulate(p->kernels, &a, call.stream); res != dctSuccess)
      return malformed(call, q, res);
  }
  if (accType == p->dtype) return dctSuccess;
  return p->ops->convert(p->kernels, summed, p->dtype, acc, accType, n, 1.0, call.stream);
}

void commitForward(Call& call, const ForwardDraft& d) {
  dctDesPlan_t p = call.p;
  dctAlltoallStats_t& s = p->stats;
  p->committed = 1 - p->committed;
  p->backwardDue = true;
  if (d.estimated) {
    p->tau = d.tau;
    p->haveTau = true;
    p->lastEstimate = s.forwardSteps;
  }
  s.forwardSteps++;
  s.forwardBytesSent = call.out.total;
  s.forwardBytesReceived = call.in.total;
  s.keptEntries = p->thinned() ? d.keptEntries : d.keptRows * p->rowLength;
  s.nonFinite = d.nonFinite;
  const double cells = static_cast<double>((p->totalRows() - p->mine()) * p->rowLength);
  s.density = cells > 0 ? static_cast<double>(s.keptEntries) / cells : 0;
  s.threshold = p->thinned() && p->config.rowSelection == dctRowThreshold ? p->tau : 0;
  s.totalBytesSent += s.forwardBytesSent;
  s.totalBytesReceived += s.forwardBytesReceived;
  s.totalDenseBytes += s.denseBytesSent;
}

}  // namespace

dctResult_t desForward(dctDesPlan_t p, const void* partials, void* summed, void* stream, dctResult_t localError,
                       const char* fn) {
  Call call{p, stream, fn};
  DesMasks& spare = p->masks[1 - p->committed];
  ForwardDraft d;
  PlanCallHeader mine = planCallHeader(p, kForward, localError);
  if (mine.localError == dctSuccess) {
    mine.localError = caught(p->comm, fn, [&]() -> dctResult_t {
      DCTCHECK(p->ops->streamBegin(p->kernels, stream));
      DCTCHECK(packForward(call, partials, spare, d));
      return reserveSums(p, spare);
    });
  }
  mine.bytes = call.out.total;
  std::vector<PlanCallHeader> all;
  std::vector<uint64_t> published, counts;
  DCTCHECK(agree(p->comm, mine, all, stream, fn, [&] {
    reserveLayout(call, spare, published, counts);
    return dctSuccess;
  }));
  call.allBytes = sentTogether(all);
  DCTCHECK(vote(p->comm, layoutIncoming(call, spare, published, counts), stream, fn, "size exchange"));
  dctResult_t res = exchange(call);
  if (res == dctSuccess) res = reduceForward(call, partials, summed, spare);
  // The stream's end joins the vote: a device twin's can fail on one rank,
  // and every rank must then fail before anything commits.
  if (res == dctSuccess) res = p->ops->streamEnd(p->kernels, stream);
  DCTCHECK(vote(p->comm, res, stream, fn, "exchange"));
  commitForward(call, d);
  return dctSuccess;
}

dctResult_t desBackward(dctDesPlan_t p, const void* gradSummed, void* gradPartials, void* stream,
                        dctResult_t localError, const char* fn) {
  Call call{p, stream, fn};
  const int P = p->comm->size, me = p->comm->rank;
  if (localError == dctSuccess && !p->backwardDue)
    localError = fail(p->comm, dctInvalidUsage, "%s: no forward to go back through (backward runs once per forward)", fn);
  PlanCallHeader mine = planCallHeader(p, kBackward, localError);
  DesMasks& m = p->masks[p->committed];
  if (mine.localError == dctSuccess) {
    mine.localError = caught(p->comm, fn, [&]() -> dctResult_t {
      call.out.bytes.assign(P, 0);
      call.in.bytes.assign(P, 0);
      for (int q = 0; q < P; q++) {
        if (q == me) continue;
        call.out.bytes[q] = backwardBlock(p, m.receivedRows[q], m.receivedEntries, q);
        call.in.bytes[q] = backwardBlock(p, m.sentRows[q], m.sentEntries, q);
      }
      call.out.place();
      call.in.place();
      DCTCHECK(p->ops->streamBegin(p->kernels, stream));
      DCTCHECK(reserveWire(call));
      for (int q = 0; q < P; q++) {
        char* out = blockAt(p->wireOut, call.out, q);
        if (out == nullptr) continue;
        if (p->thinned()) {
          DCTCHECK(thinPackGrad(call, m, q, gradSummed, out));
          continue;
        }
        RowBlockArgs a = block(p, const_cast<void*>(gradSummed), p->mine(), receivedFlags(m, p, q), out);
        DCTCHECK(p->ops->rowGather(p->kernels, &a, stream));
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
    if (p->rows[q] == 0) continue;
    const bool own = q == me;
    if (p->thinned() && !own) {
      res = thinScatterGrad(call, m, q, blockAt(p->wireIn, call.in, q), gradPartials);
      continue;
    }
    RowBlockArgs a = block(p, blockOf(gradPartials, p, q), p->rows[q], sentFlags(m, p, q),
                           own ? const_cast<void*>(gradSummed) : blockAt(p->wireIn, call.in, q));
    a.denseSource = own;
    res = p->ops->rowScatter(p->kernels, &a, stream);
  }
  // The stream's end joins the vote: a device twin's can fail on one rank,
  // and every rank must then fail before anything commits.
  if (res == dctSuccess) res = p->ops->streamEnd(p->kernels, stream);
  DCTCHECK(vote(p->comm, res, stream, fn, "exchange"));
  dctAlltoallStats_t& s = p->stats;
  p->backwardDue = false;
  s.backwardSteps++;
  s.backwardBytesSent = call.out.total;
  s.backwardBytesReceived = call.in.total;
  s.totalBytesSent += s.backwardBytesSent;
  s.totalBytesReceived += s.backwardBytesReceived;
  s.totalDenseBytes += s.denseBytesReceived;  // the backward's dense rows go the reverse way
  return dctSuccess;
}

}  // namespace dct
