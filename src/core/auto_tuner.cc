#include "core/auto_tuner.h"

#include <algorithm>
#include <limits>

#include "base/debug.h"

namespace dct {

AutoTuner::Decision AutoTuner::plan(Modelled allgather, Modelled dense, Modelled split, uint64_t step) const {
  const Modelled model[kSlots] = {allgather, dense, split};
  double cost[kSlots], hope[kSlots];
  int best = 0;  // the cheapest
  for (int s = 0; s < kSlots; s++) {
    const Modelled& m = model[s];
    const Track& t = tracks_[s];
    if (!m.available) {
      cost[s] = hope[s] = std::numeric_limits<double>::infinity();
      continue;
    }
    // Unmeasured: its own local work as modelled, its wire at the links'
    // measured pace, and no less than its cold run allows.
    cost[s] = t.filled() ? m.us * t.scale() : std::max(m.us + m.wireUs * (link_.scale() - 1), m.us * t.floor());
    // While its window fills, its best sample says whether to measure on.
    hope[s] = t.filled() ? m.us * t.hope() : cost[s];
    if (cost[s] < cost[best]) best = s;  // ties: the lower slot
  }
  const int last = pending_.slot;  // the previous step's: its time is not learned yet
  // The winner: the running one unless the cheapest is clearly cheaper
  // than its steady cost and repays its switch. Not yet on the step back
  // from a measurement: a measuring streak ends with its last sample in
  // flight, and the step back is planned without it.
  int winner = best;
  if (last >= 0 && last == winner_ && !pendingReturn_ && last != best && tracks_[last].filled() &&
      cost[best] >= model[last].us * tracks_[last].steady() * (1 - kHysteresis) -
                         tracks_[best].switchUs(model[best]) / kPaybackSteps)
    winner = last;
  auto measure = [&](int s) { return Decision{s, model[s], true}; };
  auto close = [&](int s) { return hope[s] < kReprobeBand * cost[best]; };
  auto inFlight = [&](int s) { return s == last && !pendingCold_ ? 1 : 0; };  // a warm run
  int pick = -1;
  const char* why = "winner";
  // A measuring streak runs for kStreak warm samples while its algorithm stays close.
  if (pending_.measuring && close(last) && tracks_[last].streak + inFlight(last) < kStreak) {
    pick = last;
    why = "streak";
  }
  // Exploring: an algorithm short of a streak's samples while close, or of
  // a full window while its best sample would win; the fewest samples
  // first, then the cheaper.
  auto samples = [&](int s) { return tracks_[s].filled() + inFlight(s); };
  auto explore = [&](int s) {
    return close(s) && (samples(s) < kStreak || (samples(s) < kSamples && hope[s] < cost[best]));
  };
  auto before = [&](int s, int other) {
    return other < 0 || samples(s) < samples(other) || (samples(s) == samples(other) && cost[s] < cost[other]);
  };
  int explored = -1;
  for (int s = 0; s < kSlots; s++)
    if (explore(s) && before(s, explored)) explored = s;
  if (pick < 0 && explored >= 0) {
    pick = explored;
    why = "explore";
  }
  // Then the cheapest close loser due for a re-measurement (the first one
  // explored is due once the others are measured); then the winner.
  int due = -1;
  for (int s = 0; s < kSlots; s++) {
    const bool isDue = step + 1 - tracks_[s].lastStep >= kReprobeSteps || (s == firstSlot_ && !firstRedone_);
    if (s != winner && close(s) && isDue && (due < 0 || cost[s] < cost[due])) due = s;
  }
  if (pick < 0 && due >= 0) {
    pick = due;
    why = "re-measure";
  }
  DCT_TRACE("auto: costs %.0f %.0f %.0f us, hopes %.0f %.0f %.0f (link scale %.2f): %s slot %d", cost[0], cost[1],
            cost[2], hope[0], hope[1], hope[2], link_.scale(), why, pick >= 0 ? pick : winner);
  return pick >= 0 ? measure(pick) : Decision{winner, model[winner], false};
}

void AutoTuner::commit(const Decision& d, double slowestPrevUs, uint64_t step, double slowestLocalUs) {
  learn(slowestPrevUs, slowestLocalUs);
  pendingCold_ = d.slot != pending_.slot;
  pendingReturn_ = pendingCold_ && pending_.measuring;
  if (d.slot >= 0 && !d.measuring) winner_ = d.slot;
  // Measured again once its first streak is in (or winning): the start-up is behind it.
  if (firstSlot_ < 0) firstSlot_ = d.slot;
  else if (d.slot == firstSlot_ && (!d.measuring || tracks_[d.slot].filled() >= kStreak)) firstRedone_ = true;
  if (d.slot >= 0) {
    Track& t = tracks_[d.slot];
    if (d.slot != pending_.slot) t.streak = 0;
    t.lastStep = step + 1;
  }
  pending_ = d;
}

namespace {

// Of n <= kSteadySamples samples (>= kSamples).
double median(const double* samples, int n) {
  double sorted[AutoTuner::kSteadySamples];
  for (int i = 0; i < n; i++) {  // insertion: a handful of samples
    int j = i;
    for (; j > 0 && sorted[j - 1] > samples[i]; j--) sorted[j] = sorted[j - 1];
    sorted[j] = samples[i];
  }
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

}  // namespace

// The window: the ring's last filled() samples.
double AutoTuner::Track::scale() const {
  double window[kSamples];
  for (int i = 0; i < filled(); i++) window[i] = samples[(next + kSteadySamples - 1 - i) % kSteadySamples];
  return filled() ? median(window, filled()) : 1.0;
}

double AutoTuner::Track::steady() const { return sampled > kSamples ? median(samples, sampled) : scale(); }

double AutoTuner::Track::hope() const {
  if (filled() == kSamples || filled() == 0) return scale();
  // Still filling: the window is the whole ring so far.
  const auto [lo, hi] = std::minmax_element(samples, samples + sampled);
  return *hi >= kDisagree * *lo ? *lo : scale();
}

double AutoTuner::Track::switchUs(const Modelled& m) const {
  return coldRatio > 0 && filled() ? std::max(0.0, coldRatio - scale()) * m.us : 0.0;
}

void AutoTuner::Track::learn(double ratio, bool cold, bool floors) {
  if (floors && (cold || runs == 0)) coldLeast = coldLeast > 0 ? std::min(coldLeast, ratio) : ratio;
  // The first run pays first-touch costs (buffers, MPI internals): no sample.
  if (++runs == 1) return;
  if (cold) {
    coldRatio = ratio;
    return;
  }
  samples[next] = ratio;
  next = (next + 1) % kSteadySamples;
  sampled = std::min(sampled + 1, kSteadySamples);
  streak = std::min(streak + 1, kStreak);  // only compared with kStreak: saturates, never overflows
}

void AutoTuner::learn(double slowestUs, double localUs) {
  const Modelled& m = pending_.model;
  if (pending_.slot < 0 || slowestUs <= 0 || m.us <= 0) return;
  // The tuner's first step (nothing learned yet) sets no floor: first touches of the comm.
  const bool floors = std::any_of(tracks_, tracks_ + kSlots, [](const Track& k) { return k.runs > 0; });
  Track& t = tracks_[pending_.slot];
  t.learn(slowestUs / m.us, pendingCold_, floors);
  DCT_TRACE("auto: slot %d took %.0f us (model %.0f%s): scale %.3f", pending_.slot, slowestUs, m.us,
            pendingCold_ ? ", cold" : "", t.scale());
  if (m.wireUs > 0 && localUs > 0 && localUs < slowestUs) link_.learn((slowestUs - localUs) / m.wireUs, pendingCold_, false);
}

}  // namespace dct
