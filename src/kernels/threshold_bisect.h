// Shared by both twins' threshold op (cpu_threshold.cc, cuda/cuda_threshold.cu):
// the fixed-order sum of |x| and the host-side driver of dctThresholdBisect.
// Both twins feed the same integer statistics and the same fixed-order sum
// into the same driver, and their counting passes count the same entries
// exactly, so they return the same tau, bit for bit, after the same passes.
//
// Bisection (MSTopK, Shi et al.): one statistics pass (the fixed-order sum
// of the finite |x|, their max and smallest positive value, the non-finite
// and nonzero counts), then counting passes C(t) = #{i : !(|x_i| < t)} (NaN
// and +-Inf always count; t is never above the max, so C(t) >= 1). k =
// max(1, round(density * n)) and the band is the compressor's drift band
// [k/1.25, 1.25k].
//   * k or more NaN/Inf: tau = +Inf, no pass (exact's answer: the k-th
//     largest |x| is Inf, NaN ranking as Inf). No finite nonzero value: tau
//     0 (the op's positive floor applies), no pass.
//   * First probe: the mean of the finite |x| (zeros included), rounded up to
//     a value of T, clamped to [min positive, max].
//   * Count above the band: search [mean, max]. Below: the k-th largest lies
//     under the mean (dense densities): search [min positive, mean], whose
//     lower end counts every nonzero entry, known without a pass (when even
//     that is not above the band, it is the answer).
//   * Stop at the first count inside the band, when no value of T is left
//     between the ends, or after maxPasses counting passes; tau is then the
//     probe whose count is nearest k by ratio (first found on ties).
// Midpoints are geometric in the tail (above the mean while hi > 2*lo:
// counts fall off multiplicatively there, heavy tails included) and
// arithmetic otherwise. Every probe is a value of T (rounded up), so tau
// selects exactly the counted entries whatever type the select compares in.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "base/half_types.h"
#include "base/host_device.h"
#include "kernels/kernels.h"
#include "kernels/row_keys.h"

