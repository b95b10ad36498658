#include "core/auto_tuner.h"

namespace dct {

AutoTuner::Decision AutoTuner::plan(Modelled allgather, Modelled dense, Modelled split, uint64_t step) const {
  const Modelled model[kSlots] = {allgather, dense, split};
  double cost[kSlots];
  int best = 0;
  for (int s = 0; s < kSlots; s++) {
    const Modelled& m = model[s];
    // Unmeasured: its own local work as modelled, its wire at the links' measured pace.
    cost[s] = tracks_[s].measured >= 2 ? m.us * tracks_[s].scale : m.us + m.wireUs * (link_.scale - 1);
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

void AutoTuner::commit(const Decision& d, double slowestPrevUs, uint64_t step, double slowestLocalUs) {
  learn(slowestPrevUs, slowestLocalUs);
  if (d.slot >= 0) tracks_[d.slot].lastStep = step + 1;
  pending_ = d;
}

void AutoTuner::Track::learn(double ratio) {
  // The first run pays first-touch costs (buffers, MPI internals): skip it.
  if (++measured == 1) return;
  scale = measured == 2 ? ratio : 0.5 * scale + 0.5 * ratio;
}

void AutoTuner::learn(double slowestUs, double localUs) {
  const Modelled& m = pending_.model;
  if (pending_.slot < 0 || slowestUs <= 0 || m.us <= 0) return;
  tracks_[pending_.slot].learn(slowestUs / m.us);
  if (m.wireUs > 0 && localUs > 0 && localUs < slowestUs) link_.learn((slowestUs - localUs) / m.wireUs);
}

}  // namespace dct
