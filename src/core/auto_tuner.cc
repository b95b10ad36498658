#include "core/auto_tuner.h"

namespace dct {

AutoTuner::Decision AutoTuner::plan(double allgatherUs, double denseUs, uint64_t step) const {
  const double model[2] = {allgatherUs, denseUs};
  const double cost[2] = {allgatherUs * tracks_[0].scale, denseUs * tracks_[1].scale};
  int best = cost[0] <= cost[1] ? 0 : 1;
  const int other = 1 - best;
  const Track& o = tracks_[other];
  const bool close = cost[other] < kReprobeBand * cost[best];
  const bool due = o.measured < 2 || step + 1 - o.lastStep >= kReprobeSteps;
  if (close && due) best = other;
  return Decision{best, model[best]};
}

void AutoTuner::commit(const Decision& d, double slowestPrevUs, uint64_t step) {
  learn(slowestPrevUs);
  if (d.slot >= 0) tracks_[d.slot].lastStep = step + 1;
  pending_ = d;
}

void AutoTuner::learn(double slowestUs) {
  if (pending_.slot < 0 || slowestUs <= 0 || pending_.modelUs <= 0) return;
  Track& t = tracks_[pending_.slot];
  // The first run pays first-touch costs (buffers, MPI internals): skip it.
  if (++t.measured == 1) return;
  const double ratio = slowestUs / pending_.modelUs;
  t.scale = t.measured == 2 ? ratio : 0.5 * t.scale + 0.5 * ratio;
}

}  // namespace dct
