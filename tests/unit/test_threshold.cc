// Threshold estimators (CPU twin): exact and sampled against references for
// every value type, the sampled estimate's selection rate on gradient-like
// data, and the bisect (MSTopK) method: counts inside the drift band on
// gradient-like and heavy-tailed data, the first in-band probe ends it, the
// pass budget holds, the best reachable count when the band cannot be hit
// (ties), NaN/Inf, zeros, tiny inputs, and its first probe (the mean of the
// finite |x| by the fixed-order sum both twins share) bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <set>

#include "../common/half_reference.h"
#include "base/half_types.h"
#include "kernels/kernels.h"
#include "kernels/sampling.h"
#include "reference.h"

using namespace dct;
using namespace dct::test;

namespace {

// Storage types under test: conversions from double and back written apart
// from the library's (half_reference.h).
template <typename S> struct Stored;
template <> struct Stored<float> {
  static float from(double v) { return static_cast<float>(v); }
  static double value(float x) { return x; }
  static constexpr dctDataType_t type = dctFloat32;
  static constexpr double floor = std::numeric_limits<float>::denorm_min();
};
template <> struct Stored<double> {
  static double from(double v) { return v; }
  static double value(double x) { return x; }
  static constexpr dctDataType_t type = dctFloat64;
  static constexpr double floor = std::numeric_limits<double>::denorm_min();
};
template <> struct Stored<Half> {
  static Half from(double v) { return Half{dcttest::refFloatToHalf(static_cast<float>(v))}; }
  static double value(Half x) { return dcttest::refHalfToFloat(x.bits); }
  static constexpr dctDataType_t type = dctFloat16;
  static constexpr double floor = std::numeric_limits<float>::denorm_min();
};
template <> struct Stored<BFloat16> {
  static BFloat16 from(double v) { return BFloat16{dcttest::refFloatToBf16(static_cast<float>(v))}; }
  static double value(BFloat16 x) { return dcttest::refBf16ToFloat(x.bits); }
  static constexpr dctDataType_t type = dctBFloat16;
  static constexpr double floor = std::numeric_limits<float>::denorm_min();
};

template <typename S>
std::vector<S> convert(const std::vector<double>& v) {
  std::vector<S> out(v.size());
  for (size_t i = 0; i < v.size(); i++) out[i] = Stored<S>::from(v[i]);
  return out;
}

template <typename S>
double magnitude(S x) {
  const double v = Stored<S>::value(x);
  return std::isnan(v) ? INFINITY : std::fabs(v);
}

size_t kOf(size_t n, double density) {
  double kd = std::round(density * n);
  return kd < 1 ? 1 : std::min(n, static_cast<size_t>(kd));
}

// k-th largest magnitude among the given positions, as the contract says.
template <typename S>
double referenceKth(const std::vector<S>& x, const std::vector<size_t>& positions, double density) {
  std::vector<double> m;
  for (size_t p : positions) m.push_back(magnitude(x[p]));
  std::sort(m.begin(), m.end(), std::greater<double>());
  return m[kOf(m.size(), density) - 1];
}

// Entries the select rule !(|x| < tau) takes (NaN and Inf included).
template <typename S>
size_t countAtLeast(const std::vector<S>& x, double tau) {
  size_t c = 0;
  for (const S& v : x) c += !(std::fabs(Stored<S>::value(v)) < tau);
  return c;
}

bool inBand(size_t count, size_t k) {
  return !(static_cast<double>(count) < k / 1.25) && !(static_cast<double>(count) > k * 1.25);
}

struct Estimate {
  double tau = 0;
  int passes = 0;
};

template <typename S>
Estimate run(const std::vector<S>& x, double density, dctThresholdMethod_t method, uint64_t seed = 1,
             int maxPasses = 0) {
  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  REQUIRE(ops.createContext(&ctx) == dctSuccess);
  ThresholdArgs args{x.data(), x.size(), Stored<S>::type, density, method, seed};
  args.maxPasses = maxPasses;
  args.passes = -1;
  Estimate e;
  REQUIRE(ops.threshold(ctx, &args, &e.tau, nullptr) == dctSuccess);
  ops.destroyContext(ctx);
  e.passes = args.passes;
  if (method != dctThresholdBisect) CHECK(e.passes == 0);
  return e;
}

template <typename S>
void checkBoth(const std::vector<S>& x, double density, uint64_t seed) {
  const size_t n = x.size();
  CAPTURE(n);
  CAPTURE(density);
  CAPTURE(Stored<S>::type);
  std::vector<size_t> all(n);
  for (size_t i = 0; i < n; i++) all[i] = i;
  const double floor = Stored<S>::floor;
  CHECK(run(x, density, dctThresholdExact, seed).tau == std::max(referenceKth(x, all, density), floor));

  size_t s = thresholdSampleSize(n, density);
  std::vector<size_t> sample;
  if (s == n) {
    sample = all;
  } else {
    uint64_t state = seed;
    for (size_t i = 0; i < s; i++) sample.push_back(samplePosition(splitmix64(state), n));
  }
  CHECK(run(x, density, dctThresholdSampled, seed).tau == std::max(referenceKth(x, sample, density), floor));
}

// --- inputs -------------------------------------------------------------

std::vector<double> normal(size_t n, uint64_t seed, bool nonFinite = false) {
  return randomVector<double>(n, seed, nonFinite);  // gradient-like, 1% exact zeros
}
// Few distinct magnitudes, many ties.
std::vector<double> quantized(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::discrete_distribution<int> level({50, 30, 15, 4, 1});
  std::bernoulli_distribution sign(0.5);
  std::vector<double> v(n);
  for (auto& x : v) {
    const int l = level(rng);
    x = l == 0 ? 0.0 : (sign(rng) ? 1 : -1) * std::ldexp(0.5, l);
  }
  return v;
}

// --- bisect references --------------------------------------------------

// The first probe of bisect: the mean of the finite |x| (fixed-order sum of
// threshold_bisect.h, written here apart from the library), rounded up to
// the data's type and clamped to [smallest positive, largest] finite |x|.
double fixedOrderSum(std::vector<double> v) {
  while (v.size() > 1) {
    std::vector<double> next;
    for (size_t c = 0; c * 2048 < v.size(); c++) {
      double lane[256] = {};
      for (size_t j = 0; j < 8; j++)
        for (size_t l = 0; l < 256; l++) {
          const size_t i = c * 2048 + j * 256 + l;
          if (i < v.size()) lane[l] = lane[l] + v[i];
        }
      for (size_t s = 128; s >= 1; s /= 2)
        for (size_t l = 0; l < s; l++) lane[l] = lane[l] + lane[l + s];
      next.push_back(lane[0]);
    }
    v = next;
  }
  return v.empty() ? 0.0 : v[0];
}

template <typename S>
double firstProbe(const std::vector<S>& x) {
  std::vector<double> finite;
  double lo = INFINITY, hi = 0;
  for (const S& s : x) {
    const double m = std::fabs(Stored<S>::value(s));
    finite.push_back(std::isfinite(m) ? m : 0.0);
    if (!std::isfinite(m)) continue;
    if (m > 0) lo = std::min(lo, m);
    hi = std::max(hi, m);
  }
  const size_t count = std::count_if(x.begin(), x.end(), [](S s) { return std::isfinite(Stored<S>::value(s)); });
  const double mean = fixedOrderSum(finite) / static_cast<double>(count);
  if (!(mean < hi)) return hi;
  if (mean <= lo) return lo;
  // Smallest value of S >= mean: over all bit patterns for the half types.
  if constexpr (sizeof(S) == 8) {
    return mean;
  } else if constexpr (sizeof(S) == 4) {
    float f = static_cast<float>(mean);
    return f < mean ? std::nextafter(f, INFINITY) : f;
  } else {
    for (uint16_t b = 0; b < 0x7c00; b++)
      if (Stored<S>::value(S{b}) >= mean) return Stored<S>::value(S{b});
    return INFINITY;
  }
}

// Counts reachable with some tau in (0, max |x|]: one per distinct positive
// finite magnitude.
template <typename S>
std::vector<size_t> reachableCounts(const std::vector<S>& x) {
  std::set<double> levels;
  for (const S& s : x) {
    const double m = std::fabs(Stored<S>::value(s));
    if (std::isfinite(m) && m > 0) levels.insert(m);
  }
  std::vector<double> sorted;
  for (const S& s : x) sorted.push_back(std::isnan(Stored<S>::value(s)) ? INFINITY : std::fabs(Stored<S>::value(s)));
  std::sort(sorted.begin(), sorted.end());
  std::vector<size_t> counts;
  for (double level : levels)
    counts.push_back(sorted.end() - std::lower_bound(sorted.begin(), sorted.end(), level));
  return counts;
}

double ratioDistance(size_t count, size_t k) {
  const double c = static_cast<double>(count), kd = static_cast<double>(k);
  return c > kd ? c / kd : kd / c;
}

// Bisect on x: tau > 0, passes within the budget; with the band reachable
// and enough passes, a count inside it; otherwise the reachable count
// nearest k (bisection converges to the two counts around the band).
template <typename S>
Estimate checkBisect(const std::vector<S>& x, double density, int maxPasses = 0, bool expectBand = true) {
  const size_t n = x.size(), k = kOf(n, density);
  CAPTURE(n);
  CAPTURE(density);
  CAPTURE(Stored<S>::type);
  const Estimate e = run(x, density, dctThresholdBisect, 1, maxPasses);
  const size_t count = countAtLeast(x, e.tau);
  CAPTURE(e.tau);
  CAPTURE(e.passes);
  CAPTURE(count);
  CAPTURE(k);
  CHECK(e.tau > 0.0);
  CHECK(e.passes >= 0);
  CHECK(e.passes <= (maxPasses > 0 ? maxPasses : 16));
  if (expectBand) CHECK(inBand(count, k));
  return e;
}

template <typename S>
void checkBestReachable(const std::vector<S>& x, double density) {
  const Estimate e = checkBisect(x, density, 64, false);
  const size_t k = kOf(x.size(), density), count = countAtLeast(x, e.tau);
  const std::vector<size_t> counts = reachableCounts(x);
  bool bandReachable = false;
  double best = INFINITY;
  for (size_t c : counts) {
    bandReachable |= inBand(c, k);
    best = std::min(best, ratioDistance(c, k));
  }
  CAPTURE(e.tau);
  CAPTURE(count);
  CAPTURE(k);
  CHECK(e.passes < 64);
  if (bandReachable) CHECK(inBand(count, k));
  else CHECK(ratioDistance(count, k) == best);
}

// The first in-band probe ends the search: the same budget gives the same
// tau, one pass less ends outside the band.
template <typename S>
void checkStopsAtFirstInBand(const std::vector<S>& x, double density) {
  const size_t k = kOf(x.size(), density);
  const Estimate e = checkBisect(x, density);
  CAPTURE(e.passes);
  REQUIRE(e.passes >= 1);
  CHECK(e.passes < 16);  // well under the budget
  const Estimate same = run(x, density, dctThresholdBisect, 1, e.passes);
  CHECK(same.tau == e.tau);
  CHECK(same.passes == e.passes);
  if (e.passes > 1) {
    const Estimate shorter = run(x, density, dctThresholdBisect, 1, e.passes - 1);
    CHECK(shorter.passes == e.passes - 1);
    CHECK_FALSE(inBand(countAtLeast(x, shorter.tau), k));
  }
}

}  // namespace

