// Plain, obviously-correct references and seeded inputs for kernel tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace dct::test {

inline const std::vector<size_t> kOddSizes = {0, 1, 2, 3, 7, 11, 1000003};

// Normal values with a sprinkling of exact zeros, NaN and +-Inf.
template <typename T>
std::vector<T> randomVector(size_t n, uint64_t seed, bool nonFinite = true) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> pick(0, 9999);
  std::vector<T> v(n);
  for (auto& x : v) {
    int p = pick(rng);
    x = static_cast<T>(normal(rng));
    if (p < 100) x = 0;
    if (nonFinite && p == 100) x = std::numeric_limits<T>::quiet_NaN();
    if (nonFinite && p == 101) x = std::numeric_limits<T>::infinity();
    if (nonFinite && p == 102) x = -std::numeric_limits<T>::infinity();
  }
  return v;
}

// Heavy-tailed inputs for the threshold estimators: Cauchy (max/mean ~ n)
// and a symmetric log-normal.
inline std::vector<double> cauchy(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::cauchy_distribution<double> d(0.0, 1e-3);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
inline std::vector<double> logNormal(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> d(-4.0, 2.0);
  std::bernoulli_distribution sign(0.5);
  std::vector<double> v(n);
  for (auto& x : v) x = sign(rng) ? d(rng) : -d(rng);
  return v;
}

// nnz indices below n: ascending and unique, or uniform with repeats.
template <typename I>
std::vector<I> randomIndices(size_t n, size_t nnz, bool sortedUnique, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<I> idx(nnz);
  if (sortedUnique) {
    std::vector<I> all(n);
    for (size_t i = 0; i < n; i++) all[i] = static_cast<I>(i);
    std::shuffle(all.begin(), all.end(), rng);
    idx.assign(all.begin(), all.begin() + nnz);
    std::sort(idx.begin(), idx.end());
  } else {
    std::uniform_int_distribution<size_t> pos(0, n - 1);
    for (auto& i : idx) i = static_cast<I>(pos(rng));  // repeats on purpose
  }
  return idx;
}

template <typename T>
bool sameBits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <typename T, typename I>
struct SelectResult {
  std::vector<I> indices;
  std::vector<T> values;
  std::vector<T> residual;
  size_t selected = 0;
};

// The select contract of kernels.h, written as plainly as possible.
template <typename T, typename I>
SelectResult<T, I> referenceSelect(const T* grad, std::vector<T> residual, T tau, size_t capacity) {
  SelectResult<T, I> out;
  for (size_t i = 0; i < residual.size(); i++) {
    T acc = grad ? static_cast<T>(grad[i] + residual[i]) : residual[i];
    bool take = std::isnan(acc) || std::fabs(acc) >= tau;
    residual[i] = acc;
    if (!take) continue;
    out.selected++;
    if (out.indices.size() < capacity) {
      out.indices.push_back(static_cast<I>(i));
      out.values.push_back(acc);
      residual[i] = 0;
    }
  }
  out.residual = residual;
  return out;
}

}  // namespace dct::test
