#include "core/auto_tuner.h"

#include <cmath>

namespace dct {

AutoTuner::Decision AutoTuner::plan(double allgatherUs, double denseUs, double splitUs, uint64_t step) const {
  const double model[kSlots] = {allgatherUs, denseUs, splitUs};
  // An algorithm not yet measured warm borrows half (in log terms) of how
  // far off the model is for the measured ones: their links and cores are
  // its too. The model's default 10 Gbit/s link put dense within the probe
  // band on 1 Gbit/s links, where each probe cost ~20 sparse steps.
  double borrowed = 0;
  for (const Track& t : tracks_)
    if (t.measured >= 2 && (borrowed == 0 || t.scale < borrowed)) borrowed = t.scale;
  borrowed = borrowed > 0 ? std::sqrt(borrowed) : 1.0;
  double cost[kSlots];
  int best = 0;
  for (int s = 0; s < kSlots; s++) {
    cost[s] = model[s] * (tracks_[s].measured >= 2 ? tracks_[s].scale : borrowed);
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