TEST_CASE("exact and sampled thresholds match references on odd sizes") {
  for (size_t n : kOddSizes) {
    if (n == 0) continue;
    for (double d : {0.001, 0.01, 0.3, 1.0}) {
      checkBoth(randomVector<float>(n, 51), d, 51);
      checkBoth(randomVector<double>(n, 52), d, 52);
    }
  }
}

TEST_CASE("exact and sampled thresholds take fp16 and bf16 data (16-bit keys)") {
  for (size_t n : {size_t(1), size_t(7), size_t(11), size_t(1000003)}) {
    const std::vector<double> v = randomVector<double>(n, 53);  // NaN, +-Inf, zeros
    for (double d : {0.001, 0.01, 0.3, 1.0}) {
      checkBoth(convert<Half>(v), d, 53);
      checkBoth(convert<BFloat16>(v), d, 54);
    }
  }
  // Heavy tails overflow fp16 to Inf; bf16 keeps them.
  const std::vector<double> wide = cauchy(300007, 55);
  for (double d : {0.001, 0.1}) {
    checkBoth(convert<Half>(wide), d, 56);
    checkBoth(convert<BFloat16>(wide), d, 57);
  }
}

TEST_CASE("threshold is positive even for all-zero data, infinite for empty data") {
  std::vector<float> zeros(1000, 0.0f);
  for (auto method : {dctThresholdSampled, dctThresholdExact, dctThresholdBisect})
    CHECK(run(zeros, 0.01, method).tau == std::numeric_limits<float>::denorm_min());
  std::vector<double> dzeros(1000, -0.0);
  CHECK(run(dzeros, 0.01, dctThresholdBisect).tau == std::numeric_limits<double>::denorm_min());
  std::vector<Half> hzeros(1000, Half{0x8000});
  CHECK(run(hzeros, 0.01, dctThresholdBisect).tau == std::numeric_limits<float>::denorm_min());
  std::vector<float> empty;
  for (auto method : {dctThresholdSampled, dctThresholdExact, dctThresholdBisect}) {
    const Estimate e = run(empty, 0.01, method);
    CHECK(std::isinf(e.tau));
    CHECK(e.passes == 0);
  }
}

