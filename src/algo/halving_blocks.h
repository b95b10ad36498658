// Recursive halving's partial sums (split_halving.h) as blocks: one per
// range in slot order, each a uint64 header (entries, or kHalvingDense)
// then its indices (absolute, padded to 8) and values, or the range dense,
// in the accumulation type. The schedule's view of ranges and positions,
// the received blocks' checks, and the host merges.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "algo/coo_merge.h"
#include "algo/recursive_doubling.h"
#include "algo/split_allreduce.h"
#include "algo/split_halving.h"
#include "base/dtype.h"
#include "transport/comm.h"

namespace dct {

constexpr uint64_t kHalvingDense = UINT64_MAX;
// A block's most bytes beyond its entries' (index + value each): header
// and two paddings (a dense block's values take no more than its entries'
// would: it is dense only from the break-even on).
constexpr size_t kBlockSlack = 24;

// Ranges, positions (slot order) and block sizes as this step sees them.
struct HvView {
  const SplitHalving& h;
  int P, p2, extra;
  size_t acc;
  int ib;
  explicit HvView(const SplitHalving& s)
      : h(s), P(s.comm->size), p2(rdCoreRanks(s.comm->size)), extra(P - p2), acc(dtypeSize(s.c->accType)),
        ib(s.c->indexBytes) {}
  size_t begin(int q) const { return splitRangeBegin(h.c->count, P, q); }
  size_t length(int q) const { return begin(q + 1) - begin(q); }
  int rangeAt(int pos) const { return h.order[pos]; }
  // The first position of slot s (slots below `extra` hold two ranges).
  int firstPos(int s) const { return s + std::min(s, extra); }
  uint64_t denseFrom(int q) const { return coo::denseFrom(length(q), ib, acc); }
  static size_t pad8(size_t x) { return (x + 7) & ~size_t(7); }
  size_t blockBytes(uint64_t n, int q) const {
    return n == kHalvingDense ? 8 + pad8(length(q) * acc) : 8 + pad8(n * ib) + pad8(n * acc);
  }
  uint64_t windowLength(int a, int b) const {
    uint64_t n = 0;
    for (int pos = a; pos < b; pos++) n += length(rangeAt(pos));
    return n;
  }
  // The most a partial of at most `entries` over positions [a, b) takes:
  // the caller has checked count x (index + value) + slack x P fits.
  size_t bound(uint64_t entries, int a, int b) const {
    const uint64_t n = std::min(entries, windowLength(a, b));
    return kBlockSlack * static_cast<size_t>(b - a) + static_cast<size_t>(n) * (ib + acc);
  }
  // Entries of the core ranks r with r = j (mod m), at most the count.
  uint64_t group(int j, int m) const {
    uint64_t n = 0;
    for (int r = j % m; r < p2; r += m) n = std::min<uint64_t>(n + h.core[r], h.c->count);
    return n;
  }
};

// The peer's message for positions [a, b) checked block by block: headers,
// lengths, indices inside their ranges and ascending, nothing left over.
dctResult_t checkBlocks(const HvView& v, int peer, const char* msg, size_t got, int a, int b);

// The blocks from position `from` to `to` of the partial at `p`: their bytes.
size_t blocksBytes(const HvView& v, const char* p, int from, int to);

// The kept positions of h.cur (which holds from h.holdA on) merged with the
// peer's message (null: the peer failed, nothing from it) into h.spare, the
// lower rank's values first; cur and spare swap.
void mergeBlocks(SplitHalving& h, const HvView& v, const HvRound& r, const char* theirs);

// Range q's block written into its place in the target from +0; inflow:
// its entries (its length where dense).
void writeBlock(const HvView& v, int q, const char* block, void* target, uint64_t& inflow);

// The selection (nnz ascending indices, values already in the accumulation
// type) as blocks over every range in slot order at h.cur.
void firstPartial(SplitHalving& h, const HvView& v, const void* indices, const void* values, size_t nnz);

}  // namespace dct
