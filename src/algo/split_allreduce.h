// The split algorithm of dctSparseAllreduce (SparCML's reduce-scatter +
// allgather): [0, count) is cut in P equal ranges, rank q owns range q.
//
//   local work   cut this rank's selection by range (lowerBounds) and pack
//                each piece, indices relative to its range, into c->wire
//   agreement    (sparse_allreduce.cc) header allgather + vote
//   pieces       every rank's piece sizes for this rank (an alltoall of 16
//                bytes per pair; NCCL: an allgather of all P x P), reserve, vote;
//                alltoallv of the pieces; each owner sums its range in rank
//                order (mergePacked) straight into the step's target
//   (or, with recursive halving, split_halving.h: log2 P pairwise rounds
//   that merge as they go, their bounds reserved in the agreement)
//   ranges       each owner selects its range's nonzeros (NaN and Inf
//                included) and keeps the smaller of sparse (packed indices +
//                values) and dense form; allgather of the form sizes,
//                reserve, vote; allgatherv of the ranges; every rank writes
//                all of them into the target
//   (sparse_allreduce.cc) exchange vote, commit
//
// With the pairwise exchange every entry is the same rank-order sum from +0
// as the allgather algorithm's, carried exactly: results are bit-identical
// to it and across ranks (recursive halving sums a fixed tree instead:
// bit-identical across ranks, equal to these wherever sums are exact). A rank that fails anywhere still takes part in every collective up
// to the next vote, which carries its failure to all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/phase_timer.h"
#include "core/compressor.h"

namespace dct {

// Range q is [splitRangeBegin(count, P, q), splitRangeBegin(count, P, q + 1)):
// equal widths from the count alone, so identical on every rank. (Balancing
// by selected mass would have to come from last step's agreed counts; equal
// widths need nothing and suit positions spread over the tensor.)
inline size_t splitRangeBegin(size_t count, int ranks, int q) {
  return static_cast<size_t>(static_cast<unsigned __int128>(count) * static_cast<unsigned>(q) /
                             static_cast<unsigned>(ranks));
}

// This rank's pieces, laid out one after another in c->wire, each 8-byte
// aligned. `sizes` is what every rank learns: (bytes, nnz) per range.
struct SplitPieces {
  std::vector<uint64_t> sizes;  // 2P entries
  std::vector<size_t> offsets;  // P: where each piece starts in c->wire
  size_t bytes = 0;             // all pieces together
};

// Local work: cuts `msg` (compressStep's selection, ascending) by range and
// packs the pieces into c->wire over comm's ranks, and reserves
// c->rankArrays for splitExchange (which allocates nothing).
dctResult_t splitPack(dctCompressor_t c, dctComm_t comm, const Message& msg, SplitPieces& pieces, void* stream);

// Everything from the piece sizes to the reduced ranges written into
// `target` (count entries of c->accType). allRanksBytes: every rank's
// pieces.bytes summed (from the agreement), the same on every rank. With
// `owner` set, the global top-k step (global_topk.h): the owners deliver
// their share of a global top-k and the draft holds the owner residual. Returns an error on every rank if
// any rank failed before one of its votes; a failure after the last vote is
// returned on the failing rank only (the caller's exchange vote spreads it).
// sent / received: this rank's bytes on the wire, both phases.
// What becomes of the gathered ranges: written into `target`; only checked
// (splitWriteRanges writes them after the caller's last vote); or left for
// the caller, who checks them as it reads them (splitRangesCoo).
enum class SplitRanges { kWrite, kCheck, kLeave };
dctResult_t splitExchange(dctCompressor_t c, dctComm_t comm, const SplitPieces& pieces, size_t allRanksBytes,
                          void* target, void* stream, PhaseTimer& clock, size_t& sent, size_t& received,
                          OwnerDraft* owner = nullptr, SplitRanges ranges = SplitRanges::kWrite);

// The second phase alone, from this rank's range summed in its place in
// `target` on (split_halving.h gets there by recursive halving): `res` is
// this rank's status so far (a failure goes to the range-sizes vote, and
// this rank still takes part in its collectives), `inflow` the entries
// summed into the range (bounds the owner's selection; 0: nothing came).
// sent / received: this phase's bytes are added.
dctResult_t splitRanges(dctCompressor_t c, dctComm_t comm, dctResult_t res, uint64_t inflow, void* target,
                        void* stream, PhaseTimer& clock, size_t& sent, size_t& received, OwnerDraft* owner,
                        SplitRanges ranges = SplitRanges::kWrite);

// A deferred exchange's result into `target` (count entries of accType):
// every range from its checked gathered form, this rank's dense range from
// `sum` (the exchange's target). Reads c->gathered and c->rankArrays as the
// exchange left them; on the host twin it cannot fail, so it may follow the
// call's last vote and write straight into the caller's buffer.
dctResult_t splitWriteRanges(dctCompressor_t c, dctComm_t comm, const void* sum, void* target, void* stream);

// A range's nnz, as every rank learns it, when it travels dense.
constexpr uint64_t kSplitDenseForm = UINT64_MAX;

// The COO of a deferred exchange's result (split_coo.cc; host twin, which
// has mergePackedCoo and denseCoo): every entry with !(|x * factor| <
// tauFloor(c)), ascending, its value x * factor in c->accType, as the scale
// op and a select of the written sum give them. `sum` as for
// splitWriteRanges; a dense range is read where it lies (gathered, or this
// rank's in `sum`). Reads the ranges as an exchange with SplitRanges::kLeave
// left them, and checks them: fails on this rank only (the caller's vote
// spreads it) where a range is malformed or holds more entries than
// `capacity` leaves.
struct RangesCoo {
  double factor;
  void* outIndices;
  void* outValues;
  size_t capacity;
  size_t nnz = 0;  // out
};
dctResult_t splitRangesCoo(dctCompressor_t c, dctComm_t comm, void* sum, RangesCoo& coo, void* stream);

}  // namespace dct
