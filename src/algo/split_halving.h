// Recursive halving: the split plans' reduce-scatter (split_allreduce.h,
// global_topk.h) in log2 P rounds instead of one alltoallv of P - 1
// messages, after SparCML. The ranges stay today's (P equal ranges, rank q
// owns range q, so global top-k's owner residual is where it was).
//
//   slots       p2, the largest power of two <= P, core ranks; core rank j
//               holds slot j: range j, and range p2 + j where that rank
//               exists. A partial sum covers a run of slots: one block per
//               range in slot order, each a uint64 header (its entries, or
//               kDenseForm) then its indices (absolute, padded to 8) and
//               values, or its range dense, in the accumulation type
//   fold in     rank p2 + j sends its selection (every range) to rank j,
//               which adds it after its own
//   rounds      core rank r and r ^ d (d = p2/2, p2/4, ..., 1) split their
//               run of slots in halves: each sends the half the other
//               keeps and merges what it receives into the half it keeps,
//               the lower rank's partial first in every sum; a range whose
//               entries reach the break-even (index + value bytes against
//               value bytes) turns dense
//   fold out    rank j sends range p2 + j's block to rank p2 + j
//
// Every rank then holds its own range summed, written into the target from
// +0 (the allgather and split plans' start), and the split plan's second
// phase runs as before. The sum of a range is a fixed tree over the ranks
// (fold pairs first, then the rounds), not split's rank order: the two plans
// agree bit for bit wherever the sums are exact, and every rank gets the
// same bits either way (each range is reduced once, by its owner).
//
// The CPU twin over a transport with sendrecv (MPI). Bounds, buffers and
// the first partial come from the agreed counts in the agreement, before
// its vote; the rounds allocate nothing. A rank that fails sends empty
// (0-byte) messages in every later round, which its peers read as nothing
// from it; the split plan's next vote fails every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/compressor.h"

namespace dct {

struct HvRound {
  int peer = -1;
  bool sends = false, receives = false;
  bool lower = false;       // this rank's partial comes first in the sums
  bool adopt = false;       // fold out: the peer's block is this rank's range
  int giveA = 0, giveB = 0;  // positions (slot order) this rank sends
  int keepA = 0, keepB = 0;  // positions it holds after the round
  size_t recvCap = 0;        // the most the peer may send
  size_t maxBytes = 0;       // the most either may send (the transport's path)
};

struct SplitHalving {
  dctCompressor_t c = nullptr;
  dctComm_t comm = nullptr;
  std::vector<int> order;          // the ranges in slot order
  std::vector<uint64_t> core;      // per core rank: its entries and its folded rank's
  std::vector<uint64_t> cut;       // scratch: where each range starts in the selection
  std::vector<HvRound> rounds;     // this rank's, in order
  int holdA = 0, holdB = 0;        // positions the current partial covers
  char* cur = nullptr;             // c->wire: the current partial
  char* spare = nullptr;           // c->selection: the next one
  char* in = nullptr;              // c->gathered: what the peer sent
};

// Whether the exchange can run here: host kernels, a transport with sendrecv.
bool splitHalvingAvailable(dctCompressor_t c, dctComm_t comm);

// In the agreement, before its vote: the schedule and every bound from the
// agreed counts (nnz, one per rank), buffers reserved (c->wire, c->selection,
// c->gathered), and this rank's selection (msg: ascending, c->wireType,
// c->count values) laid out as its first partial.
dctResult_t halvingPrepare(SplitHalving& h, const uint64_t* nnz, const Message& msg, void* stream);

// The rounds: this rank's range summed into its place in `target` (count
// values of the accumulation type), from +0; inflow: the entries summed
// into it (the range's length where it went dense). A failure is this
// rank's alone: the caller's next vote spreads it. sent / received: bytes.
dctResult_t halvingExchange(SplitHalving& h, void* target, uint64_t& inflow, size_t& sent, size_t& received,
                            void* stream);

}  // namespace dct
