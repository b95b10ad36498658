// The 1-bit scale as specified (src/kernels/onebit_kernels.h), written
// plainly and with no library header, so the tests' reference and
// dct_perf's replay check share it: squares in fp64, a fixed-order halving
// tree, sqrt(sumsq / len), and the word-aligned chunk length.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace dct::test {

// The fixed-order sum of squares: squares in fp64, then groups of 32
// consecutive values summed by the halving tree, level after level, until
// one value is left (zeros pad every group).
inline double referenceHalvingSum(std::vector<double> v) {
  if (v.empty()) return 0.0;
  while (v.size() > 1) {
    std::vector<double> next((v.size() + 31) / 32);
    for (size_t g = 0; g < next.size(); g++) {
      double t[32];
      for (size_t k = 0; k < 32; k++) t[k] = g * 32 + k < v.size() ? v[g * 32 + k] : 0.0;
      for (int s = 16; s > 0; s /= 2)
        for (int i = 0; i < s; i++) t[i] += t[i + s];
      next[g] = t[0];
    }
    v.swap(next);
  }
  return v[0];
}

template <typename A>
double referenceSumOfSquares(const A* x, size_t n) {
  std::vector<double> sq(n);
  for (size_t i = 0; i < n; i++) {
    volatile double d = static_cast<double>(x[i]);  // no FMA with the tree's adds
    volatile double p = d * d;
    sq[i] = p;
  }
  return referenceHalvingSum(sq);
}

// scale = sqrt(sumsq / len) rounded to A; 0 for len 0; NaN if not finite.
template <typename A>
A referenceScale(double sumOfSquares, size_t len) {
  if (len == 0) return A(0);
  const A s = static_cast<A>(std::sqrt(sumOfSquares / static_cast<double>(len)));
  return std::isfinite(s) ? s : std::numeric_limits<A>::quiet_NaN();
}

inline size_t referenceChunkLength(size_t n, int ranks) {
  const size_t words = (n + 31) / 32;
  return 32 * ((words + ranks - 1) / ranks);
}

}  // namespace dct::test
