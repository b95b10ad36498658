// A plain, single-process reference of the 1-bit compressed allreduce, written
// from the specification in src/kernels/onebit_kernels.h and independent of
// the kernels: every rank's worker step, every server's chunk step, the
// output, and the NaN rule, over all ranks' inputs at once.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "base/half_types.h"

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

// The whole collective over P ranks for a tensor type T.
template <typename T>
struct OnebitReference {
  using A = typename Value<T>::Acc;
  size_t n;
  int P;
  size_t chunk;
  std::vector<std::vector<A>> workerError, serverError;
  std::vector<A> workerScale;  // last step's, per rank
  bool nonFinite = false;      // last step's

  OnebitReference(size_t count, int ranks)
      : n(count), P(ranks), chunk(referenceChunkLength(count, ranks)),
        workerError(ranks, std::vector<A>(count, A(0))), serverError(ranks), workerScale(ranks) {
    for (int j = 0; j < P; j++) serverError[j].assign(length(j), A(0));
  }
  size_t begin(int j) const { return std::min(n, j * chunk); }
  size_t length(int j) const { return begin(j + 1) - begin(j); }

  // One step: inputs[r] is rank r's tensor; returns the output every rank
  // holds (sum: x P). Errors change only on a finite step.
  std::vector<T> step(const std::vector<std::vector<T>>& inputs, bool sum) {
    std::vector<std::vector<A>> x(P, std::vector<A>(n)), newWorker = workerError;
    for (int r = 0; r < P; r++) {
      for (size_t i = 0; i < n; i++) x[r][i] = static_cast<A>(Value<T>::load(inputs[r][i])) + workerError[r][i];
      workerScale[r] = referenceScale<A>(referenceSumOfSquares(x[r].data(), n), n);
      for (size_t i = 0; i < n; i++) newWorker[r][i] = x[r][i] - (x[r][i] >= 0 ? workerScale[r] : -workerScale[r]);
    }
    std::vector<A> serverScale(P);
    std::vector<std::vector<A>> y(P), newServer = serverError;
    nonFinite = false;
    for (int j = 0; j < P; j++) {
      y[j].resize(length(j));
      for (size_t k = 0; k < length(j); k++) {
        const size_t i = begin(j) + k;
        A s = x[0][i] >= 0 ? workerScale[0] : -workerScale[0];
        for (int r = 1; r < P; r++) s += x[r][i] >= 0 ? workerScale[r] : -workerScale[r];
        y[j][k] = s / static_cast<A>(P) + serverError[j][k];
      }
      serverScale[j] = referenceScale<A>(referenceSumOfSquares(y[j].data(), y[j].size()), y[j].size());
      nonFinite = nonFinite || !std::isfinite(serverScale[j]);
      for (size_t k = 0; k < length(j); k++)
        newServer[j][k] = y[j][k] - (y[j][k] >= 0 ? serverScale[j] : -serverScale[j]);
    }
    std::vector<T> out(n);
    for (int j = 0; j < P; j++)
      for (size_t k = 0; k < length(j); k++) {
        const A s = y[j][k] >= 0 ? serverScale[j] : -serverScale[j];
        out[begin(j) + k] = nonFinite ? Value<T>::store(std::numeric_limits<A>::quiet_NaN())
                                      : Value<T>::store(sum ? s * static_cast<A>(P) : s);
      }
    if (!nonFinite) {
      workerError.swap(newWorker);
      serverError.swap(newServer);
    }
    return out;
  }
};

}  // namespace dct::test