TEST_CASE("sampled tau on 1e6 normal values at density 1% selects within [k/2, 2k]") {
  const size_t n = 1000000;
  auto x = randomVector<float>(n, 61, false);
  const size_t k = n / 100;
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u}) {
    double tau = run(x, 0.01, dctThresholdSampled, seed).tau;
    size_t count = std::count_if(x.begin(), x.end(), [&](float v) { return std::fabs(v) >= tau; });
    CAPTURE(seed);
    CHECK(count >= k / 2);
    CHECK(count <= 2 * k);
  }
}

TEST_CASE("bisect lands in the drift band on gradient-like and heavy-tailed data") {
  for (size_t n : {size_t(200003), size_t(1000003)}) {
    for (double d : {0.001, 0.01, 0.1, 0.5, 0.9}) {
      checkStopsAtFirstInBand(convert<float>(normal(n, 71)), d);
      checkStopsAtFirstInBand(convert<float>(cauchy(n, 72)), d);
      checkStopsAtFirstInBand(convert<float>(logNormal(n, 73)), d);
      checkStopsAtFirstInBand(convert<double>(logNormal(n, 74)), d);
    }
  }
}

TEST_CASE("bisect on fp16, bf16 and fp64 data") {
  const size_t n = 300007;
  for (double d : {0.001, 0.01, 0.1, 0.6}) {
    const std::vector<double> g = normal(n, 81, true), h = logNormal(n, 82);
    checkStopsAtFirstInBand(convert<Half>(g), d);
    checkStopsAtFirstInBand(convert<BFloat16>(g), d);
    checkStopsAtFirstInBand(convert<double>(g), d);
    checkStopsAtFirstInBand(convert<BFloat16>(h), d);
    checkStopsAtFirstInBand(convert<double>(h), d);
    checkStopsAtFirstInBand(convert<Half>(h), d);
  }
}

