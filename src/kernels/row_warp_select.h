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

// Item loops index register arrays: fully unrolled on the device (the
// host pass of nvcc must not see the pragma).
#if defined(__CUDA_ARCH__)
#define DCT_UNROLL _Pragma("unroll")
#else
#define DCT_UNROLL
#endif

namespace dct {

DCT_HOST_DEVICE uint32_t popcount32(uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __popc(x);
#else
  return static_cast<uint32_t>(__builtin_popcount(x));
#endif
}

// Bits needed by the shifted keys (Inf's key + 1 < 2^bits).
template <typename U>
DCT_HOST_DEVICE int shiftedKeyBits(U infKey) {
  int bits = 0;
  for (U top = infKey + 1; top; top >>= 1) bits++;
  return bits;
}

// This lane's keys equal to x, and at least x.
template <typename U, int ITEMS>
DCT_HOST_DEVICE uint32_t countEqual(const U (&s)[ITEMS], U x) {
  uint32_t c = 0;
  DCT_UNROLL
  for (int i = 0; i < ITEMS; i++) c += s[i] == x;
  return c;
}
template <typename U, int ITEMS>
DCT_HOST_DEVICE uint32_t countAtLeast(const U (&s)[ITEMS], U x) {
  uint32_t c = 0;
  DCT_UNROLL
  for (int i = 0; i < ITEMS; i++) c += s[i] >= x;
  return c;
}

// The k-th largest shifted key of the row (1 <= k <= columns < D + 1), by
// taking the distinct largest keys one at a time: k rounds at most, each a
// max and a count over the warp.
template <typename U, int ITEMS, typename Lanes>
DCT_HOST_DEVICE U kthByRounds(const U (&s)[ITEMS], uint32_t k, Lanes& lanes) {
  U bound = ~U(0);  // every shifted key is below it
  uint32_t taken = 0;
  for (;;) {
    U mine = 0;
    DCT_UNROLL
    for (int i = 0; i < ITEMS; i++) mine = s[i] < bound && s[i] > mine ? s[i] : mine;
    const U m = lanes.max(mine);
    taken += lanes.sum(countEqual(s, m));
    if (taken >= k || m == 0) return m;  // m == 0 only past every column: unreachable for k <= columns
    bound = m;
  }
}

// The same key bit by bit from the top: the largest v with at least k keys
// >= v. `bits` rounds of a count over the warp; cheaper than kthByRounds
// for large k.
template <typename U, int ITEMS, typename Lanes>
DCT_HOST_DEVICE U kthByBits(const U (&s)[ITEMS], uint32_t k, int bits, Lanes& lanes) {
  U v = 0;
  for (int b = bits - 1; b >= 0; b--) {
    const U t = v | (U(1) << b);
    if (lanes.sum(countAtLeast(s, t)) >= k) v = t;
  }
  return v;
}

// The cut as a shifted key and the non-finite keys of the row (1 <= k <
// columns). Either search gives the same value; the cheaper one runs.
template <typename U>
struct WarpCut {
  U cut;
  uint32_t nonFinite;
};
template <typename U, int ITEMS, typename Lanes>
DCT_HOST_DEVICE WarpCut<U> warpRowCut(const U (&s)[ITEMS], uint32_t k, U infKey, Lanes& lanes) {
  const U inf = infKey + 1;
  const uint32_t nonFinite = lanes.sum(countEqual(s, inf));
  if (nonFinite >= k) return {inf - 1, nonFinite};  // the non-finite alone: no key ties the cut's
  const int bits = shiftedKeyBits(infKey);
  const U kth = 3 * k <= 2 * static_cast<uint32_t>(bits) ? kthByRounds(s, k, lanes) : kthByBits(s, k, bits, lanes);
  return {kth, nonFinite};
}

// Writes the row's mask words (W = ceil(D / 32) <= ITEMS, lane 0 stores)
// for the cut and returns the kept count (the same on every lane).
template <typename U, int ITEMS, typename Lanes>
DCT_HOST_DEVICE uint32_t warpMarkTopK(const U (&s)[ITEMS], U cut, uint32_t k, size_t W, uint32_t* words,
                                      Lanes& lanes) {
  uint32_t above = 0;
  DCT_UNROLL
  for (int i = 0; i < ITEMS; i++) above += s[i] > cut;
  above = lanes.sum(above);
  uint32_t ties = above < k ? k - above : 0;  // ties of the cut still to keep, lowest column first
  uint32_t kept = 0;
  const uint32_t below = lanes.lanesBelow();
  DCT_UNROLL
  for (int i = 0; i < ITEMS; i++) {
    const bool tie = s[i] == cut;  // cut >= 1: never a column past D
    const uint32_t tieBits = lanes.ballot(tie);
    const bool keep = s[i] > cut || (tie && popcount32(tieBits & below) < ties);
    const uint32_t word = lanes.ballot(keep);
    const uint32_t tiesHere = popcount32(tieBits);
    ties -= tiesHere < ties ? tiesHere : ties;
    kept += popcount32(word);
    if (lanes.lane() == 0 && static_cast<size_t>(i) < W) words[i] = word;
  }
  return kept;
}

}  // namespace dct
