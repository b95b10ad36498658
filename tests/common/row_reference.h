// Plain references of the DCT-MP row selection, independent of the kernels:
// rank a row's columns by (non-finite first, then |x| descending, then
// column ascending) with a full sort and keep the first k; a row with at
// least k non-finite entries keeps exactly those. Threshold: !(|x| < tau).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <vector>

namespace dct::test {

template <typename T>
std::vector<bool> referenceTopK(const T* row, size_t d, size_t k) {
  std::vector<bool> keep(d, false);
  size_t nf = 0;
  for (size_t j = 0; j < d; j++) nf += !std::isfinite(row[j]);
  if (nf >= std::min(k, d)) {
    for (size_t j = 0; j < d; j++) keep[j] = !std::isfinite(row[j]);
    return keep;
  }
  std::vector<size_t> order(d);
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const bool fa = std::isfinite(row[a]), fb = std::isfinite(row[b]);
    if (fa != fb) return !fa;
    if (fa && std::fabs(row[a]) != std::fabs(row[b])) return std::fabs(row[a]) > std::fabs(row[b]);
    return a < b;
  });
  for (size_t m = 0; m < std::min(k, d); m++) keep[order[m]] = true;
  return keep;
}

template <typename T>
std::vector<bool> referenceThreshold(const T* row, size_t d, double tau) {
  std::vector<bool> keep(d);
  for (size_t j = 0; j < d; j++) keep[j] = !(std::fabs(row[j]) < static_cast<T>(tau));
  return keep;
}

// The row as the receiver sees it: kept entries, zeros elsewhere.
template <typename T>
std::vector<T> maskedRow(const T* row, const std::vector<bool>& keep) {
  std::vector<T> out(keep.size(), T(0));
  for (size_t j = 0; j < keep.size(); j++)
    if (keep[j]) out[j] = row[j];
  return out;
}

}  // namespace dct::test
