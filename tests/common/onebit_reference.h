// A plain, single-process reference of the 1-bit compressed allreduce, written
// from the specification in src/kernels/onebit_kernels.h and independent of
// the kernels: every rank's worker step, every server's chunk step, the
// output, and the NaN rule, over all ranks' inputs at once.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "base/half_types.h"
#include "onebit_scale_reference.h"

namespace dct::test {

// Seeded normal values of any type (scaled by `scale`), with exact zeros.
template <typename T>
std::vector<T> seededValues(size_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<T> v(n);
  for (size_t i = 0; i < n; i++) {
    const double d = i % 97 == 5 ? 0.0 : normal(rng);
    if constexpr (std::is_same_v<T, double>) v[i] = d;
    else v[i] = Value<T>::store(static_cast<float>(d));
  }
  return v;
}

template <typename T>
bool sameBytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// A segment's sum of squares: the fixed-order sum over all n squares with
// those outside [lo, hi) replaced by +0.
template <typename A>
double referenceSegmentSquares(const A* x, size_t n, size_t lo, size_t hi) {
  std::vector<A> masked(n, A(0));
  for (size_t i = lo; i < hi; i++) masked[i] = x[i];
  return referenceSumOfSquares(masked.data(), n);
}

// Per element of [0, n): the scale of its segment (offsets: 0 first, n
// last, non-decreasing; empty segments have none), each segment's scale
// the rule on its own elements.
template <typename A>
std::vector<A> referenceSegmentScales(const std::vector<A>& x, const std::vector<size_t>& offsets) {
  std::vector<A> perElement(x.size());
  for (size_t s = 0; s + 1 < offsets.size(); s++) {
    const size_t lo = offsets[s], hi = offsets[s + 1];
    if (lo == hi) continue;
    const A scale = referenceScale<A>(referenceSegmentSquares(x.data(), x.size(), lo, hi), hi - lo);
    for (size_t i = lo; i < hi; i++) perElement[i] = scale;
  }
  return perElement;
}

// The whole collective over P ranks for a tensor type T; with segments
// (dctCompressorSetSegments), a worker scale per segment and a server
// scale per piece (a segment within a chunk).
template <typename T>
struct OnebitReference {
  using A = typename Value<T>::Acc;
  size_t n;
  int P;
  size_t chunk;
  std::vector<std::vector<A>> workerError, serverError;
  std::vector<A> workerScale;  // last step's, per rank (the largest segment's)
  bool nonFinite = false;      // last step's
  std::vector<size_t> segments;  // offsets; {0, n}: one segment

  OnebitReference(size_t count, int ranks)
      : n(count), P(ranks), chunk(referenceChunkLength(count, ranks)),
        workerError(ranks, std::vector<A>(count, A(0))), serverError(ranks), workerScale(ranks),
        segments{0, count} {
    for (int j = 0; j < P; j++) serverError[j].assign(length(j), A(0));
  }
  // Chunk j's pieces, from its start.
  std::vector<size_t> pieces(int j) const {
    std::vector<size_t> out{0};
    for (size_t o : segments)
      if (o > begin(j) && o < begin(j) + length(j)) out.push_back(o - begin(j));
    out.push_back(length(j));
    return out;
  }
  size_t begin(int j) const { return std::min(n, j * chunk); }
  size_t length(int j) const { return begin(j + 1) - begin(j); }

  // One step: inputs[r] is rank r's tensor; returns the output every rank
  // holds (sum: x P). Errors change only on a finite step.
  std::vector<T> step(const std::vector<std::vector<T>>& inputs, bool sum) {
    std::vector<std::vector<A>> x(P, std::vector<A>(n)), newWorker = workerError;
    std::vector<std::vector<A>> ws(P);  // per rank, each element's worker scale
    for (int r = 0; r < P; r++) {
      for (size_t i = 0; i < n; i++) x[r][i] = static_cast<A>(Value<T>::load(inputs[r][i])) + workerError[r][i];
      ws[r] = referenceSegmentScales(x[r], segments);
      workerScale[r] = A(0);
      for (A v : ws[r]) workerScale[r] = std::isnan(v) || std::isnan(workerScale[r]) ? v + workerScale[r]
                                                                                    : std::max(v, workerScale[r]);
      for (size_t i = 0; i < n; i++) newWorker[r][i] = x[r][i] - (x[r][i] >= 0 ? ws[r][i] : -ws[r][i]);
    }
    std::vector<std::vector<A>> ss(P);  // per chunk, each element's server scale
    std::vector<std::vector<A>> y(P), newServer = serverError;
    nonFinite = false;
    for (int j = 0; j < P; j++) {
      y[j].resize(length(j));
      for (size_t k = 0; k < length(j); k++) {
        const size_t i = begin(j) + k;
        A s = x[0][i] >= 0 ? ws[0][i] : -ws[0][i];
        for (int r = 1; r < P; r++) s += x[r][i] >= 0 ? ws[r][i] : -ws[r][i];
        y[j][k] = s / static_cast<A>(P) + serverError[j][k];
      }
      ss[j] = referenceSegmentScales(y[j], pieces(j));
      for (A v : ss[j]) nonFinite = nonFinite || !std::isfinite(v);
      for (size_t k = 0; k < length(j); k++)
        newServer[j][k] = y[j][k] - (y[j][k] >= 0 ? ss[j][k] : -ss[j][k]);
    }
    std::vector<T> out(n);
    for (int j = 0; j < P; j++)
      for (size_t k = 0; k < length(j); k++) {
        const A s = y[j][k] >= 0 ? ss[j][k] : -ss[j][k];
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
