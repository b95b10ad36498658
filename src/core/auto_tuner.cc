#include "core/auto_tuner.h"

namespace dct {

AutoTuner::Decision AutoTuner::plan(double allgatherUs, double denseUs, double splitUs, uint64_t step) const {
  const double model[kSlots] = {allgatherUs, denseUs, splitUs};
  double cost[kSlots];
  int best = 0;
  for (int s = 0; s < kSlots; s++) {
    cost[s] = model[s] * tracks_[s].scale;
    if (cost[s] < cost[best]) best = s;  // ties: the lower slot
  }
  // The cheapest close loser that is due for a measurement runs instead.
  int probe = -1;
  for (int s = 0; s < kSlots; s++) {
    const Track& o = tracks_[s];
    const bool close = cost[s] < kReprobeBand * cost[best];
    const bool due = o.measured < 2 || step + 1 - o.lastStep >= kReprobeSteps;
    if (s != best && close && due && (probe < 0 || cost[s] < cost[probe])) probe = s;
  }
  if (probe >= 0) best = probe;
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
