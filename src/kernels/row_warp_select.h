// The CUDA twin's warp-per-row top-K (cuda_rows_select_warp.cuh), written
// against a Lanes policy so that the unit tests run the same code on the
// host with 32 threads as lanes (tests/unit/test_row_warp_select.cc).
// A row of D <= 32 * ITEMS entries sits in registers: lane l holds columns
// 32 i + l (item i), so mask word i is one ballot. Keys are the CPU twin's
// (row_keys.h) plus one, 0 marking a column past D, so no lane needs a
// separate valid flag. The rules are row_select_scalar.h's: the k-th
// largest key is the cut (Inf's minus one when the row has at least k
// non-finite keys), keys above it are kept, then its ties lowest column
// first while fewer than k are kept.
//
// Lanes: lane(), lanesBelow() (bits of the lanes below this one),
// max(U) and sum(uint32_t) over the warp, ballot(bool). Every lane calls
// every function the same number of times (the loops are warp-uniform).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/host_device.h"
#include "kernels/row_warp_kth.h"

namespace dct {

// The cut as a shifted key, the keys above it and tying it (~0u: not
// counted), and the row's non-finite keys.
template <typename U>
struct WarpCut {
  U cut;
  uint32_t above, ties, nonFinite;
};

// 1 <= k < the row's columns.
template <typename U, int ITEMS, typename Lanes>
DCT_HOST_DEVICE WarpCut<U> warpRowCut(const U (&s)[ITEMS], uint32_t k, U infKey, Lanes& lanes) {
  const U inf = infKey + 1;
  const uint32_t nonFinite = lanes.sum(laneEqual(s, inf));
  if (nonFinite >= k) return {inf - 1, nonFinite, ~0u, nonFinite};  // the non-finite alone
  const Kth<U> kth = kthLargestKey(s, k, shiftedKeyBits(infKey), lanes);
  return {kth.key, kth.above, kth.ties, nonFinite};
}

// Writes the row's mask words (W = ceil(D / 32) <= ITEMS, lane 0 stores)
// for the cut and returns the kept count (the same on every lane).
template <typename U, int ITEMS, typename Lanes>
DCT_HOST_DEVICE uint32_t warpMarkTopK(const U (&s)[ITEMS], const WarpCut<U>& cut, uint32_t k, size_t W,
                                      uint32_t* words, Lanes& lanes) {
  uint32_t quota = cut.above < k ? k - cut.above : 0;  // ties of the cut to keep, lowest column first
  uint32_t kept = 0;
  if (cut.ties <= quota) {  // every tie is kept (the common case: one key at the cut)
    DCT_UNROLL
    for (int i = 0; i < ITEMS; i++) {
      const uint32_t word = lanes.ballot(s[i] >= cut.cut);  // cut >= 1: never a column past D
      kept += popcount32(word);
      if (lanes.lane() == 0 && static_cast<size_t>(i) < W) words[i] = word;
    }
    return kept;
  }
  const uint32_t below = lanes.lanesBelow();
  DCT_UNROLL
  for (int i = 0; i < ITEMS; i++) {
    const bool tie = s[i] == cut.cut;
    const uint32_t tieBits = lanes.ballot(tie);
    const bool keep = s[i] > cut.cut || (tie && popcount32(tieBits & below) < quota);
    const uint32_t word = lanes.ballot(keep);
    const uint32_t tiesHere = popcount32(tieBits);
    quota -= tiesHere < quota ? tiesHere : quota;
    kept += popcount32(word);
    if (lanes.lane() == 0 && static_cast<size_t>(i) < W) words[i] = word;
  }
  return kept;
}

}  // namespace dct
