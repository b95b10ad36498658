// The CUDA twin's 1-bit kernels against the CPU twin on the same seeded
// inputs, byte for byte: sign words, the fixed-order sum of squares and the
// scale, the error (NaN-aware only where the step is non-finite and never
// committed), the server average and the decode (halves included; a NaN
// factor's canonical NaN bit for bit). Sizes cover several reduction levels.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "../common/onebit_reference.h"
#include "cuda_util.h"
#include "base/half_types.h"

using namespace dct;
using namespace dct::test;

namespace {

const std::vector<size_t> kSizes = {0, 1, 31, 32, 33, 1023, 1025, 33000, 1000003, (size_t(1) << 22) + 17};

template <typename T>
void requireSameBytes(const std::vector<T>& a, const std::vector<T>& b) {
  REQUIRE(a.size() == b.size());
  if (!a.empty()) REQUIRE(std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <typename T>
void checkCompress(Twins& tw, size_t n, uint64_t seed, bool withInput, bool poison) {
  using A = typename Value<T>::Acc;
  CAPTURE(n);
  CAPTURE(dtypeOf<T>());
  CAPTURE(withInput);
  CAPTURE(poison);
  std::vector<T> input = seededValues<T>(n, seed);
  if (poison && n) input[n / 2] = Value<T>::store(std::numeric_limits<A>::infinity());
  const std::vector<A> errorIn = seededValues<A>(n, seed + 1, 0.5);
  const size_t words = onebitWords(n), scratchDoubles = onebitScratchBytes(n) / sizeof(double);

  std::vector<uint32_t> cpuSigns(words);
  std::vector<A> cpuError(n);
  std::vector<double> cpuScratch(scratchDoubles);
  A cpuScale = A(-1);
  OnebitCompressArgs c{withInput ? input.data() : nullptr, errorIn.data(), cpuError.data(), n, dtypeOf<T>(),
                       cpuSigns.data(), &cpuScale, cpuScratch.data()};
  REQUIRE(tw.cpu.onebitCompress(tw.cpuCtx, &c, nullptr) == dctSuccess);

  DeviceArray<T> dIn(input);
  DeviceArray<A> dErr(errorIn);  // in place on the device: errorOut = errorIn
  DeviceArray<uint32_t> dSigns(words + 1);
  DeviceArray<A> dScale(1);
  DeviceArray<double> dScratch(scratchDoubles);
  dSigns.fillBytes(0xab);
  OnebitCompressArgs g{withInput ? dIn.get() : nullptr, dErr.get(), dErr.get(), n, dtypeOf<T>(),
                       dSigns.get(), dScale.get(), dScratch.get()};
  REQUIRE(tw.gpu.onebitCompress(tw.gpuCtx, &g, tw.stream) == dctSuccess);
  CUDA_REQUIRE(cudaStreamSynchronize(tw.stream));

  CHECK(sameBits(g.sumOfSquares, c.sumOfSquares));
  CHECK(sameBits(g.scaleValue, c.scaleValue));  // both from the host's onebitScale
  CHECK(std::isnan(g.scaleValue) == poison);
  const std::vector<A> gpuScale = dScale.download();
  CHECK(sameValue(gpuScale[0], cpuScale));
  std::vector<uint32_t> gpuSigns = dSigns.download();
  CHECK(gpuSigns.back() == 0xababababu);  // nothing past the last word
  gpuSigns.pop_back();
  requireSameBytes(gpuSigns, cpuSigns);
  if (poison) requireSameValues(dErr.download(), cpuError, n);  // x itself; NaN payloads may differ
  else requireSameBytes(dErr.download(), cpuError);
}

template <typename T>
void checkAverage(Twins& tw, size_t n, int ranks, uint64_t seed) {
  using A = typename Value<T>::Acc;
  CAPTURE(n);
  CAPTURE(ranks);
  std::mt19937_64 rng(seed);
  const size_t stride = onebitWords(n) + 1;
  std::vector<uint32_t> signs(stride * ranks);
  for (auto& w : signs) w = static_cast<uint32_t>(rng());
  std::vector<A> scales = seededValues<A>(ranks, seed + 1);
  for (A& s : scales) s = std::fabs(s);
  const std::vector<A> error = seededValues<A>(n, seed + 2, 0.1);
  std::vector<A> cpuOut(n);
  OnebitAverageArgs c{signs.data(), stride, scales.data(), ranks, error.data(), cpuOut.data(), n, dtypeOf<T>()};
  REQUIRE(tw.cpu.onebitAverage(tw.cpuCtx, &c, nullptr) == dctSuccess);
  DeviceArray<uint32_t> dSigns(signs);
  DeviceArray<A> dScales(scales), dErr(error);
  OnebitAverageArgs g{dSigns.get(), stride, dScales.get(), ranks, dErr.get(), dErr.get(), n, dtypeOf<T>()};
  REQUIRE(tw.gpu.onebitAverage(tw.gpuCtx, &g, tw.stream) == dctSuccess);
  CUDA_REQUIRE(cudaStreamSynchronize(tw.stream));
  requireSameBytes(dErr.download(), cpuOut);
}

template <typename T>
void checkDecode(Twins& tw, size_t n, size_t chunkLength, double factor, uint64_t seed) {
  using A = typename Value<T>::Acc;
  CAPTURE(n);
  CAPTURE(chunkLength);
  CAPTURE(factor);
  std::mt19937_64 rng(seed);
  const size_t chunks = n ? (n + chunkLength - 1) / chunkLength : 1;
  std::vector<uint32_t> signs(chunks * chunkLength / 32);
  for (auto& w : signs) w = static_cast<uint32_t>(rng());
  std::vector<A> scales = seededValues<A>(chunks, seed + 1, 3e3);
  for (A& s : scales) s = std::fabs(s);
  std::vector<T> cpuOut(n);
  OnebitDecodeArgs c{signs.data(), scales.data(), chunkLength, n, dtypeOf<T>(), cpuOut.data(), factor};
  REQUIRE(tw.cpu.onebitDecode(tw.cpuCtx, &c, nullptr) == dctSuccess);
  DeviceArray<uint32_t> dSigns(signs);
  DeviceArray<A> dScales(scales);
  DeviceArray<T> dOut(n);
  OnebitDecodeArgs g{dSigns.get(), dScales.get(), chunkLength, n, dtypeOf<T>(), dOut.get(), factor};
  REQUIRE(tw.gpu.onebitDecode(tw.gpuCtx, &g, tw.stream) == dctSuccess);
  CUDA_REQUIRE(cudaStreamSynchronize(tw.stream));
  requireSameBytes(dOut.download(), cpuOut);  // the NaN factor's NaN too: canonical bits
}

}  // namespace

TEST_CASE("the CUDA table has the 1-bit ops") {
  CHECK((void*)cudaKernelOps().onebitCompress != nullptr);
  CHECK((void*)cudaKernelOps().onebitAverage != nullptr);
  CHECK((void*)cudaKernelOps().onebitDecode != nullptr);
}

TEST_CASE("1-bit compress: CUDA twin equals CPU twin byte for byte") {
  Twins tw;
  uint64_t seed = 1;
  for (size_t n : kSizes)
    for (bool withInput : {true, false}) {
      checkCompress<float>(tw, n, seed++, withInput, false);
      checkCompress<double>(tw, n, seed++, withInput, false);
      checkCompress<Half>(tw, n, seed++, withInput, false);
      checkCompress<BFloat16>(tw, n, seed++, withInput, false);
    }
  for (size_t n : {size_t(1), size_t(1025), size_t(100003)}) {
    checkCompress<float>(tw, n, seed++, true, true);
    checkCompress<Half>(tw, n, seed++, true, true);
  }
}

TEST_CASE("1-bit server average: CUDA twin equals CPU twin byte for byte") {
  Twins tw;
  uint64_t seed = 100;
  for (size_t n : {size_t(0), size_t(1), size_t(33), size_t(100003)})
    for (int ranks : {1, 2, 3, 8}) {
      checkAverage<float>(tw, n, ranks, seed++);
      checkAverage<double>(tw, n, ranks, seed++);
      checkAverage<Half>(tw, n, ranks, seed++);
    }
}

TEST_CASE("1-bit decode: CUDA twin equals CPU twin byte for byte") {
  Twins tw;
  uint64_t seed = 200;
  for (size_t n : {size_t(0), size_t(1), size_t(33), size_t(100003)})
    for (size_t chunk : {size_t(32), size_t(32 * 777)})
      for (double factor : {1.0, 4.0, std::numeric_limits<double>::quiet_NaN()}) {
        checkDecode<float>(tw, n, chunk, factor, seed++);
        checkDecode<double>(tw, n, chunk, factor, seed++);
        checkDecode<Half>(tw, n, chunk, factor, seed++);
        checkDecode<BFloat16>(tw, n, chunk, factor, seed++);
      }
}
