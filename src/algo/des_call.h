// One DES reduce-scatter call's state and the block arithmetic shared by
// the exact rows (des_reduce_scatter.cc) and the thinned ones
// (des_thin.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "algo/blocks.h"
#include "base/dtype.h"
#include "core/des_plan.h"
#include "kernels/index_packing.h"

namespace dct::des {

struct Call {
  Call(dctDesPlan_t plan, void* s, const char* name) : p(plan), stream(s), fn(name) {}
  dctDesPlan_t p;
  void* stream;
  const char* fn;
  Blocks out, in;
  size_t allBytes = 0;  // what every rank sends together (agreed)
};

// What a forward will commit if every rank succeeds.
struct ForwardDraft {
  uint64_t keptRows = 0, nonFinite = 0;  // rows (their NaN/Inf) sent to peers
  uint64_t keptEntries = 0;              // thinned: entries of those rows kept
  double tau = 0;
  bool estimated = false;
};

inline size_t rowBytes(const dctDesPlan_t p) { return p->rowLength * dtypeSize(p->dtype); }
inline size_t flagBytes(size_t rows) { return packing::pad8(maskWords(rows) * sizeof(uint32_t)); }
// Rows of owner q's block in a buffer of every rank's rows.
inline void* blockOf(const void* rows, const dctDesPlan_t p, int q) {
  return const_cast<char*>(static_cast<const char*>(rows)) + p->rowStart[q] * rowBytes(p);
}
inline uint32_t* sentFlags(DesMasks& m, const dctDesPlan_t p, int q) { return m.sent.as<uint32_t>() + p->sentAt[q]; }
inline uint32_t* receivedFlags(DesMasks& m, const dctDesPlan_t p, int q) {
  return m.received.as<uint32_t>() + size_t(q) * maskWords(p->mine());
}
inline char* blockAt(TwinBuffer& wire, const Blocks& b, int q) {
  return b.bytes[q] ? wire.as<char>() + b.offsets[q] : nullptr;
}

inline RowBlockArgs block(const dctDesPlan_t p, void* rows, size_t rowCount, uint32_t* flags, void* packed) {
  RowBlockArgs a{};
  a.rows = rows;
  a.rowCount = rowCount;
  a.rowLength = p->rowLength;
  a.dtype = p->dtype;
  a.flags = flags;
  a.packed = packed;
  a.accType = accumulationType(p->dtype);
  return a;
}

// --- thinned rows (des_thin.cc) ---------------------------------------------

// A thinned block: [row flags][counts][entry masks][values] of `flagged`
// rows holding `entries` kept entries; empty when no row is flagged.
size_t thinBlock(const dctDesPlan_t p, size_t rows, uint64_t flagged, uint64_t entries);
// Gathers the flagged rows bound for peers into the stage, selects their
// entries into m.sentEntries (tau re-estimated when due) and counts them.
dctResult_t thinSelect(Call& call, const void* partials, DesMasks& m, ForwardDraft& d);
// Room, before the agreement, for every thinned buffer this forward's
// receiving side may need (its bounds: this rank's rows from every peer).
dctResult_t thinReserve(dctDesPlan_t p, DesMasks& m);
// Peer q's counts, masks and values after the flags at `body`.
dctResult_t thinPack(Call& call, DesMasks& m, int q, char* body);
// Peer q's block after its flags, into `acc` (rows of the accumulation
// type): decode the kept entries (zeros elsewhere) and add the flagged rows.
dctResult_t thinAccumulate(Call& call, DesMasks& m, int q, const char* body, uint64_t entries, void* acc);
// Backward: the gradient values at the entries peer q kept, and their way
// back into gradPartials' block of owner q.
dctResult_t thinPackGrad(Call& call, DesMasks& m, int q, const void* gradSummed, char* out);
dctResult_t thinScatterGrad(Call& call, DesMasks& m, int q, const char* in, void* gradPartials);

}  // namespace dct::des
