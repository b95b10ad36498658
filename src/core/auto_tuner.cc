#include "core/auto_tuner.h"

#include <algorithm>
#include <limits>

#include "base/debug.h"

namespace dct {

AutoTuner::Decision AutoTuner::plan(Modelled allgather, Modelled dense, Modelled split, uint64_t step,
                                    Modelled global) const {
  const Modelled model[kPlans] = {allgather, dense, split, global};
  // cost: what a plan is expected to take; bestCase: the least its samples
  // so far allow (they disagree, or it is unmeasured).
  double cost[kPlans], bestCase[kPlans];
  int best = 0;
  for (int s = 0; s < kPlans; s++) {
    const Modelled& m = model[s];
    const Track& t = plans_[s];
    if (!m.available) {
      cost[s] = bestCase[s] = std::numeric_limits<double>::infinity();
    } else if (t.count > 0) {
      cost[s] = m.us * t.median();
      bestCase[s] = t.count < kExtendedStreak && t.disagree() ? m.us * t.least() : cost[s];
    } else {  // unmeasured: its wire at the links' measured pace, no less than its cold run allows
      cost[s] = bestCase[s] = std::max(m.us + m.wireUs * (link_.median() - 1), m.us * t.coldLeast / kColdOver);
    }
    if (cost[s] < cost[best]) best = s;  // ties: the lower slot
  }
  const int last = pending_.slot;  // the previous step's, its time not learned yet
  auto samples = [&](int s) {  // those of its current samples, and the one in flight
    return (plans_[s].stale ? 0 : plans_[s].count) + (s == last && !pendingCold_ ? 1 : 0);
  };
  auto close = [&](int s) { return bestCase[s] < kCloseBand * cost[best]; };
  auto pick = [&](int s, Why why) {
    DCT_TRACE("auto: costs %.0f %.0f %.0f %.0f us, best cases %.0f %.0f %.0f %.0f, link scale %.2f: slot %d (%d)",
              cost[0], cost[1], cost[2], cost[3], bestCase[0], bestCase[1], bestCase[2], bestCase[3], link_.median(), s,
              static_cast<int>(why));
    return Decision{s, model[s], why};
  };

  // 1. A measuring run goes on for a streak while its plan stays close.
  if (pending_.measuring() && close(last) && samples(last) < kStreak) return pick(last, Why::Streak);
  // 2. Explore: a close plan short of a streak, or of an extended one while
  //    its samples disagree and the best of them would win; fewest first.
  int explore = -1;
  for (int s = 0; s < kPlans; s++) {
    const bool wanted = samples(s) < kStreak || (samples(s) < kExtendedStreak && bestCase[s] < cost[best]);
    if (!close(s) || !wanted) continue;
    if (explore < 0 || samples(s) < samples(explore) || (samples(s) == samples(explore) && cost[s] < cost[explore]))
      explore = s;
  }
  if (explore >= 0) return pick(explore, Why::Explore);
  // The winner: the running one unless another is clearly cheaper and
  // repays its switch; the cheapest outright on the way back from measuring.
  int winner = best;
  if (last >= 0 && last == winner_ && !pendingReturn_ && last != best && plans_[last].count > 0) {
    const Track& b = plans_[best];
    const double switchUs = b.coldRatio > 0 ? std::max(0.0, b.coldRatio - b.median()) * model[best].us : 0.0;
    if (cost[best] >= cost[last] * (1 - kMargin) - switchUs / kPaybackSteps) winner = last;
  }
  // 3. Re-measure the cheapest close loser that is due: every
  //    kRemeasureSteps, and the first plan explored once the others are.
  int due = -1;
  for (int s = 0; s < kPlans; s++) {
    const bool isDue = step + 1 - plans_[s].lastStep >= kRemeasureSteps || (s == firstSlot_ && !firstRedone_);
    if (s != winner && close(s) && isDue && (due < 0 || cost[s] < cost[due])) due = s;
  }
  if (due >= 0) return pick(due, Why::Remeasure);
  // 4. The winner.
  return pick(winner, Why::Winner);
}

void AutoTuner::commit(const Decision& d, double slowestPrevUs, uint64_t step, double slowestLocalUs) {
  learn(slowestPrevUs, slowestLocalUs);
  pendingCold_ = d.slot != pending_.slot;
  pendingReturn_ = pendingCold_ && pending_.measuring();
  if (d.slot >= 0 && !d.measuring()) winner_ = d.slot;
  if (firstSlot_ < 0) firstSlot_ = d.slot;
  else if (d.slot == firstSlot_ && (!d.measuring() || plans_[d.slot].count >= kStreak)) firstRedone_ = true;
  if (d.slot >= 0) {
    Track& t = plans_[d.slot];
    // A re-measurement replaces the plan's samples once its first warm one arrives.
    if (d.why == Why::Remeasure && pendingCold_) t.stale = true;
    t.lastStep = step + 1;
  }
  pending_ = d;
}

void AutoTuner::learn(double slowestUs, double localUs) {
  const Modelled& m = pending_.model;
  if (pending_.slot < 0 || slowestUs <= 0 || m.us <= 0) return;
  // The tuner's very first step (first touches of the comm) bounds nothing.
  const bool floors = std::any_of(plans_, plans_ + kPlans, [](const Track& t) { return t.runs > 0; });
  Track& t = plans_[pending_.slot];
  t.learn(slowestUs / m.us, pendingCold_, floors);
  DCT_TRACE("auto: slot %d took %.0f us (model %.0f%s): scale %.3f", pending_.slot, slowestUs, m.us,
            pendingCold_ ? ", cold" : "", t.median());
  if (m.wireUs > 0 && localUs > 0 && localUs < slowestUs) link_.learn((slowestUs - localUs) / m.wireUs, pendingCold_, false);
}

void AutoTuner::Track::learn(double ratio, bool cold, bool floors) {
  if (floors && (cold || runs == 0)) coldLeast = coldLeast > 0 ? std::min(coldLeast, ratio) : ratio;
  if (++runs == 1) return;  // first touches: no sample
  if (cold) {               // the switch's price: no sample
    coldRatio = ratio;
    return;
  }
  if (stale) count = next = 0;
  stale = false;
  samples[next] = ratio;
  next = (next + 1) % kWindow;
  count = std::min(count + 1, kWindow);
}

double AutoTuner::Track::median() const {
  if (count == 0) return 1.0;
  double sorted[kWindow];
  for (int i = 0; i < count; i++) {  // insertion: a handful of samples
    int j = i;
    for (; j > 0 && sorted[j - 1] > samples[i]; j--) sorted[j] = sorted[j - 1];
    sorted[j] = samples[i];
  }
  return count % 2 ? sorted[count / 2] : 0.5 * (sorted[count / 2 - 1] + sorted[count / 2]);
}

double AutoTuner::Track::least() const { return *std::min_element(samples, samples + count); }

bool AutoTuner::Track::disagree() const {
  const auto [lo, hi] = std::minmax_element(samples, samples + count);
  return *hi >= kDisagree * *lo;
}

}  // namespace dct
