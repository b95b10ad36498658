// Auto's choice among allgather, dense, split and (where the config allows
// it) global top-k for one tensor: the cost
// model predicts, the measured step times correct it. Each plan's cost is
// its model times the median ratio measured/modelled of its recent warm
// steps. The tuner measures every plan the model puts close to the best,
// runs the cheapest, and re-measures close losers now and then.
//
// Planning is pure (a failed step leaves the tuner as it was), and every
// input is identical on all ranks (gathered counts, the slowest rank's
// time), so every rank plans the same. docs/design.md gives each rule and
// constant below its reason and the measurement behind it.
#pragma once

#include <cstdint>

#include "dct/dct.h"

namespace dct {

class AutoTuner {
 public:
  static constexpr int kPlans = 4;  // allgather, dense, split, global top-k

  // A plan's cost as the model predicts it: the whole step, and the part on
  // links whose rate is a guess (0 where the comm measured them).
  struct Modelled {
    double us = 0, wireUs = 0;
    bool available = true;  // false: never run
  };
  enum class Why : uint8_t { Winner, Streak, Explore, Remeasure };
  struct Decision {
    int slot = -1;  // -1: not an auto step
    Modelled model;
    Why why = Why::Winner;
    bool measuring() const { return why != Why::Winner; }
    dctAlgorithm_t algorithm() const {
      return slot == 1 ? dctAlgoDense : slot == 2 ? dctAlgoSplit : slot == 3 ? dctAlgoGlobalTopk : dctAlgoAllgather;
    }
  };

  // This step's plan; changes nothing. Global top-k is a candidate only
  // when the config allows it (available).
  Decision plan(Modelled allgather, Modelled dense, Modelled split, uint64_t step,
                Modelled global = Modelled{0, 0, false}) const;
  // The step ran: learn the previous step's time on the slowest rank and
  // the part of it that rank spent on its own work (0: unknown), and keep
  // this step's decision until its time arrives with the next step.
  void commit(const Decision& d, double slowestPrevUs, uint64_t step, double slowestLocalUs = 0);
  double scale(dctAlgorithm_t algo) const { return plans_[slot(algo)].median(); }
  double linkScale() const { return link_.median(); }

  // The rules' constants (docs/design.md, "The auto tuner").
  static constexpr int kWindow = 7;            // a cost is the median of this many warm samples
  static constexpr int kStreak = 2;            // warm samples a measuring run takes
  static constexpr int kExtendedStreak = 3;    // ... while they disagree and the best of them would win
  static constexpr double kDisagree = 1.5;     // samples disagree when one is this many times another
  static constexpr double kCloseBand = 1.5;    // plans within this factor of the best are measured
  static constexpr double kColdOver = 4;       // a warm run costs at least cold / kColdOver
  static constexpr double kMargin = 0.05;      // the winner yields only to a plan this much cheaper
  static constexpr double kPaybackSteps = 10;  // ... that repays its switch within this many steps
  static constexpr uint64_t kRemeasureSteps = 100;

 private:
  // What the tuner knows of one plan, as ratios measured / modelled.
  struct Track {
    double samples[kWindow] = {};  // its last warm samples, a ring
    int count = 0, next = 0;       // count saturates at kWindow
    bool stale = false;            // a re-measurement began: the next warm sample restarts the ring
    uint64_t runs = 0;             // times learned
    uint64_t lastStep = 0;         // the step it last ran, + 1 (0: never)
    double coldRatio = 0;          // its last cold run (0: none)
    double coldLeast = 0;          // its least cold run: a floor for warm ones (0: none)
    double median() const;         // 1 until sampled
    double least() const;
    bool disagree() const;
    void learn(double ratio, bool cold, bool floors);
  };
  static int slot(dctAlgorithm_t algo) {
    return algo == dctAlgoDense ? 1 : algo == dctAlgoSplit ? 2 : algo == dctAlgoGlobalTopk ? 3 : 0;
  }
  void learn(double slowestUs, double localUs);

  Track plans_[kPlans];
  Track link_;            // (slowest step - its own work) / modelled wire, on every warm step
  Decision pending_;      // the last committed decision, awaiting its time
  bool pendingCold_ = false;    // it switched plan
  bool pendingReturn_ = false;  // ... back from a measuring run
  int winner_ = -1;             // the slot of the last step that was not measuring
  int firstSlot_ = -1;          // the first plan explored, measured in the tensor's start-up
  bool firstRedone_ = false;    // ... and measured again since (or won a step)
};

}  // namespace dct
