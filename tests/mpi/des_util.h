// Shared by the DES tests: every rank's seeded partial rows and gradients,
// rebuilt identically anywhere, in any of the four datatypes, and the plain
// dense reduce-scatter reference (rank order from +0 in the accumulation
// type, rounded once).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "../common/half_reference.h"
#include "dct/dct.h"

namespace dcttest::des {

// Storage and accumulation types of a datatype, with the reference
// conversions (written apart from the library's).
template <dctDataType_t DT>
struct Ty {
  using S = float;
  using Acc = float;
  static S from(double x) { return static_cast<float>(x); }
  static Acc load(S s) { return s; }
  static S store(Acc a) { return a; }
};
template <>
struct Ty<dctFloat64> {
  using S = double;
  using Acc = double;
  static S from(double x) { return x; }
  static Acc load(S s) { return s; }
  static S store(Acc a) { return a; }
};
template <>
struct Ty<dctFloat16> {
  using S = uint16_t;
  using Acc = float;
  static S from(double x) { return refFloatToHalf(static_cast<float>(x)); }
  static Acc load(S s) { return refHalfToFloat(s); }
  static S store(Acc a) { return refFloatToHalf(a); }
};
template <>
struct Ty<dctBFloat16> {
  using S = uint16_t;
  using Acc = float;
  static S from(double x) { return refFloatToBf16(static_cast<float>(x)); }
  static Acc load(S s) { return refBf16ToFloat(s); }
  static S store(Acc a) { return refFloatToBf16(a); }
};

// Global row g of rank p's partials: zero with probability `zeros` (some of
// those hold -0 entries), else normals with some exact zeros, and now and
// then a NaN or an Inf.
template <dctDataType_t DT>
std::vector<typename Ty<DT>::S> partialRow(int p, size_t g, size_t d, uint64_t seed, double zeros) {
  std::mt19937_64 rng(seed * 1000003 + static_cast<uint64_t>(p) * 7919 + g);
  std::uniform_real_distribution<double> u;
  std::normal_distribution<double> normal;
  std::vector<typename Ty<DT>::S> row(d);
  const bool zero = u(rng) < zeros;
  const double special = u(rng);
  for (size_t j = 0; j < d; j++) {
    double x = zero ? (u(rng) < 0.3 ? -0.0 : 0.0) : (u(rng) < 0.2 ? 0.0 : normal(rng) * 4);
    if (!zero && j == d / 2 && special < 0.08) x = special < 0.04 ? std::numeric_limits<double>::quiet_NaN()
                                                                  : -std::numeric_limits<double>::infinity();
    row[j] = Ty<DT>::from(x);
  }
  return row;
}

template <dctDataType_t DT>
std::vector<typename Ty<DT>::S> partials(int p, size_t rows, size_t d, uint64_t seed, double zeros) {
  std::vector<typename Ty<DT>::S> v;
  for (size_t g = 0; g < rows; g++) {
    const auto row = partialRow<DT>(p, g, d, seed, zeros);
    v.insert(v.end(), row.begin(), row.end());
  }
  return v;
}

template <typename S>
bool zeroRow(const S* row, size_t d) {
  for (size_t j = 0; j < d; j++) {
    if constexpr (sizeof(S) == 2) {
      if ((row[j] & 0x7fff) != 0) return false;
    } else if (!(row[j] == 0)) {  // NaN fails the test: non-zero
      return false;
    }
  }
  return true;
}

// The owner's sums of rows [begin, end): every rank's partial, rank order,
// from +0.
template <dctDataType_t DT>
std::vector<typename Ty<DT>::S> referenceSums(int P, size_t begin, size_t end, size_t d, uint64_t seed,
                                              double zeros) {
  std::vector<typename Ty<DT>::S> out;
  for (size_t g = begin; g < end; g++) {
    std::vector<typename Ty<DT>::Acc> acc(d, 0);
    for (int p = 0; p < P; p++) {
      const auto row = partialRow<DT>(p, g, d, seed, zeros);
      for (size_t j = 0; j < d; j++) acc[j] = acc[j] + Ty<DT>::load(row[j]);
    }
    for (size_t j = 0; j < d; j++) out.push_back(Ty<DT>::store(acc[j]));
  }
  return out;
}

// The gradient of the summed rows of the owner of row g (seeded per row).
template <dctDataType_t DT>
std::vector<typename Ty<DT>::S> gradRows(size_t begin, size_t end, size_t d, uint64_t seed) {
  std::vector<typename Ty<DT>::S> v;
  for (size_t g = begin; g < end; g++) {
    std::mt19937_64 rng(seed * 31 + g);
    std::normal_distribution<double> normal;
    for (size_t j = 0; j < d; j++) v.push_back(Ty<DT>::from(normal(rng)));
  }
  return v;
}

}  // namespace dcttest::des
