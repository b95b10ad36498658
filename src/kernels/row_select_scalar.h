// The plain bodies of the DCT-MP row selection (row_args.h has the rules):
// they serve the cases the vector bodies leave out (large k, fp64 without
// AVX2, no SSE2) and are what the vector bodies must match bit for bit.
// Also the pieces every body shares: a row's cut from its k-th largest key,
// the finish from that cut, and fp16/bf16 thresholds as keys.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "base/half_types.h"
#include "kernels/row_args.h"
#include "kernels/row_keys.h"

namespace dct {

// The k-th largest key: a sorted run of the k best for small k (a row's
// keys pass it once, few ever enter), nth_element for large k.
template <typename Key>
Key kthLargest(const Key* keys, size_t d, size_t k, std::vector<Key>& scratch) {
  constexpr size_t kSmallK = 32;
  if (k > kSmallK) {
    scratch.assign(keys, keys + d);
    std::nth_element(scratch.begin(), scratch.begin() + (k - 1), scratch.end(), std::greater<Key>());
    return scratch[k - 1];
  }
  Key best[kSmallK];
  size_t have = 0;
  for (size_t j = 0; j < d; j++) {
    const Key key = keys[j];
    if (have == k && key <= best[k - 1]) continue;
    size_t at = have < k ? have++ : k - 1;  // the smallest kept drops out
    for (; at > 0 && best[at - 1] < key; at--) best[at] = best[at - 1];
    best[at] = key;
  }
  return best[k - 1];
}

// The cut of a row whose k-th largest key is `kth`: a row with at least k
// non-finite entries keeps those alone, all above the largest finite key.
template <typename T>
RowKey<T> cutOf(RowKey<T> kth) {
  return kth == kInfKey<T> ? RowKey<T>(kInfKey<T> - 1) : kth;
}

// Mask words of the columns whose key (keyAt(j)) beats `cut` (branch-free,
// so the compiler vectorises the compares), then the columns whose key
// equals it, lowest first, while fewer than k are kept; returns how many
// are kept.
template <typename Key, typename KeyAt>
size_t keepAboveThenTies(KeyAt&& keyAt, size_t d, size_t k, Key cut, uint32_t* mask) {
  size_t kept = 0;
  for (size_t w = 0; w < maskWords(d); w++) {
    const size_t end = std::min(d - w * 32, size_t(32));
    uint32_t bits = 0;
    for (size_t b = 0; b < end; b++) bits |= static_cast<uint32_t>(keyAt(w * 32 + b) > cut) << b;
    mask[w] = bits;
    kept += std::popcount(bits);
  }
  for (size_t j = 0; j < d && kept < k; j++)
    if (keyAt(j) == cut) mask[j / 32] |= 1u << (j % 32), kept++;
  return kept;
}

template <typename T>
size_t selectTopK(const T* row, size_t d, size_t k, uint32_t* mask, std::vector<RowKey<T>>& keys,
                  std::vector<RowKey<T>>& scratch, size_t& nonFinite) {
  keys.resize(d);
  size_t nf = 0;
  for (size_t j = 0; j < d; j++) nf += (keys[j] = rowKey(row[j])) == kInfKey<T>;
  nonFinite += nf;
  const RowKey<T> cut = nf >= k ? cutOf<T>(kInfKey<T>) : kthLargest(keys.data(), d, k, scratch);
  return keepAboveThenTies([&](size_t j) { return keys[j]; }, d, k, cut, mask);
}

template <typename T, typename Acc = typename Value<T>::Acc>
size_t selectThreshold(const T* row, size_t d, Acc tau, uint32_t* mask, size_t& nonFinite) {
  std::fill(mask, mask + maskWords(d), 0u);
  size_t kept = 0;
  for (size_t j = 0; j < d; j++) {
    const Acc x = Value<T>::load(row[j]);
    if (std::fabs(x) < tau) continue;  // NaN fails the test: kept
    mask[j / 32] |= 1u << (j % 32);
    kept++;
    nonFinite += !std::isfinite(x);
  }
  return kept;
}

// Top-K masks and counts of rows [0, n) (k <= d); returns their non-finite
// entries.
template <typename T>
size_t topKRowsScalar(const T* rows, size_t n, size_t d, size_t k, uint32_t* mask, uint32_t* counts) {
  std::vector<RowKey<T>> keys, scratch;
  size_t nonFinite = 0;
  for (size_t r = 0; r < n; r++)
    counts[r] =
        static_cast<uint32_t>(selectTopK(rows + r * d, d, k, mask + r * maskWords(d), keys, scratch, nonFinite));
  return nonFinite;
}

// Threshold masks and counts of rows [0, n); returns the non-finite kept.
template <typename T, typename Acc = typename Value<T>::Acc>
size_t thresholdRowsScalar(const T* rows, size_t n, size_t d, Acc tau, uint32_t* mask, uint32_t* counts) {
  size_t nonFinite = 0;
  for (size_t r = 0; r < n; r++)
    counts[r] = static_cast<uint32_t>(selectThreshold(rows + r * d, d, tau, mask + r * maskWords(d), nonFinite));
  return nonFinite;
}

// A row's mask and count once a vector body has its k-th largest key `kth`
// (k < d), the non-finite keys among its k largest (`nfTop`), and `mask`
// holding the `atLeast` columns whose key is at least kth. Exactly k is the
// common case, and then those are the answer (with kth Inf's: exactly k
// non-finite); otherwise (ties at kth, or more than k non-finite) the plain
// finish decides from the cut. Returns the row's non-finite entries: nfTop,
// or every kept when kth is Inf's.
template <typename T>
size_t finishRow(const T* row, size_t d, size_t k, RowKey<T> kth, size_t nfTop, size_t atLeast, uint32_t* mask,
                 uint32_t& count) {
  size_t kept = atLeast;
  if (atLeast != k) kept = keepAboveThenTies([&](size_t j) { return rowKey(row[j]); }, d, k, cutOf<T>(kth), mask);
  count = static_cast<uint32_t>(kept);
  return kth == kInfKey<T> ? kept : nfTop;
}

// fp16/bf16 thresholds as keys: the smallest key whose magnitude is at
// least tau, so that !(|x| < tau) <=> key bits >= it for every x, NaN
// included (0 when every x passes: tau NaN or <= 0).
template <typename T>
int32_t firstKeyAtLeast(float tau) {
  if (!(tau > 0)) return 0;
  uint32_t lo = 0, hi = kInfKey<T>;  // Inf's magnitude is at least any tau
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (Value<T>::load(T{static_cast<uint16_t>(mid)}) >= tau) hi = mid;
    else lo = mid + 1;
  }
  return static_cast<int32_t>(lo);
}

}  // namespace dct
