// How much of the summed gradient the global top-k owners deliver a step
// (global_topk.cc), and what the cost model prices for it (cost_model.cc).
#pragma once

namespace dct {

// Each owner aims at kOwnerTargetScale x density x its range, so a step
// delivers about 4k entries of the sum (allgather delivers the union, up to
// P k). The allgather phase carries 4x more than at k. Measured in
// examples/dp_fashion_mnist (8 ranks, 10 epochs, three seeds, results/
// global-topk-8ranks-owner-target): see docs/global_topk.md.
constexpr double kOwnerTargetScale = 4;

}  // namespace dct
