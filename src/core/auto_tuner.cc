#include "core/auto_tuner.h"

namespace dct {

dctAlgorithm_t AutoTuner::plan(double allgatherUs, double denseUs, uint64_t step) {
  const double model[2] = {allgatherUs, denseUs};
  const double cost[2] = {allgatherUs * tracks_[0].scale, denseUs * tracks_[1].scale};
  int best = cost[0] <= cost[1] ? 0 : 1;
  const int other = 1 - best;
  const Track& o = tracks_[other];
  const bool close = cost[other] < kReprobeBand * cost[best];
  const bool due = o.measured < 2 || step + 1 - o.lastStep >= kReprobeSteps;
  if (close && due) best = other;
  tracks_[best].lastStep = step + 1;
  current_ = best;
  currentModelUs_ = model[best];
  return best == 1 ? dctAlgoDense : dctAlgoAllgather;
}

void AutoTuner::learn(double slowestUs) {
  if (pending_ < 0 || slowestUs <= 0 || pendingModelUs_ <= 0) return;
  Track& t = tracks_[pending_];
  // The first run pays first-touch costs (buffers, MPI internals): skip it.
  if (++t.measured == 1) return;
  const double ratio = slowestUs / pendingModelUs_;
  t.scale = t.measured == 2 ? ratio : 0.5 * t.scale + 0.5 * ratio;
  pending_ = -1;
}

void AutoTuner::endStep() {
  pending_ = current_;
  pendingModelUs_ = currentModelUs_;
  current_ = -1;
}

}  // namespace dct
