// CUDA twin of the threshold estimators against the CPU twin, every method
// and value type: sampled and exact use the same sample positions
// (splitmix64 stream) and the same k; bisect the same integer statistics,
// the same fixed-order sum of |x| and the same host driver. So the same tau
// exactly, and for bisect the same number of counting passes.
#include <limits>
#include <random>

#include "../common/half_reference.h"
#include "cuda_util.h"
#include "kernels/sampling.h"

using namespace dct;
using namespace dct::test;

namespace {

constexpr dctThresholdMethod_t kMethods[] = {dctThresholdSampled, dctThresholdExact, dctThresholdBisect};

template <typename T>
void compareThreshold(Twins& tw, const std::vector<T>& x, double density, dctThresholdMethod_t method,
                      uint64_t seed, int maxPasses = 0) {
  CAPTURE(x.size());
  CAPTURE(density);
  CAPTURE(method);
  CAPTURE(dtypeOf<T>());
  CAPTURE(maxPasses);
  ThresholdArgs ca{x.data(), x.size(), dtypeOf<T>(), density, method, seed};
  ca.maxPasses = maxPasses;
  double cpuTau = 0, gpuTau = 0;
  REQUIRE(tw.cpu.threshold(tw.cpuCtx, &ca, &cpuTau, nullptr) == dctSuccess);
  DeviceArray<T> dx(x);
  ThresholdArgs ga{dx.get(), x.size(), dtypeOf<T>(), density, method, seed};
  ga.maxPasses = maxPasses;
  ga.passes = -1;
  REQUIRE(tw.gpu.threshold(tw.gpuCtx, &ga, &gpuTau, tw.stream) == dctSuccess);
  CHECK(sameBits(gpuTau, cpuTau));
  CHECK(ga.passes == ca.passes);
  CHECK(gpuTau > 0.0);
}

template <typename T>
void compareAll(Twins& tw, const std::vector<T>& x, std::initializer_list<double> densities, uint64_t seed) {
  for (double d : densities)
    for (auto method : kMethods) compareThreshold(tw, x, d, method, seed);
}


template <typename T>
std::vector<T> convert(const std::vector<double>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); i++) {
    if constexpr (std::is_same_v<T, Half>) out[i] = Half{dcttest::refFloatToHalf(static_cast<float>(v[i]))};
    else if constexpr (std::is_same_v<T, BFloat16>) out[i] = BFloat16{dcttest::refFloatToBf16(static_cast<float>(v[i]))};
    else out[i] = static_cast<T>(v[i]);
  }
  return out;
}

}  // namespace

TEST_CASE("CUDA thresholds match the CPU twin on odd sizes, every method") {
  Twins tw;
  std::vector<size_t> sizes = kOddSizes;
  sizes.push_back(4194311);  // large enough that density 0.001 samples (2s < n); 3 sum levels
  for (size_t n : sizes) {
    auto xf = randomVector<float>(n, 51);
    auto xd = randomVector<double>(n, 52);
    for (double d : {0.001, 0.01, 0.3, 1.0}) {
      for (auto method : kMethods) {
        compareThreshold(tw, xf, d, method, 51 + n);
        compareThreshold(tw, xd, d, method, 52 + n);
      }
    }
  }
}

TEST_CASE("CUDA thresholds on fp16 and bf16 data match the CPU twin, every method") {
  Twins tw;
  for (size_t n : {size_t(1), size_t(7), size_t(11), size_t(1000003), size_t(4194311)}) {
    const std::vector<double> g = randomVector<double>(n, 53);  // NaN, +-Inf, zeros
    compareAll(tw, convert<Half>(g), {0.001, 0.01, 0.3, 1.0}, 53 + n);
    compareAll(tw, convert<BFloat16>(g), {0.001, 0.01, 0.3, 1.0}, 54 + n);
  }
  const std::vector<double> h = logNormal(300007, 55), c = cauchy(300007, 56);
  compareAll(tw, convert<Half>(h), {0.001, 0.1, 0.6}, 57);  // fp16: underflows, cauchy overflows
  compareAll(tw, convert<Half>(c), {0.001, 0.1, 0.6}, 58);
  compareAll(tw, convert<BFloat16>(c), {0.001, 0.1, 0.6}, 59);
}

