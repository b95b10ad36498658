// DCT-DP as README "How it works" states it, written plainly and apart from
// the library's selection code (a shared bug would cancel out): one rank's
// error-feedback state, the exact threshold by sorting a copy, the
// re-estimation schedule with its drift band (and the tightening after a
// drift up), and the rank-order sum.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "../common/drift_band.h"

namespace dcttest {

// k = max(1, round(density * count)).
inline size_t targetK(double density, size_t n) {
  double k = std::round(density * static_cast<double>(n));
  return k < 1.0 ? 1 : static_cast<size_t>(k);
}

// The k-th largest |x| by sorting a copy. NaN counts as +Inf (it is always
// sent, so it is among the largest); never below the smallest denormal, so
// exact zeros are never sent.
template <typename T>
T kthLargestMagnitude(const std::vector<T>& x, size_t k) {
  std::vector<T> mags(x.size());
  for (size_t i = 0; i < x.size(); i++)
    mags[i] = std::isnan(x[i]) ? std::numeric_limits<T>::infinity() : std::fabs(x[i]);
  std::sort(mags.begin(), mags.end(), std::greater<T>());
  return std::max(mags[k - 1], std::numeric_limits<T>::denorm_min());
}

struct RefConfig {
  double density = 0.01;
  int interval = 1;  // L: steps between estimates
  bool errorFeedback = true;
  int warmup = 0;
};

// What one rank sends in one step. In warm-up and in steps of the dense
// algorithm that is every entry of acc (the residual becomes zero);
// otherwise the selection, ascending.
template <typename T>
struct RefMessage {
  std::vector<uint32_t> idx;
  std::vector<T> val;
  double tau = 0;          // as dctStats_t.threshold: 0 in warm-up and at density 1
  size_t nonFinite = 0;    // NaN/Inf among the selected
  size_t nonzero = 0;      // nonzero entries of acc: the candidates
};

template <typename T>
class RefCompressor {
 public:
  RefCompressor(size_t n, RefConfig cfg) : cfg_(cfg), residual_(n, T(0)) {}

  // One step. givenTau > 0 replaces the estimate and the schedule (the
  // sampled method: the tau the library reports). dense: a step of the
  // dense algorithm.
  RefMessage<T> step(const std::vector<T>& grad, double givenTau = 0, bool dense = false) {
    const size_t n = residual_.size(), k = targetK(cfg_.density, n);
    const T floor = std::numeric_limits<T>::denorm_min();
    std::vector<T> acc(n);
    for (size_t i = 0; i < n; i++) acc[i] = residual_[i] + grad[i];
    RefMessage<T> m;
    for (T a : acc) m.nonzero += a != T(0);
    if (step_ < static_cast<uint64_t>(cfg_.warmup) || dense) {
      for (size_t i = 0; i < n; i++) {
        m.idx.push_back(static_cast<uint32_t>(i));
        m.val.push_back(acc[i]);
      }
      std::fill(residual_.begin(), residual_.end(), T(0));
      starvedRun_ = 0;
      step_++;
      return m;
    }
    T tau = floor;  // density 1: every nonzero entry
    if (givenTau > 0) {
      tau = static_cast<T>(givenTau);
    } else if (cfg_.density < 1.0) {
      bool estimated = false, starved = false;
      if (!haveTau_ || driftPending_ || step_ - lastEstimate_ >= static_cast<uint64_t>(cfg_.interval)) {
        estimate(acc, k);
        estimated = true;
      }
      // Drift (drift_band.h): past the runaway bound, or nothing selected,
      // re-estimate at once; outside the band (too few only when a lower tau
      // could still add something) before the next step. Not modelled: a tie
      // no tau splits, whose count the library then accepts; the tests'
      // values are distinct.
      double sel = static_cast<double>(countSelected(acc, tau_));
      const double kd = static_cast<double>(k);
      if (!estimated && sel > dcttest::runawayBound(kd)) {
        estimate(acc, k);
        estimated = true;
        sel = static_cast<double>(countSelected(acc, tau_));
      } else if (!estimated && sel == 0 && tau_ > floor) {
        estimate(acc, dcttest::drainTarget(k, n, starvedRun_));  // starved: judged below like a stale tau's count
        sel = static_cast<double>(countSelected(acc, tau_));
        starved = true;
      }
      if (!estimated) {
        driftPending_ = (sel < dcttest::driftLow(kd) && tau_ > floor) || sel > dcttest::driftHigh(kd);
        if (!driftPending_) tightenedTo_ = 0;
      }
      tau = tau_;
      starvedRun_ = starved ? starvedRun_ + 1 : 0;
    }
    m.tau = cfg_.density < 1.0 ? static_cast<double>(tau) : 0.0;
    for (size_t i = 0; i < n; i++) {
      if (std::fabs(acc[i]) < tau) continue;  // NaN fails `<`: always sent
      m.idx.push_back(static_cast<uint32_t>(i));
      m.val.push_back(acc[i]);
      m.nonFinite += !std::isfinite(acc[i]);
      acc[i] = T(0);
    }
    // A drift up no larger than the sample tightens tau to the aim-th
    // largest value sent, unless that is tau itself or not finite: aim = k,
    // or right after a tightening aimed at a, k a / nnz within [k/2, k].
    const size_t sent = m.val.size();
    if (givenTau <= 0 && driftPending_ && sent > k && sent <= sampleSize(n, cfg_.density)) {
      const double kd = static_cast<double>(k);
      const double a = tightenedTo_ ? std::clamp(kd * static_cast<double>(tightenedTo_) / static_cast<double>(sent),
                                                 kd / 2, kd)
                                    : kd;
      const size_t aim = std::max<size_t>(1, static_cast<size_t>(std::llround(a)));
      const T kth = kthLargestMagnitude(m.val, aim);
      if (kth > tau_ && std::isfinite(kth)) {
        tau_ = kth;
        driftPending_ = false;
        tightenedTo_ = aim;
        estimates_++;
      }
    }
    if (cfg_.errorFeedback) residual_ = acc;
    else std::fill(residual_.begin(), residual_.end(), T(0));
    step_++;
    return m;
  }

