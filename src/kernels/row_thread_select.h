// The CUDA twin's top-K for short fp32 rows with a small k (32 < D <= 128,
// k <= 8: cuda_rows_select_tile.cuh): one thread per row, no warp
// intrinsics. The row's shifted keys (row_warp_select.h: the CPU twin's
// keys plus one) stream once through a sorted register list of the KMAX
// largest, whose k-th entry is the cut; a second pass marks the mask words.
// A warp's collectives cost more than the row's data at these sizes, a
// thread's compare-and-swap chain does not. Plain code, so the unit tests
// run it on the host against the CPU twin; the rules are
// row_select_scalar.h's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/host_device.h"
#include "kernels/row_warp_kth.h"

namespace dct {

// The KMAX largest shifted keys pushed so far, largest first, repeats kept
// (0: no key yet). A push is KMAX max/min pairs, without a branch.
template <typename U, int KMAX>
struct TopKeys {
  U t[KMAX] = {};
  DCT_HOST_DEVICE void push(U x) {
    DCT_UNROLL
    for (int i = 0; i < KMAX; i++) {
      const U hi = t[i] > x ? t[i] : x;
      x = t[i] > x ? x : t[i];
      t[i] = hi;
    }
  }
};

// Keys above `cut` are kept, then `quota` keys equal to it, lowest column
// first.
template <typename U>
struct RowCut {
  U cut;
  uint32_t quota;
};

// The cut of the list's row for 1 <= k <= KMAX (k below the row's columns):
// its k-th largest key, or Inf's key minus one when the k largest are all
// non-finite (they alone are kept, every one of them).
template <typename U, int KMAX>
DCT_HOST_DEVICE RowCut<U> topKeysCut(const TopKeys<U, KMAX>& top, uint32_t k, U infKey) {
  U kth = 0;
  DCT_UNROLL
  for (int i = 0; i < KMAX; i++) kth = static_cast<uint32_t>(i) + 1 == k ? top.t[i] : kth;  // no register index
  if (kth == infKey + 1) return {infKey, 0};
  uint32_t above = 0;
  DCT_UNROLL
  for (int i = 0; i < KMAX; i++) above += static_cast<uint32_t>(i) < k && top.t[i] > kth;
  return {kth, k - above};
}

// One row of D entries, key(j) its shifted key at column j: writes its
// ceil(D / 32) mask words and returns the kept count; *nonFinite gets the
// non-finite entries kept (all of them).
template <int KMAX, typename U, typename KeyAt>
DCT_HOST_DEVICE uint32_t threadRowTopK(const KeyAt& key, uint32_t D, uint32_t k, U infKey, uint32_t* words,
                                       uint32_t* nonFinite) {
  TopKeys<U, KMAX> top;
  for (uint32_t j = 0; j < D; j++) top.push(key(j));
  const RowCut<U> c = topKeysCut(top, k, infKey);
  uint32_t quota = c.quota, kept = 0, nf = 0;
  for (uint32_t w = 0; w * 32 < D; w++) {
    uint32_t word = 0;
    const uint32_t end = D - w * 32 < 32 ? D - w * 32 : 32;
    for (uint32_t b = 0; b < end; b++) {
      const U s = key(w * 32 + b);
      const bool tie = s == c.cut && quota > 0;
      quota -= tie;
      const bool keep = s > c.cut || tie;
      word |= static_cast<uint32_t>(keep) << b;
      nf += keep && s == infKey + 1;
    }
    words[w] = word;
    kept += popcount32(word);
  }
  *nonFinite = nf;
  return kept;
}

}  // namespace dct
