// The k-th largest key of a row spread over a warp's lanes (row_warp_select.h
// has the layout, the shifted keys and the Lanes policy), three ways that
// give the same value: distinct maxima one round at a time over the lane's
// keys as they lie, or over the lane's keys sorted first (a round then
// pops a lane's leading keys instead of scanning all of them), or bit by
// bit from the top. Each also returns how many keys are above it and equal
// to it, for the tie rule.
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

// This lane's keys equal to x, above x, and at least x.
template <typename U, int ITEMS>
DCT_HOST_DEVICE uint32_t laneEqual(const U (&s)[ITEMS], U x) {
  uint32_t c = 0;
  DCT_UNROLL
  for (int i = 0; i < ITEMS; i++) c += s[i] == x;
  return c;
}
template <typename U, int ITEMS>
DCT_HOST_DEVICE uint32_t laneAbove(const U (&s)[ITEMS], U x) {
  uint32_t c = 0;
  DCT_UNROLL
  for (int i = 0; i < ITEMS; i++) c += s[i] > x;
  return c;
}
template <typename U, int ITEMS>
DCT_HOST_DEVICE uint32_t laneAtLeast(const U (&s)[ITEMS], U x) {
  uint32_t c = 0;
  DCT_UNROLL
  for (int i = 0; i < ITEMS; i++) c += s[i] >= x;
  return c;
}

// The k-th largest shifted key, the keys above it and those equal to it
// (over the warp; the same on every lane).
template <typename U>
struct Kth {
  U key;
  uint32_t above, ties;
};

// Distinct maxima below the last one, a max and a count over the warp per
// round: k rounds at most (1 <= k <= the row's columns).
template <typename U, int ITEMS, typename Lanes>
DCT_HOST_DEVICE Kth<U> kthByRounds(const U (&s)[ITEMS], uint32_t k, Lanes& lanes) {
  U bound = ~U(0);  // every shifted key is below it
  uint32_t taken = 0;
  for (;;) {
    U mine = 0;
    DCT_UNROLL
    for (int i = 0; i < ITEMS; i++) mine = s[i] < bound && s[i] > mine ? s[i] : mine;
    const U m = lanes.max(mine);
    const uint32_t c = lanes.sum(laneEqual(s, m));
    if (taken + c >= k || m == 0) return {m, taken, c};  // m == 0 (past every column): unreachable
    taken += c;
    bound = m;
  }
}

// Sorts a lane's keys in descending order (a bitonic network: fixed
// indices, so the keys stay in registers).
template <typename U, int N>
DCT_HOST_DEVICE void sortDescending(U (&t)[N]) {
  DCT_UNROLL
  for (int size = 2; size <= N; size *= 2) {
    DCT_UNROLL
    for (int stride = size / 2; stride > 0; stride /= 2) {
      DCT_UNROLL
      for (int i = 0; i < N; i++) {
        const int j = i ^ stride;
        if (j <= i) continue;
        const bool down = (i & size) == 0;  // the last merge (size == N) runs all downwards
        const U a = t[i], b = t[j];
        const U hi = a > b ? a : b, lo = a > b ? b : a;
        t[i] = down ? hi : lo;
        t[j] = down ? lo : hi;
      }
    }
  }
}

// kthByRounds on the lane's keys sorted: the lane's largest unconsumed key
// leads, so a round pops the leading keys equal to the warp's max.
template <typename U, int ITEMS, typename Lanes>
DCT_HOST_DEVICE Kth<U> kthBySortedRounds(const U (&s)[ITEMS], uint32_t k, Lanes& lanes) {
  U t[ITEMS];
  DCT_UNROLL
  for (int i = 0; i < ITEMS; i++) t[i] = s[i];
  sortDescending(t);
  uint32_t taken = 0;
  for (;;) {
    const U m = lanes.max(t[0]);
    if (m == 0) return {m, taken, 0};  // past every column: unreachable for k <= columns
    // Each pass pops one key from every lane leading with m, so the
    // ballots' popcounts add up to m's count (no separate warp sum).
    uint32_t c = 0;
    uint32_t leading = lanes.ballot(t[0] == m);  // m's own lane at least
    do {  // a lane may hold m more than once
      c += popcount32(leading);
      const bool pop = t[0] == m;
      DCT_UNROLL
      for (int i = 0; i + 1 < ITEMS; i++) t[i] = pop ? t[i + 1] : t[i];
      t[ITEMS - 1] = pop ? U(0) : t[ITEMS - 1];
      leading = lanes.ballot(t[0] == m);
    } while (leading != 0);
    if (taken + c >= k) return {m, taken, c};
    taken += c;
  }
}

// Bit by bit from the top: the largest v with at least k keys >= v.
template <typename U, int ITEMS, typename Lanes>
DCT_HOST_DEVICE Kth<U> kthByBits(const U (&s)[ITEMS], uint32_t k, int bits, Lanes& lanes) {
  U v = 0;
  for (int b = bits - 1; b >= 0; b--) {
    const U t = v | (U(1) << b);
    if (lanes.sum(laneAtLeast(s, t)) >= k) v = t;
  }
  return {v, lanes.sum(laneAbove(s, v)), lanes.sum(laneEqual(s, v))};
}

// The cheapest of the three by a count of instructions per lane (rounds
// are at most k; sorting keeps a second copy of the keys, so only while
// they are few registers).
template <typename U, int ITEMS, typename Lanes>
DCT_HOST_DEVICE Kth<U> kthLargestKey(const U (&s)[ITEMS], uint32_t k, int bits, Lanes& lanes) {
  constexpr bool kSortable = ITEMS * sizeof(U) <= 64;
  constexpr uint32_t kLog = ITEMS <= 1 ? 0 : ITEMS <= 2 ? 1 : ITEMS <= 4 ? 2 : ITEMS <= 8 ? 3 : ITEMS <= 16 ? 4 : 5;
  constexpr uint32_t kSortCost = ITEMS * kLog * (kLog + 1) / 2;  // 2 per compare-and-swap
  const uint64_t rounds = uint64_t(k) * (5 * ITEMS + 8), byBits = uint64_t(bits) * (2 * ITEMS + 6);
  const uint64_t sorted = kSortable ? kSortCost + uint64_t(k) * (ITEMS + 14) : ~uint64_t(0);
  if (sorted <= rounds && sorted <= byBits) return kthBySortedRounds(s, k, lanes);
  if (rounds <= byBits) return kthByRounds(s, k, lanes);
  return kthByBits(s, k, bits, lanes);
}

}  // namespace dct
