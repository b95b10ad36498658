// Starvation, shared by the workers' compressors (compressor.cc) and the
// global top-k owners (global_topk.cc): a stale tau that selects nothing
// while it could select less than everything (above the floor) leaves the
// residual's mass waiting for the next scheduled estimate, up to L steps
// (a count of 0 is inside the drift band's noise width for k <= 9, and
// outside it the owner re-estimated at its k only). Such a starved step
// estimates and selects again at once; each further starved step in a row
// (zero gradients: the residual is all there is) aims kDrainGrowth times
// higher, so a residual drains in a few steps rather than k entries a step.
#pragma once

#include <cstdint>

namespace dct {

constexpr double kDrainGrowth = 8;

inline bool starvedSelection(uint64_t selected, double tau, double minTau) { return selected == 0 && tau > minTau; }

}  // namespace dct
