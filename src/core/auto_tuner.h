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
//
// An algorithm not yet measured shares the links of the measured ones but
// not their compute: the part of the slowest rank's step spent outside its
// own local work (waiting, on the wire), over the model's wire part, is a
// link scale common to all, applied to the unmeasured algorithm's wire
// part. (The model's default link is 10 Gbit/s: on 1 Gbit/s links the bare
// model put dense within the probe band, each probe costing ~20 sparse
// steps; a scale borrowed whole from the sparse steps, whose error on shared
// memory is compute, kept dense from ever being measured where it won.)
// Tensors no larger than what the comm's link probe timed (MPI:
// link_probe.h) skip the scale: their model starts from the measured links,
// and on small steps the time outside local work is mostly waiting for the
// slowest rank, which made the scale 20x at 1 MiB on shared memory.
#pragma once

#include <cstdint>

#include "dct/dct.h"

namespace dct {

class AutoTuner {
 public:
  // Slots: allgather, dense, split.
  static constexpr int kSlots = 3;
  // The model's cost of one algorithm, and the part of it on links whose
  // rate is a guess (0 where the comm measured them: link_probe.h).
  struct Modelled {
    double us = 0, wireUs = 0;
    bool available = true;  // false: never planned, explored nor re-measured
  };
  // A plan and what the model predicted for it; planning changes nothing.
  struct Decision {
    int slot = -1;  // -1: not an auto step
    Modelled model;
    bool measuring = false;  // exploring or re-measuring a loser, not the winner's step
    dctAlgorithm_t algorithm() const {
      return slot == 1 ? dctAlgoDense : slot == 2 ? dctAlgoSplit : dctAlgoAllgather;
    }
  };
  // The plan for this step from the model's costs of the three algorithms.
  Decision plan(Modelled allgather, Modelled dense, Modelled split, uint64_t step) const;
  // A step committed: learn the slowest rank's wall time of the previous
  // step and the part of it that rank spent on its own local work (0:
  // unknown), then remember this step's decision to learn its time.
  void commit(const Decision& d, double slowestPrevUs, uint64_t step, double slowestLocalUs = 0);
  double scale(dctAlgorithm_t algo) const { return tracks_[slot(algo)].scale(); }
  double linkScale() const { return link_.scale(); }

  // An algorithm's scale is the median of its last kSamples warm steps. One
  // step on a shared machine can take 2x its neighbours (a rank descheduled,
  // error feedback's transient, the first run of a chunking), and a single
  // such sample used to lock a loser out until its next re-measurement.
  static constexpr int kSamples = 3;
  // Samples come in streaks: a cold run (the first after a switch), then
  // kStreak warm steps in a row (a majority of the window), so a
  // re-measured loser's streak outvotes its stale samples. Every close
  // algorithm gets a first streak (three algorithms fit in ten warm-up
  // steps); one whose best sample would beat the winner gets a second, so a
  // single slow early step cannot rule it out. Only when its samples
  // disagree (one kDisagree times another): samples that agree are its
  // cost. Near a tie (2 ranks at 1 MiB: three plans at 150-410 us a step)
  // every plan's best sample beat some median, and the second streaks ran
  // exploration to step 16, past a benchmark's 10 warm-ups.
  static constexpr int kStreak = kSamples / 2 + 1;
  static constexpr double kDisagree = 1.5;
  // A cold run is not a sample: it prices the switch. A sparse step after
  // dense re-estimates tau (dense zeroed the residual) and runs unpipelined
  // (no chunk history); any switch touches cold buffers: at 64 KiB on 4
  // ranks a cold allgather step took 380-580 us against 210-240 warm. The
  // window used to hold cold and warm samples alike, and two algorithms
  // within a few percent of each other traded places every streak, paying
  // the switch each time. Now the winner keeps the step unless another is
  // kHysteresis cheaper (medians of 3 noisy samples cross at random) and
  // saves its switch's extra cost back within kPaybackSteps. A
  // re-measurement is no switch of winner: after it the cheapest wins
  // (going back is part of what measuring costs). In that test the winner,
  // which runs every step, is priced at the median of its last
  // kSteadySamples warm steps: two slow steps in three (a rank descheduled,
  // a burst of the emulated network's kernel work) raised allgather's
  // window median 2-3x at 64 MiB and 1% on 1 Gbit/s links and handed the
  // steps to split at twice allgather's time until its next re-measurement.
  // (Its best recent sample instead kept a winner 15% slower near a tie.)
  // A winner that really slowed down loses the step once most of those
  // have.
  static constexpr int kSteadySamples = 7;
  static_assert(kSteadySamples >= kSamples, "the steady window holds the last window's samples");
  static constexpr double kPaybackSteps = 10;
  static constexpr double kHysteresis = 0.05;
  // A warm run costs at least 1/kColdOver of a cold one (traced: up to 2.8x
  // at 64 KiB on 4 ranks, 5.4x for split's first run at 16 MiB, 30%), so an
  // unmeasured algorithm whose cold run already prices it out of the close
  // band stops exploring and is not re-measured: split and allgather at
  // 16 MiB, 30% on 4 ranks were modelled at 25 ms against dense's measured
  // 17 and each took a cold run and a streak at 70-380 ms a step (0.24x of
  // dense over the timed steps). Wrongly ruled out it can only be where its
  // cold run is over kColdOver * kReprobeBand times its warm one. The
  // first step the tuner learns (the comm's and buffers' first touch) sets
  // no floor.
  static constexpr double kColdOver = 4;
  // Re-measure a losing algorithm every kReprobeSteps while its scaled cost
  // is within kReprobeBand of the chosen one's: a cold run and a streak,
  // ~3% of steps per close loser.
  static constexpr uint64_t kReprobeSteps = 100;
  static constexpr double kReprobeBand = 1.5;

