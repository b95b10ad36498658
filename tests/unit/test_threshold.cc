// Threshold estimators (CPU twin): exact and sampled against references,
// and the sampled estimate's selection rate on gradient-like data.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>

#include "kernels/kernels.h"
#include "reference.h"

using namespace dct;
using namespace dct::test;

namespace {

template <typename T>
double magnitude(T x) {
  return std::isnan(x) ? INFINITY : std::fabs(static_cast<double>(x));
}

// k-th largest magnitude among the given positions, as the contract says.
template <typename T>
double referenceKth(const std::vector<T>& x, const std::vector<size_t>& positions, double density) {
  std::vector<double> m;
  for (size_t p : positions) m.push_back(magnitude(x[p]));
  std::sort(m.begin(), m.end(), std::greater<double>());
  double kd = std::round(density * m.size());
  size_t k = kd < 1 ? 1 : std::min(m.size(), static_cast<size_t>(kd));
  return m[k - 1];
}

template <typename T>
double run(const std::vector<T>& x, double density, dctThresholdMethod_t method, uint64_t seed) {
  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  REQUIRE(ops.createContext(&ctx) == dctSuccess);
  ThresholdArgs args{x.data(), x.size(), sizeof(T) == 8 ? dctFloat64 : dctFloat32, density, method, seed};
  double tau = 0;
  REQUIRE(ops.threshold(ctx, &args, &tau, nullptr) == dctSuccess);
  ops.destroyContext(ctx);
  return tau;
}

template <typename T>
void checkBoth(size_t n, double density, uint64_t seed) {
  CAPTURE(n);
  CAPTURE(density);
  auto x = randomVector<T>(n, seed);
  std::vector<size_t> all(n);
  for (size_t i = 0; i < n; i++) all[i] = i;
  double floor = std::numeric_limits<T>::denorm_min();
  double exact = std::max(referenceKth(x, all, density), floor);
  CHECK(run(x, density, dctThresholdExact, seed) == exact);

  size_t s = thresholdSampleSize(n, density);
  std::vector<size_t> sample;
  if (s == n) {
    sample = all;
  } else {
    uint64_t state = seed;
    for (size_t i = 0; i < s; i++) sample.push_back(samplePosition(splitmix64(state), n));
  }
  CHECK(run(x, density, dctThresholdSampled, seed) == std::max(referenceKth(x, sample, density), floor));
}

}  // namespace

TEST_CASE("exact and sampled thresholds match references on odd sizes") {
  for (size_t n : kOddSizes) {
    if (n == 0) continue;
    for (double d : {0.001, 0.01, 0.3, 1.0}) {
      checkBoth<float>(n, d, 51);
      checkBoth<double>(n, d, 52);
    }
  }
}

TEST_CASE("threshold is positive even for all-zero data, infinite for empty data") {
  std::vector<float> zeros(1000, 0.0f);
  CHECK(run(zeros, 0.01, dctThresholdSampled, 1) > 0.0);
  CHECK(run(zeros, 0.01, dctThresholdExact, 1) > 0.0);
  std::vector<float> empty;
  CHECK(std::isinf(run(empty, 0.01, dctThresholdSampled, 1)));
}

TEST_CASE("sampled tau on 1e6 normal values at density 1% selects within [k/2, 2k]") {
  const size_t n = 1000000;
  auto x = randomVector<float>(n, 61, false);
  const size_t k = n / 100;
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u}) {
    double tau = run(x, 0.01, dctThresholdSampled, seed);
    size_t count = std::count_if(x.begin(), x.end(), [&](float v) { return std::fabs(v) >= tau; });
    CAPTURE(seed);
    CHECK(count >= k / 2);
    CHECK(count <= 2 * k);
  }
}
