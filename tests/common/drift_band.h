// The drift band of DCT-DP's threshold, written apart from the library's
// (src/core/compressor.cc) so that a bug they share cannot cancel out. A
// count outside [driftLow, driftHigh] around its target k re-estimates (or
// tightens) tau before the next step; one past runawayBound is re-selected
// in the same step. Counts near a small k are noisy (about sqrt(k) either
// way), so the band is never narrower than 3 sqrt(k) on either side.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace dcttest {

inline double driftLow(double k) { return std::min(k / 1.25, k - 3 * std::sqrt(k)); }
inline double driftHigh(double k) { return std::max(k * 1.25, k + 3 * std::sqrt(k)); }
inline double runawayBound(double k) { return std::max(2 * k, k + 6 * std::sqrt(k)); }
// A stale tau that selects nothing (above the floor) estimates again in the
// same step, aimed at k; the run-th such step in a row (run >= 1) at
// k 8^run, at most 64 (and n), so a small tensor drains in a few steps.
inline size_t drainTarget(size_t k, size_t n, int run) {
  size_t aim = k;
  for (int i = 0; i < run && aim < 64; i++) aim *= 8;
  return std::min(n, run == 0 ? k : std::max<size_t>(k, std::min<size_t>(aim, 64)));
}

}  // namespace dcttest