TEST_CASE("CUDA bisect on heavy-tailed data, with and without a tight pass budget") {
  Twins tw;
  const std::vector<double> h = cauchy(1000003, 61), l = logNormal(2000003, 62);
  const std::vector<float> hf = convert<float>(h), lf = convert<float>(l);
  for (double d : {0.001, 0.01, 0.1, 0.5, 0.9}) {
    compareThreshold(tw, hf, d, dctThresholdBisect, 1);
    compareThreshold(tw, h, d, dctThresholdBisect, 1);
    compareThreshold(tw, lf, d, dctThresholdBisect, 1);
    compareThreshold(tw, l, d, dctThresholdBisect, 1);
    for (int budget : {1, 2, 3}) {
      compareThreshold(tw, hf, d, dctThresholdBisect, 1, budget);
      compareThreshold(tw, l, d, dctThresholdBisect, 1, budget);
    }
  }
}

TEST_CASE("CUDA threshold: positive floor for all-zero data, +inf for empty data") {
  Twins tw;
  std::vector<float> zeros(1000, 0.0f);
  for (auto method : kMethods) compareThreshold(tw, zeros, 0.01, method, 1);
  std::vector<double> dzeros(100000, 0.0);
  for (auto method : kMethods) compareThreshold(tw, dzeros, 0.01, method, 2);
  std::vector<Half> hzeros(5000, Half{0x8000});
  for (auto method : kMethods) compareThreshold(tw, hzeros, 0.01, method, 2);

  for (auto method : kMethods) {
    ThresholdArgs empty{nullptr, 0, dctFloat32, 0.01, method, 3};
    double tau = 0;
    REQUIRE(tw.gpu.threshold(tw.gpuCtx, &empty, &tau, tw.stream) == dctSuccess);
    CHECK(tau == std::numeric_limits<double>::infinity());
    CHECK(empty.passes == 0);
  }
}

TEST_CASE("CUDA threshold with many NaN/Inf (NaN ranks as +Inf) and denormals") {
  Twins tw;
  const size_t n = 200003;
  auto x = randomVector<float>(n, 61);
  for (size_t i = 0; i < n; i += 7) x[i] = std::numeric_limits<float>::quiet_NaN();
  for (size_t i = 3; i < n; i += 11) x[i] = -std::numeric_limits<float>::infinity();
  for (size_t i = 5; i < n; i += 13) x[i] = std::numeric_limits<float>::denorm_min() * float(i % 5);
  compareAll(tw, x, {0.01, 0.1, 0.3, 0.5}, 9);
  std::vector<double> tiny(n);
  for (size_t i = 0; i < n; i++) tiny[i] = std::numeric_limits<double>::denorm_min() * double(i % 3);
  for (auto method : kMethods) {
    compareThreshold(tw, tiny, 0.01, method, 10);
    compareThreshold(tw, tiny, 0.9, method, 10);
  }
  // Just under k non-finite values; finite values whose sum overflows.
  auto few = randomVector<float>(100003, 63, false);
  for (size_t i = 0; i < 800; i++) few[i * 101] = i % 2 ? NAN : -INFINITY;
  compareAll(tw, few, {0.01}, 11);
  auto huge = randomVector<double>(10001, 64, false);
  for (size_t i = 0; i < huge.size(); i += 3) huge[i] *= 1e307;
  compareAll(tw, huge, {1e-4, 0.01, 0.5}, 12);
}

TEST_CASE("CUDA bisect with ties and tiny inputs") {
  Twins tw;
  std::vector<float> same(1000, 1.5f);
  for (size_t i = 0; i < same.size(); i += 2) same[i] = -1.5f;
  compareAll(tw, same, {0.001, 0.5, 1.0}, 1);
  std::mt19937_64 rng(71);
  std::vector<float> levels(100003);
  for (auto& v : levels) v = std::ldexp(0.5f, static_cast<int>(rng() % 5)) * (rng() % 3 == 0 ? 0.0f : 1.0f);
  for (double d : {0.005, 0.1, 0.3, 0.7}) compareThreshold(tw, levels, d, dctThresholdBisect, 1, 64);
  for (float v : {-2.5f, 0.0f, NAN, INFINITY}) compareAll(tw, std::vector<float>{v}, {0.01, 1.0}, 2);
  compareAll(tw, std::vector<BFloat16>{BFloat16{0x3f80}}, {0.5}, 3);
}