TEST_CASE("bisect on small odd sizes: in band when reachable, else the nearest reachable count") {
  for (size_t n : {size_t(1), size_t(2), size_t(3), size_t(7), size_t(11), size_t(101), size_t(1001)}) {
    for (double d : {0.001, 0.01, 0.3, 0.5, 1.0}) {
      checkBestReachable(convert<float>(normal(n, 91 + n)), d);
      checkBestReachable(convert<double>(cauchy(n, 92 + n)), d);
      checkBestReachable(convert<Half>(normal(n, 93 + n)), d);
      checkBestReachable(convert<BFloat16>(logNormal(n, 94 + n)), d);
    }
  }
}

TEST_CASE("bisect with ties: all-equal values, few levels") {
  std::vector<float> same(1000, 1.5f);
  for (size_t i = 0; i < same.size(); i += 2) same[i] = -1.5f;
  for (double d : {0.001, 0.01, 0.5, 1.0}) {
    const Estimate e = run(same, d, dctThresholdBisect);
    CHECK(e.tau == 1.5);
    CHECK(e.passes == 1);
  }
  for (double d : {0.005, 0.02, 0.1, 0.3, 0.5, 0.7}) {
    checkBestReachable(convert<float>(quantized(100003, 101)), d);
    checkBestReachable(convert<Half>(quantized(100003, 102)), d);
    checkBestReachable(convert<double>(quantized(100003, 103)), d);
  }
}

