// Auto's memory: the alpha-beta model predicts, measurement corrects.
//
// The model knows bytes and link rates but not this machine's compute
// contention (4 ranks sharing 2 cores made the allgather plan 2x slower than
// dense at density 10% while the model called it cheaper). So every auto
// step's wall time on the slowest rank, learned from the next step's count
// exchange, is divided by what the model predicted for it: a per-algorithm
// scale. Plans compare scaled costs, and now and then re-measure the loser
// while it is close. Every input is identical on all ranks (gathered times,
// gathered counts), so every rank plans the same.
#pragma once

#include <cstdint>

#include "dct/dct.h"

namespace dct {

class AutoTuner {
 public:
  // Slots: allgather, dense, split.
  static constexpr int kSlots = 3;
  // A plan and what the model predicted for it; planning changes nothing.
  struct Decision {
    int slot = -1;  // -1: not an auto step
    double modelUs = 0;
    dctAlgorithm_t algorithm() const {
      return slot == 1 ? dctAlgoDense : slot == 2 ? dctAlgoSplit : dctAlgoAllgather;
    }
  };
  // The plan for this step from the model's costs of the three algorithms.
  Decision plan(double allgatherUs, double denseUs, double splitUs, uint64_t step) const;
  // A step committed: learn the slowest rank's wall time of the previous
  // step (0: unknown), then remember this step's decision to learn its time.
  void commit(const Decision& d, double slowestPrevUs, uint64_t step);
  double scale(dctAlgorithm_t algo) const { return tracks_[slot(algo)].scale; }

  // Re-measure a losing algorithm every kReprobeSteps while its scaled cost
  // is within kReprobeBand of the chosen one's: at most ~1% of steps per
  // close loser (two: ~2%).
  static constexpr uint64_t kReprobeSteps = 100;
  static constexpr double kReprobeBand = 1.5;

 private:
  struct Track {
    double scale = 1.0;     // measured / modelled; 1 until measured warm
    uint64_t measured = 0;  // times learned (the first, cold, is not used)
    uint64_t lastStep = 0;  // step it last ran, + 1 (0: never)
  };
  static int slot(dctAlgorithm_t algo) { return algo == dctAlgoDense ? 1 : algo == dctAlgoSplit ? 2 : 0; }
  Track tracks_[kSlots];
  void learn(double slowestUs);
  Decision pending_;  // last committed step's decision, awaiting its time
};

}  // namespace dct