TEST_CASE("CUDA bisect sums |x| in the CPU twin's order") {
  // Where the order shows (see test_threshold.cc): 2^53 at lane 0 of each
  // chunk, 1.0 in the other lanes; k = 1 keeps the mean as tau.
  Twins tw;
  for (size_t n : {size_t(3 * 2048 + 300), size_t(2049 * 2048 + 7)}) {  // host-only fold; one device fold level
    std::vector<double> x(n, 0.0);
    for (size_t c = 0; c * 2048 < n; c++) {
      x[c * 2048] = std::ldexp(1.0, 53) * static_cast<double>(c % 7 + 1);
      for (size_t l = 1; l < 257 && c * 2048 + l < n; l++) x[c * 2048 + l] = 1.0;
    }
    compareThreshold(tw, x, 1e-12, dctThresholdBisect, 1, 1);
    compareThreshold(tw, x, 1e-12, dctThresholdBisect, 1);
  }
}

TEST_CASE("CUDA sampled threshold follows the seed like the CPU twin") {
  Twins tw;
  auto x = randomVector<float>(3000017, 81);
  for (uint64_t seed : {0ull, 1ull, 0xdeadbeefull, ~0ull}) compareThreshold(tw, x, 0.01, dctThresholdSampled, seed);
}

namespace {

// residual + grad read through the addend on both twins: the same tau.
template <typename T, typename B>
void compareAccumulated(Twins& tw, size_t n, double density, dctThresholdMethod_t method) {
  CAPTURE(n);
  CAPTURE(density);
  CAPTURE(method);
  CAPTURE(dtypeOf<B>());
  const std::vector<T> x = randomVector<T>(n, 91);
  const std::vector<B> y = convert<B>(randomVector<double>(n, 92));
  ThresholdArgs ca{x.data(), n, dtypeOf<T>(), density, method, 93};
  ca.addend = y.data();
  ca.addendType = dtypeOf<B>();
  double cpuTau = 0, gpuTau = 0;
  REQUIRE(tw.cpu.threshold(tw.cpuCtx, &ca, &cpuTau, nullptr) == dctSuccess);
  DeviceArray<T> dx(x);
  DeviceArray<B> dy(y);
  ThresholdArgs ga{dx.get(), n, dtypeOf<T>(), density, method, 93};
  ga.addend = dy.get();
  ga.addendType = dtypeOf<B>();
  REQUIRE(tw.gpu.threshold(tw.gpuCtx, &ga, &gpuTau, tw.stream) == dctSuccess);
  CHECK(sameBits(gpuTau, cpuTau));
}

}  // namespace

TEST_CASE("CUDA estimates of residual + grad match the CPU twin; bisect refuses an addend") {
  Twins tw;
  std::vector<size_t> sizes = kOddSizes;
  sizes.push_back(4194311);
  for (size_t n : sizes) {
    if (n == 0) continue;
    for (double d : {0.001, 0.01, 0.3})
      for (auto method : {dctThresholdSampled, dctThresholdExact}) {
        compareAccumulated<float, float>(tw, n, d, method);
        compareAccumulated<float, Half>(tw, n, d, method);
        compareAccumulated<float, BFloat16>(tw, n, d, method);
        compareAccumulated<double, double>(tw, n, d, method);
      }
  }
  DeviceArray<float> dx(randomVector<float>(101, 94));
  ThresholdArgs bisect{dx.get(), 101, dctFloat32, 0.1, dctThresholdBisect, 1};
  bisect.addend = dx.get();
  double tau = 0;
  CHECK(tw.gpu.threshold(tw.gpuCtx, &bisect, &tau, tw.stream) == dctInvalidArgument);
}