TEST_CASE("bisect with NaN and Inf: never in the mean or max, always counted") {
  // A sprinkling: 0.03% NaN/+-Inf.
  for (double d : {0.001, 0.01, 0.1}) checkStopsAtFirstInBand(convert<float>(normal(1000003, 111, true)), d);
  // Non-finite values at least k: tau is +Inf (as exact: the k-th largest is
  // Inf), no counting pass; the NaN/Inf alone are selected.
  std::vector<float> x = convert<float>(normal(1000, 112));
  for (size_t i = 0; i < 20; i++) x[i * 37] = i % 2 ? INFINITY : NAN;
  Estimate e = run(x, 0.01, dctThresholdBisect);
  CHECK(std::isinf(e.tau));
  CHECK(e.passes == 0);
  CHECK(run(x, 0.01, dctThresholdExact).tau == e.tau);
  // Just under k of them: a finite tau adds the largest finite entries.
  x = convert<float>(normal(1000, 113));
  for (size_t i = 0; i < 8; i++) x[i * 101] = i % 2 ? -INFINITY : NAN;
  checkBestReachable(x, 0.01);
  // All NaN; NaN with zeros only.
  CHECK(std::isinf(run(std::vector<double>(17, NAN), 0.3, dctThresholdBisect).tau));
  std::vector<float> nanZeros(1000, 0.0f);
  nanZeros[5] = NAN;
  e = run(nanZeros, 0.01, dctThresholdBisect);
  CHECK(e.tau == std::numeric_limits<float>::denorm_min());
  CHECK(e.passes == 0);
  // Huge doubles: the sum of |x| overflows, the first probe is the max.
  std::vector<double> huge = normal(10001, 114);
  for (size_t i = 0; i < huge.size(); i += 3) huge[i] *= 1e307;  // finite, but their sum is not
  checkBestReachable(huge, 0.01);
  CHECK(run(huge, 1e-4, dctThresholdBisect, 1, 1).tau == firstProbe(huge));  // k = 1: the max
}

TEST_CASE("bisect with zeros: below-mean searches and the smallest positive value") {
  // 99% zeros, density 5%: no positive tau reaches k; tau is the smallest
  // nonzero magnitude (every nonzero selected), found without a second pass.
  std::vector<float> x(100003, 0.0f);
  const std::vector<double> g = normal(x.size(), 121);
  size_t nonzero = 0;
  for (size_t i = 0; i < x.size(); i += 100, nonzero++) x[i] = static_cast<float>(g[i] == 0 ? 1 : g[i]);
  Estimate e = run(x, 0.05, dctThresholdBisect);
  CHECK(countAtLeast(x, e.tau) == nonzero);
  CHECK(e.passes == 1);
  // The k-th largest below the mean (density past P(|z| > mean) ~ 0.42).
  const std::vector<float> y = convert<float>(normal(100003, 122));
  for (double d : {0.6, 0.8, 0.95, 1.0}) {
    e = checkBisect(y, d);
    CHECK(e.tau < firstProbe(y));
  }
}

TEST_CASE("bisect on n = 1") {
  CHECK(run(std::vector<float>{-2.5f}, 0.01, dctThresholdBisect).tau == 2.5);
  CHECK(run(std::vector<float>{-2.5f}, 0.01, dctThresholdBisect).passes == 1);
  CHECK(run(std::vector<float>{0.0f}, 0.01, dctThresholdBisect).tau == std::numeric_limits<float>::denorm_min());
  CHECK(std::isinf(run(std::vector<float>{NAN}, 0.01, dctThresholdBisect).tau));
  CHECK(std::isinf(run(std::vector<double>{-INFINITY}, 1.0, dctThresholdBisect).tau));
  CHECK(run(std::vector<Half>{Half{0x3c00}}, 0.5, dctThresholdBisect).tau == 1.0);
}

