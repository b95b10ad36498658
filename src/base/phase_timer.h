// Lap timer for a collective's phases (dctPhase_t): each lap charges the
// time since the previous one to a phase, so the phases add up to the call.
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
  double us(dctPhase_t phase) const { return us_[phase]; }
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
};

}  // namespace dct
