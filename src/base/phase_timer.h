// Lap timer for a collective's phases (dctPhase_t): each lap charges the
// time since the previous one to a phase, so the phases add up to the call.
// Laps that end when every rank has arrived (a header gather returned) are
// also kept apart as waiting: auto times a step without them.
#pragma once

#include <chrono>

#include "dct/dct.h"

namespace dct {

class PhaseTimer {
 public:
  using Clock = std::chrono::steady_clock;
  PhaseTimer() : last_(Clock::now()) {}
  void lap(dctPhase_t phase) {
    const Clock::time_point now = Clock::now();
    us_[phase] += std::chrono::duration<double, std::micro>(now - last_).count();
    last_ = now;
  }
  // A lap of dctPhaseAgree that ends as every rank has arrived: this rank's
  // wait for the others (and the gather that told it), or, with auto on a
  // device, for the caller's work already queued on the stream.
  void lapWaiting() {
    const double before = us_[dctPhaseAgree];
    lap(dctPhaseAgree);
    waitingUs_ += us_[dctPhaseAgree] - before;
  }
  double us(dctPhase_t phase) const { return us_[phase]; }
  double waitingUs() const { return waitingUs_; }
  double totalUs() const {
    double sum = 0;
    for (double us : us_) sum += us;
    return sum;
  }
  // Copies the laps into a step's and the running totals' fields.
  void record(double* step, double* total) const {
    for (int p = 0; p < dctNumPhases; p++) {
      step[p] = us_[p];
      total[p] += us_[p];
    }
  }

 private:
  Clock::time_point last_;
  double us_[dctNumPhases] = {};
  double waitingUs_ = 0;  // of us_[dctPhaseAgree]: the lapWaiting() laps
};

}  // namespace dct
