// A plain, single-process reference of the 1-bit compressed allreduce, written
// from the specification in src/kernels/onebit_kernels.h and independent of
// the kernels: every rank's worker step, every server's chunk step, the
// output, and the NaN rule, over all ranks' inputs at once.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
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