  uint64_t estimates() const { return estimates_; }

 private:
  static size_t countSelected(const std::vector<T>& acc, T tau) {
    size_t c = 0;
    for (T a : acc) c += !(std::fabs(a) < tau);
    return c;
  }
  // The sampled estimator's sample size (a tightening needs no larger
  // selection): clamp(256 / density, 4096, 2^20), all of n when twice that
  // reaches n.
  static size_t sampleSize(size_t n, double density) {
    const double s = std::min(std::max(256.0 / density, 4096.0), 1048576.0);
    return 2.0 * s >= static_cast<double>(n) ? n : static_cast<size_t>(s);
  }
  void estimate(const std::vector<T>& acc, size_t k) {
    tau_ = kthLargestMagnitude(acc, k);
    haveTau_ = true;
    driftPending_ = false;
    tightenedTo_ = 0;
    lastEstimate_ = step_;
    estimates_++;
  }

  RefConfig cfg_;
  std::vector<T> residual_;
  T tau_ = 0;
  bool haveTau_ = false, driftPending_ = false;
  int starvedRun_ = 0;      // steps in a row whose stale tau selected nothing
  size_t tightenedTo_ = 0;  // the aim of the tightening tau came from, until a step in the band (0: none)
  uint64_t step_ = 0, lastEstimate_ = 0, estimates_ = 0;
};

// Every rank's message added into zeros in rank order (what the allgather
// algorithm does), then scaled for an average; `mag` gets the sum of |v|
// per entry, the scale of the rounding any other order could introduce.
template <typename T>
void rankOrderSum(size_t n, const std::vector<uint32_t>& allIdx, const std::vector<T>& allVal,
                  double scale, std::vector<T>& sum, std::vector<T>& mag) {
  sum.assign(n, T(0));
  mag.assign(n, T(0));
  for (size_t j = 0; j < allIdx.size(); j++) {
    sum[allIdx[j]] += allVal[j];
    mag[allIdx[j]] += std::fabs(allVal[j]);
  }
  if (scale != 1.0) {
    const T f = static_cast<T>(scale);
    for (size_t i = 0; i < n; i++) {
      sum[i] *= f;
      mag[i] *= f;
    }
  }
}

template <typename T>
bool sameBits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

}  // namespace dcttest
