// Recursive doubling for dctSparseInputAllreduce (dctAlgoRecursiveDoubling,
// after SparCML): the ranks' sorted COO partial sums merge pairwise in
// ceil(log2 P) rounds instead of P - 1 messages.
//
//   fold in     P not a power of two: rank p2 + j (p2 the largest power of
//               two <= P) sends its input to rank j, which adds it after
//               its own (lower first)
//   rounds      core rank r and r ^ 2^i swap their partial sums (one
//               Transport::sendrecv, its length from the message) and merge
//               them, the lower block's value first in every sum, so both
//               hold the same bits; a partial sum whose entries reach the
//               break-even (index + value bytes against value bytes) turns
//               dense for the remaining rounds
//   fold out    rank j sends the result to rank p2 + j
//
// Every rank ends with the same bits: the same pairwise tree from +0, which
// equals the allgather plan's rank-order sum wherever the sums are exact.
// A message: uint64 header (its nnz, or kDenseForm), then nnz indices (8-byte
// padded) and nnz values in the accumulation type, or the dense sum.
//
// The CPU twin only (the merges run on the host) over a transport with
// sendrecv. Sizes, bounds and buffers come from the agreed counts before the
// call's vote (rdPrepare); the exchange allocates nothing. A rank that fails
// a round still takes part in every later one (sending empty partial sums),
// and the caller's exchange vote fails every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/compressor.h"

namespace dct {

// One exchange of the schedule, as this rank sees it.
struct RdRound {
  int peer = -1;
  bool sends = false, receives = false;
  bool lower = false;   // this rank's partial sum comes first in the sums
  bool adopt = false;   // fold out: the peer's message is the result
  uint64_t bound = 0;   // entries the peer's partial sum holds at most
  size_t recvCap = 0;   // the most the peer may send
  size_t maxBytes = 0;  // the most either may send (the transport's path)
};

struct RecursiveDoubling {
  dctCompressor_t c = nullptr;
  dctComm_t comm = nullptr;
  size_t count = 0;
  size_t denseBytes = 0;      // count x the accumulation type
  uint64_t switchNnz = 0;     // a partial sum with this many entries is dense
  size_t partialRoom = 0;     // the largest sparse partial sum, as a message
  size_t recvRoom = 0;        // the largest message this rank receives
  std::vector<uint64_t> core; // per core rank: its entries and its folded rank's
  std::vector<RdRound> rounds;  // this rank's, in order
  char* sum = nullptr;        // the dense partial: 8 bytes of header room before it
  bool dense = false;         // this rank's partial sum is in `sum`
  uint64_t nnz = 0;           // else its entries, a message at `cur`
  char* cur = nullptr;        // c->wire or c->nodeSum, the other one `spare`
  char* spare = nullptr;
  bool keepSparse = false;    // a sparse result stays at `cur` (rdSparseResult), not densified
  const char* fn = "";
};

// Whether the plan can run here: host kernels and a transport with sendrecv.
bool recursiveDoublingAvailable(dctCompressor_t c, dctComm_t comm);

// The largest power of two <= ranks, and the rounds the plan takes
// (ceil(log2 ranks) of sendrecv latencies, the folds counted as one each).
int rdCoreRanks(int ranks);

// After the agreement, before its vote: the bounds of every round from the
// agreed counts (nnz, one per rank), buffers reserved (c->wire, c->nodeSum,
// c->gathered; `sum` lies in c->staged with sumBytes + 8 reserved by the
// caller), and this rank's input as its first partial sum.
dctResult_t rdPrepare(RecursiveDoubling& rd, const uint64_t* nnz, const void* indices, const void* values,
                      size_t inNnz, dctDataType_t dtype, void* stream);

// The rounds; the sum (count values of the accumulation type) ends in
// rd.sum, the same bits on every rank. sent / received: this rank's bytes.
// With keepSparse a result that stayed sparse is left as it is instead
// (rd.dense false): rdSparseResult reads it.
dctResult_t rdExchange(RecursiveDoubling& rd, size_t& sent, size_t& received, void* stream);

// The sparse result after rdExchange (keepSparse, !rd.dense): its entries'
// ascending indices (c->indexBytes wide) and values (the accumulation type).
struct RdSparse {
  uint64_t nnz;
  const void* indices;
  const void* values;
};
RdSparse rdSparseResult(const RecursiveDoubling& rd);

}  // namespace dct