namespace dct {

// Drift band of the count (the compressor's re-estimation band) and the
// default budget of counting passes.
constexpr double kBisectBand = 1.25;
constexpr int kBisectMaxPasses = 16;

// Magnitude keys are row_keys.h's: the bits of |x| as an unsigned integer
// (integer order is value order), NaN and +-Inf all kInfKey<T>.
template <typename T> using KeyOf = RowKey<T>;

// The value of a magnitude key, exactly.
template <typename T>
DCT_HOST_DEVICE double keyValue(KeyOf<T> key) {
  T x;
  std::memcpy(&x, &key, sizeof(x));
  return static_cast<double>(Value<T>::load(x));
}

// The smallest key whose value is >= t, for 0 < t <= the largest finite T.
template <typename T>
KeyOf<T> ceilKey(double t) {
  if constexpr (sizeof(T) == 8) {
    return rowKey(t);
  } else {
    float f = static_cast<float>(t);
    if (static_cast<double>(f) < t) f = std::nextafter(f, std::numeric_limits<float>::infinity());
    if constexpr (sizeof(T) == 4) {
      return rowKey(f);
    } else {
      KeyOf<T> k = Value<T>::store(f).bits;  // nearest
      if (static_cast<float>(keyValue<T>(k)) < f) k++;  // next magnitude up
      return k;
    }
  }
}

// Fixed-order sum of m doubles, identical in both twins: chunks of
// kSumChunk values; in a chunk, lane l (< kSumLanes) adds values l, l + 256,
// ... in order (missing values are +0), then lanes fold pairwise (l += l + s
// for s = 128, 64, ..., 1); the chunk sums form the next level, until one
// value remains. All terms are >= 0 and only additions are involved, so the
// CUDA twin (one block of kSumLanes threads per chunk) forms the same sums.
constexpr size_t kSumLanes = 256, kSumPerLane = 8, kSumChunk = kSumLanes * kSumPerLane;

DCT_HOST_DEVICE size_t sumChunks(size_t m) { return (m + kSumChunk - 1) / kSumChunk; }

// One chunk of the fixed-order sum: v(i) for i < len (len <= kSumChunk).
template <typename Load>
double chunkSum(size_t len, const Load& v) {
  double lane[kSumLanes] = {};
  for (size_t j = 0; j < kSumPerLane; j++) {
    const size_t base = j * kSumLanes;
    if (base >= len) break;
    const size_t count = len - base < kSumLanes ? len - base : kSumLanes;
    for (size_t l = 0; l < count; l++) lane[l] += v(base + l);
  }
  for (size_t s = kSumLanes / 2; s > 0; s /= 2)
    for (size_t l = 0; l < s; l++) lane[l] += lane[l + s];
  return lane[0];
}

// The levels above the first: folds `partials` (m chunk sums, overwritten)
// down to one value.
inline double foldSums(double* partials, size_t m) {
  while (m > 1) {
    const size_t chunks = sumChunks(m);
    for (size_t c = 0; c < chunks; c++) {
      const size_t begin = c * kSumChunk, len = m - begin < kSumChunk ? m - begin : kSumChunk;
      partials[c] = chunkSum(len, [&](size_t i) { return partials[begin + i]; });
    }
    m = chunks;
  }
  return m ? partials[0] : 0.0;
}

// The statistics pass's results (keys widened to 64 bits).
struct MagnitudeStats {
  uint64_t nonFinite = 0;  // NaN and +-Inf
  uint64_t nonzero = 0;    // finite, |x| > 0
  uint64_t maxKey = 0;     // largest finite |x|
  uint64_t minKey = ~uint64_t(0);  // smallest positive finite |x| (when nonzero)
  double sum = 0;          // fixed-order sum of the finite |x|
};

struct BisectResult {
  double tau = 0;  // 0: no finite nonzero value (the caller's positive floor applies)
  uint64_t count = 0;  // entries with !(|x| < tau)
  int passes = 0;      // counting passes made
};

// k of the contract: max(1, round(density * n)), at most n.
inline size_t thresholdK(size_t n, double density) {
  const double kd = std::round(density * static_cast<double>(n));
  return kd < 1.0 ? 1 : (kd > static_cast<double>(n) ? n : static_cast<size_t>(kd));
}

// count(key) -> entries whose magnitude key is >= key (one pass over x).
template <typename T, typename Count>
BisectResult bisectThreshold(const MagnitudeStats& s, size_t n, double density, int maxPasses,
                             Count&& count) {
  using K = KeyOf<T>;
  BisectResult r;
  const double k = static_cast<double>(thresholdK(n, density));
  if (static_cast<double>(s.nonFinite) >= k) {  // the k-th largest is +Inf (NaN ranks so)
    r.tau = std::numeric_limits<double>::infinity();
    r.count = s.nonFinite;
    return r;
  }
  if (s.nonzero == 0) {  // nothing finite above zero: the floor
    r.count = s.nonFinite;
    return r;
  }
  const double low = k / kBisectBand, high = k * kBisectBand;
  const auto inBand = [&](uint64_t c) { return !(static_cast<double>(c) < low) && !(static_cast<double>(c) > high); };
  // Distance from k by ratio (c >= 1: every probe is <= the max).
  const auto distance = [&](uint64_t c) {
    const double d = static_cast<double>(c);
    return d > k ? d / k : k / d;
  };
  K best = 0;
  const auto consider = [&](K key, uint64_t c) {
    if (best == 0 || distance(c) < distance(r.count)) {
      best = key;
      r.count = c;
    }
  };
  const auto probe = [&](K key) {
    const uint64_t c = count(key);
    r.passes++;
    consider(key, c);
    return c;
  };
  const auto finish = [&]() {
    r.tau = keyValue<T>(best);
    return r;
  };

  const K minKey = static_cast<K>(s.minKey), maxKey = static_cast<K>(s.maxKey);
  const double mean = s.sum / static_cast<double>(n - s.nonFinite);
  K t = !(mean < keyValue<T>(maxKey)) ? maxKey : (mean <= keyValue<T>(minKey) ? minKey : ceilKey<T>(mean));
  if (maxPasses < 1) maxPasses = 1;
  uint64_t c = probe(t);
  if (inBand(c)) return finish();
  K lo, hi;
  bool hiCounted, tail;
  if (c > high) {  // tau above the mean: search [mean, max]
    lo = t;
    hi = maxKey;
    hiCounted = t == maxKey;
    tail = true;
  } else {  // the k-th largest lies below the mean: search [min positive, mean]
    hi = t;
    hiCounted = true;
    tail = false;
    lo = minKey;
    const uint64_t atMin = s.nonzero + s.nonFinite;  // C(min positive), known without a pass
    consider(lo, atMin);
    if (!(atMin > high)) return finish();  // no positive tau counts more
  }
  while (r.passes < maxPasses && lo < hi) {
    if (hi - lo == 1) {  // adjacent keys: only the max may be left to count
      if (hiCounted) break;
      t = hi;
    } else {
      const double a = keyValue<T>(lo), b = keyValue<T>(hi);
      const double mid = tail && b > 2.0 * a ? std::sqrt(a) * std::sqrt(b) : a + (b - a) / 2.0;
      t = ceilKey<T>(mid);
      if (t <= lo) t = static_cast<K>(lo + 1);
      if (t >= hi) t = static_cast<K>(hi - 1);
    }
    c = probe(t);
    if (inBand(c)) break;
    if (c > high) {
      lo = t;
    } else {
      hi = t;
      hiCounted = true;
    }
    if (t == maxKey) hiCounted = true;
  }
  return finish();
}

}  // namespace dct