 private:
  struct Track {
    // Its last kSteadySamples warm measured/modelled ratios, a ring; the
    // window is the last kSamples of them.
    double samples[kSteadySamples] = {};
    int sampled = 0, next = 0;  // sampled saturates at kSteadySamples
    int filled() const { return sampled < kSamples ? sampled : kSamples; }  // the window's
    int streak = 0;         // warm samples learned since it last took over
    uint64_t runs = 0;      // times learned (the first, cold, is not sampled)
    uint64_t lastStep = 0;  // step it last ran, + 1 (0: never)
    double coldRatio = 0;   // the last cold run's measured/modelled ratio (0: none yet)
    double coldLeast = 0;   // the least cold (or first) run's ratio (0: none yet)
    double scale() const;   // the window's median; 1 until sampled
    double hope() const;    // the best sample while the window fills with disagreeing samples, else the median
    double steady() const;  // the median of all samples, once more than the window's; else scale()
    void learn(double ratio, bool cold, bool floors);
    // The least its warm runs can cost, as a ratio to the model: 0 until a cold run.
    double floor() const { return coldLeast / kColdOver; }
    // What a switch to it costs beyond a warm step (0 until known).
    double switchUs(const Modelled& m) const;
  };
  static int slot(dctAlgorithm_t algo) { return algo == dctAlgoDense ? 1 : algo == dctAlgoSplit ? 2 : 0; }
  Track tracks_[kSlots];
  Track link_;  // (step - local work) / modelled wire, over every warm step
  void learn(double slowestUs, double localUs);
  Decision pending_;  // last committed step's decision, awaiting its time
  bool pendingCold_ = false;  // whether that step switched algorithm
  bool pendingReturn_ = false;  // ... from a measuring step
  int winner_ = -1;           // the slot of the last step that was not measuring
  // The first algorithm explored runs in the tensor's start-up: error
  // feedback's overshoot (1.4x the steady count at 64 MiB, 1%), tau's first
  // re-estimates, first touches. Traced on 2 ranks at 64 MiB, 1%: allgather
  // took 32-33 ms a step there against 12-16 once settled, lost to dense's
  // 24 and ran dense until its re-measurement 100 steps later (3 runs in
  // 55). If it loses while close, it is re-measured once right after the
  // others' first streaks.
  int firstSlot_ = -1;
  bool firstRedone_ = false;  // measured again since its first streak, or won a step
};

}  // namespace dct
