// Host merges of sorted COO partial sums in the accumulation type, shared by
// recursive doubling (recursive_doubling.h) and the split plans' recursive
// halving (split_halving.h). In every sum the lower block's value comes
// first, so two ranks merging the same pair get the same bits.
#pragma once

#include <cstdint>

#include "dct/dct.h"

namespace dct::coo {

// f(index, value) with the index type of indexBytes (4 or 8) and the value
// type of the accumulation type (fp32 or fp64).
template <typename F>
auto withTypes(int indexBytes, dctDataType_t acc, F&& f) {
  if (indexBytes == 4) return acc == dctFloat64 ? f(uint32_t{}, double{}) : f(uint32_t{}, float{});
  return acc == dctFloat64 ? f(uint64_t{}, double{}) : f(uint64_t{}, float{});
}

// Strictly ascending, in [lo, hi).
template <typename I>
bool validIndices(const I* idx, uint64_t n, uint64_t lo, uint64_t hi) {
  for (uint64_t j = 0; j < n; j++)
    if (idx[j] < lo || idx[j] >= hi || (j > 0 && idx[j] <= idx[j - 1])) return false;
  return true;
}

// dense[idx - base] (+)= the sparse entries, the sparse value first where `first`.
template <typename I, typename V>
void addSparse(V* dense, const I* idx, const V* vals, uint64_t n, bool first, uint64_t base = 0) {
  if (first)
    for (uint64_t j = 0; j < n; j++) dense[idx[j] - base] = vals[j] + dense[idx[j] - base];
  else
    for (uint64_t j = 0; j < n; j++) dense[idx[j] - base] = dense[idx[j] - base] + vals[j];
}

// The union of two sorted lists, `a` the lower block's: o = a + b where
// both have an entry. Returns the union's length (written when oi is set).
template <typename I, typename V>
uint64_t mergeSparse(const I* ai, const V* av, uint64_t an, const I* bi, const V* bv, uint64_t bn, I* oi, V* ov) {
  uint64_t x = 0, y = 0, n = 0;
  while (x < an && y < bn) {
    if (ai[x] < bi[y]) {
      if (oi) oi[n] = ai[x], ov[n] = av[x];
      x++;
    } else if (bi[y] < ai[x]) {
      if (oi) oi[n] = bi[y], ov[n] = bv[y];
      y++;
    } else {
      if (oi) oi[n] = ai[x], ov[n] = av[x] + bv[y];
      x++, y++;
    }
    n++;
  }
  for (; x < an; x++, n++)
    if (oi) oi[n] = ai[x], ov[n] = av[x];
  for (; y < bn; y++, n++)
    if (oi) oi[n] = bi[y], ov[n] = bv[y];
  return n;
}

// Entries from which a partial sum over `length` values travels dense: n
// (index + value) >= length value bytes; at least 1, so an empty window
// stays sparse.
inline uint64_t denseFrom(uint64_t length, int indexBytes, size_t accBytes) {
  const unsigned __int128 per = static_cast<unsigned>(indexBytes) + accBytes;
  const uint64_t n = static_cast<uint64_t>((static_cast<unsigned __int128>(length) * accBytes + per - 1) / per);
  return n ? n : 1;
}

}  // namespace dct::coo
