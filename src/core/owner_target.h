// How much of the summed gradient the global top-k owners deliver a step
// (global_topk.cc), and what the cost model prices for it (cost_model.cc).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace dct {

// Each owner aims at kOwnerTargetScale x density x its range, so a step
// delivers about 4k entries of the sum (allgather delivers the union, up to
// P k). The allgather phase carries 4x more than at k. Measured in
// examples/dp_fashion_mnist (8 ranks, 10 epochs, three seeds, results/
// global-topk-8ranks-owner-target): see docs/global_topk.md.
constexpr double kOwnerTargetScale = 4;

// The owner's share of the step's delivery, a density (1: every nonzero).
inline double ownerDensity(double density) { return std::min(1.0, kOwnerTargetScale * density); }

// Entries an owner of `length` aims at: at least 1.
inline size_t ownerRangeTarget(double density, size_t length) {
  const double k = std::round(ownerDensity(density) * static_cast<double>(length));
  return k < 1 ? 1 : static_cast<size_t>(k);
}

}  // namespace dct
