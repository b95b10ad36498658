// CUDA twin of the threshold estimators against the CPU twin: the same
// sample positions (splitmix64 stream), the same k, so the same tau exactly.
#include <limits>

#include "cuda_util.h"

using namespace dct;
using namespace dct::test;

namespace {

template <typename T>
void compareThreshold(Twins& tw, const std::vector<T>& x, double density, dctThresholdMethod_t method,
                      uint64_t seed) {
  CAPTURE(x.size());
  CAPTURE(density);
  CAPTURE(method);
  CAPTURE(sizeof(T));
  ThresholdArgs ca{x.data(), x.size(), dtypeOf<T>(), density, method, seed};
  double cpuTau = 0, gpuTau = 0;
  REQUIRE(tw.cpu.threshold(tw.cpuCtx, &ca, &cpuTau, nullptr) == dctSuccess);
  DeviceArray<T> dx(x);
  ThresholdArgs ga{dx.get(), x.size(), dtypeOf<T>(), density, method, seed};
  REQUIRE(tw.gpu.threshold(tw.gpuCtx, &ga, &gpuTau, tw.stream) == dctSuccess);
  CHECK(sameBits(gpuTau, cpuTau));
  CHECK(gpuTau > 0.0);
}

}  // namespace

TEST_CASE("CUDA exact and sampled thresholds match the CPU twin on odd sizes") {
  Twins tw;
  std::vector<size_t> sizes = kOddSizes;
  sizes.push_back(4194311);  // large enough that density 0.001 samples (2s < n)
  for (size_t n : sizes) {
    auto xf = randomVector<float>(n, 51);
    auto xd = randomVector<double>(n, 52);
    for (double d : {0.001, 0.01, 0.3, 1.0}) {
      for (auto method : {dctThresholdSampled, dctThresholdExact}) {
        compareThreshold(tw, xf, d, method, 51 + n);
        compareThreshold(tw, xd, d, method, 52 + n);
      }
    }
  }
}

TEST_CASE("CUDA threshold: positive floor for all-zero data, +inf for empty data") {
  Twins tw;
  std::vector<float> zeros(1000, 0.0f);
  compareThreshold(tw, zeros, 0.01, dctThresholdSampled, 1);
  compareThreshold(tw, zeros, 0.01, dctThresholdExact, 1);
  std::vector<double> dzeros(100000, 0.0);
  compareThreshold(tw, dzeros, 0.01, dctThresholdSampled, 2);

  ThresholdArgs empty{nullptr, 0, dctFloat32, 0.01, dctThresholdSampled, 3};
  double tau = 0;
  REQUIRE(tw.gpu.threshold(tw.gpuCtx, &empty, &tau, tw.stream) == dctSuccess);
  CHECK(tau == std::numeric_limits<double>::infinity());
}

TEST_CASE("CUDA threshold with many NaN/Inf (NaN ranks as +Inf) and denormals") {
  Twins tw;
  const size_t n = 200003;
  auto x = randomVector<float>(n, 61);
  for (size_t i = 0; i < n; i += 7) x[i] = std::numeric_limits<float>::quiet_NaN();
  for (size_t i = 3; i < n; i += 11) x[i] = -std::numeric_limits<float>::infinity();
  for (size_t i = 5; i < n; i += 13) x[i] = std::numeric_limits<float>::denorm_min() * float(i % 5);
  for (double d : {0.01, 0.1, 0.5})
    for (auto method : {dctThresholdSampled, dctThresholdExact}) compareThreshold(tw, x, d, method, 9);
  std::vector<double> tiny(n);
  for (size_t i = 0; i < n; i++) tiny[i] = std::numeric_limits<double>::denorm_min() * double(i % 3);
  compareThreshold(tw, tiny, 0.01, dctThresholdExact, 10);
  compareThreshold(tw, tiny, 0.9, dctThresholdExact, 10);
}

TEST_CASE("CUDA sampled threshold follows the seed like the CPU twin") {
  Twins tw;
  auto x = randomVector<float>(3000017, 81);
  for (uint64_t seed : {0ull, 1ull, 0xdeadbeefull, ~0ull}) compareThreshold(tw, x, 0.01, dctThresholdSampled, seed);
}