TEST_CASE("bisect respects the pass budget; its first probe is the fixed-order mean") {
  const std::vector<double> h = cauchy(4194311, 131);  // three sum levels (> 2048^2 values)
  const std::vector<double> g = normal(1000003, 132, true);
  for (int budget : {1, 2, 3}) {
    for (double d : {0.001, 0.5}) {
      CHECK(run(h, d, dctThresholdBisect, 1, budget).passes <= budget);
      CHECK(run(convert<Half>(g), d, dctThresholdBisect, 1, budget).passes <= budget);
    }
  }
  // One pass: tau is the first probe, bit for bit (double data: the mean
  // itself), whatever the worker count (ctest runs this with 4 workers too).
  CHECK(run(h, 0.01, dctThresholdBisect, 1, 1).tau == firstProbe(h));
  CHECK(run(g, 0.01, dctThresholdBisect, 1, 1).tau == firstProbe(g));
  const std::vector<float> f = convert<float>(g);
  CHECK(run(f, 0.01, dctThresholdBisect, 1, 1).tau == firstProbe(f));
  const std::vector<Half> half = convert<Half>(g);
  CHECK(run(half, 0.01, dctThresholdBisect, 1, 1).tau == firstProbe(half));
  const std::vector<BFloat16> bf = convert<BFloat16>(logNormal(70001, 133));
  CHECK(run(bf, 0.01, dctThresholdBisect, 1, 1).tau == firstProbe(bf));
}

TEST_CASE("bisect's mean follows the documented summation order exactly") {
  // Lane 0 of every chunk starts at 2^53 and every other lane holds one 1.0:
  // in the fixed order the lanes' 1.0s pair up before they meet 2^53 (254 of
  // the 255 survive), summed one after the other they would all be lost. k = 1
  // keeps the first probe (the mean) as the answer.
  const size_t n = 3 * 2048 + 300;
  std::vector<double> x(n, 0.0);
  for (size_t c = 0; c * 2048 < n; c++) {
    x[c * 2048] = std::ldexp(1.0, 53) * static_cast<double>(c + 1);
    for (size_t l = 1; l < 256 && c * 2048 + l < n; l++) x[c * 2048 + l] = 1.0;
    if (c * 2048 + 256 < n) x[c * 2048 + 256] = 1.0;  // lane 0's second value: rounded away
  }
  const Estimate e = run(x, 1e-9, dctThresholdBisect, 1, 1);
  CHECK(e.passes == 1);
  CHECK(e.tau == firstProbe(x));
}

namespace {

// The estimate of acc = x + y read through the addend, never written.
template <typename T, typename B>
double runAccumulated(const std::vector<T>& x, const std::vector<B>& y, double density, dctThresholdMethod_t method,
                      dctResult_t expect = dctSuccess) {
  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  REQUIRE(ops.createContext(&ctx) == dctSuccess);
  ThresholdArgs args{x.data(), x.size(), Stored<T>::type, density, method, 61};
  args.addend = y.data();
  args.addendType = Stored<B>::type;
  double tau = 0;
  CHECK(ops.threshold(ctx, &args, &tau, nullptr) == expect);
  ops.destroyContext(ctx);
  return tau;
}

// x + y formed here (y widened by the reference conversions) and estimated
// as plain data: the addend's estimate must equal it bit for bit.
template <typename T, typename B>
void checkAccumulated(size_t n, double density, dctThresholdMethod_t method) {
  const std::vector<T> x = randomVector<T>(n, 62);
  const std::vector<B> y = convert<B>(randomVector<double>(n, 63));
  std::vector<T> acc(n);
  for (size_t i = 0; i < n; i++) acc[i] = x[i] + static_cast<T>(Stored<B>::value(y[i]));
  CAPTURE(n);
  CAPTURE(density);
  CAPTURE(method);
  CAPTURE(Stored<B>::type);
  const double materialised = run(acc, density, method, 61).tau, read = runAccumulated(x, y, density, method);
  CHECK(std::memcmp(&materialised, &read, sizeof(double)) == 0);
}

}  // namespace

TEST_CASE("sampled and exact estimates of residual + grad equal the materialised sum's, bit for bit") {
  for (size_t n : kOddSizes)
    for (double d : {0.001, 0.01, 0.3})
      for (auto method : {dctThresholdSampled, dctThresholdExact}) {
        checkAccumulated<float, float>(n, d, method);
        checkAccumulated<float, Half>(n, d, method);
        checkAccumulated<float, BFloat16>(n, d, method);
        checkAccumulated<double, double>(n, d, method);
      }
  // Bisect passes over x many times (the caller materialises x), and an
  // accumulator is float or double: both refused, not misread.
  const std::vector<float> x = randomVector<float>(101, 64);
  runAccumulated(x, x, 0.1, dctThresholdBisect, dctInvalidArgument);
  const std::vector<Half> h = convert<Half>(randomVector<double>(101, 65));
  runAccumulated(h, h, 0.1, dctThresholdSampled, dctInvalidArgument);
}
