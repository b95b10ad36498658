// The CUDA twin's 1-bit kernels against the CPU twin on the same seeded
// inputs, byte for byte: sign words, the fixed-order sum of squares and the
// scale, the error (NaN-aware only where the step is non-finite and never
// committed), the slots (each chunk's scale before its signs), the server's
// compression of its ranks' mean and the decode (halves included; a NaN
// factor's canonical NaN bit for bit). Sizes cover several reduction levels.
#include <algorithm>
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

// Slots (onebit_kernels.h) of `chunks` chunks of chunkWords words, as
// 8-byte units so both twins see them aligned; filled with 0xab.
struct SlotBytes {
  size_t chunkWords, slotBytes;
  std::vector<uint64_t> units;
  SlotBytes(size_t cw, size_t chunks, size_t scaleBytes)
      : chunkWords(cw), slotBytes(onebitSlotBytes(cw, scaleBytes)),
        units((chunks * slotBytes + 7) / 8, 0xababababababababull) {}
  unsigned char* base() { return reinterpret_cast<unsigned char*>(units.data()); }
};

// Keeping x (keepX) and reading a kept x back (pending, its scale).
struct Keep {
  bool keepX = false, pending = false;
  double pendingScale = 0;
};

// Compress on both twins (x from the input, the error alone, or `mean`'s
// slots); signs and scales compared as the slots' bytes.
template <typename T>
void compareCompress(Twins& tw, size_t n, const std::vector<T>* input,
                     const std::vector<typename Value<T>::Acc>& errorIn, size_t chunkWords, bool poison,
                     SlotBytes* mean, int ranks, Keep keep = {}) {
  using A = typename Value<T>::Acc;
  const size_t words = onebitWords(n), scratchDoubles = onebitScratchBytes(n) / sizeof(double);
  const size_t cw = chunkWords ? chunkWords : std::max<size_t>(words, 1);
  const size_t chunks = std::max<size_t>((words + cw - 1) / cw, 1);

  SlotBytes cpuSlots(cw, chunks, sizeof(A));
  std::vector<A> cpuError(n);
  std::vector<double> cpuScratch(scratchDoubles);
  OnebitCompressArgs c{input ? input->data() : nullptr, errorIn.data(), cpuError.data(), n, dtypeOf<T>(),
                       cpuSlots.base(), cpuSlots.slotBytes, cw, static_cast<int>(chunks), cpuScratch.data()};
  if (mean) c.mean = OnebitMean{mean->base(), mean->slotBytes, ranks};
  c.keepX = keep.keepX;
  c.pending = keep.pending;
  c.pendingScale = keep.pendingScale;
  REQUIRE(tw.cpu.onebitCompress(tw.cpuCtx, &c, nullptr) == dctSuccess);

  DeviceArray<T> dIn(input ? *input : std::vector<T>{});
  DeviceArray<A> dErr(errorIn);  // in place on the device: errorOut = errorIn
  SlotBytes gpuSlots(cw, chunks, sizeof(A));
  DeviceArray<uint64_t> dSlots(gpuSlots.units);
  DeviceArray<uint64_t> dMean(mean ? mean->units : std::vector<uint64_t>{});
  DeviceArray<double> dScratch(scratchDoubles);
  OnebitCompressArgs g{input ? dIn.get() : nullptr, dErr.get(), dErr.get(), n, dtypeOf<T>(),
                       dSlots.get(), gpuSlots.slotBytes, cw, static_cast<int>(chunks), dScratch.get()};
  if (mean) g.mean = OnebitMean{dMean.get(), mean->slotBytes, ranks};
  g.keepX = keep.keepX;
  g.pending = keep.pending;
  g.pendingScale = keep.pendingScale;
  REQUIRE(tw.gpu.onebitCompress(tw.gpuCtx, &g, tw.stream) == dctSuccess);
  CUDA_REQUIRE(cudaStreamSynchronize(tw.stream));

  CHECK(sameBits(g.sumOfSquares, c.sumOfSquares));
  CHECK(sameBits(g.scaleValue, c.scaleValue));  // both from the host's onebitScale
  CHECK(std::isnan(g.scaleValue) == poison);
  requireSameBytes(dSlots.download(), cpuSlots.units);  // signs, scales, and nothing past the last word
  if (poison) requireSameValues(dErr.download(), cpuError, n);  // x itself; NaN payloads may differ
  else requireSameBytes(dErr.download(), cpuError);
}

template <typename T>
void checkCompress(Twins& tw, size_t n, uint64_t seed, bool withInput, bool poison, size_t chunkWords = 0) {
  using A = typename Value<T>::Acc;
  CAPTURE(n);
  CAPTURE(dtypeOf<T>());
  CAPTURE(withInput);
  CAPTURE(poison);
  CAPTURE(chunkWords);
  std::vector<T> input = seededValues<T>(n, seed);
  if (poison && n) input[n / 2] = Value<T>::store(std::numeric_limits<A>::infinity());
  const std::vector<A> errorIn = seededValues<A>(n, seed + 1, 0.5);
  compareCompress<T>(tw, n, withInput ? &input : nullptr, errorIn, chunkWords, poison, nullptr, 0);
}

// A server's compression of its ranks' mean plus its error.
template <typename T>
void checkMean(Twins& tw, size_t n, int ranks, uint64_t seed) {
  using A = typename Value<T>::Acc;
  CAPTURE(n);
  CAPTURE(dtypeOf<T>());
  CAPTURE(ranks);
  std::mt19937_64 rng(seed);
  const size_t cw = onebitWords(n) + 1;
  SlotBytes mean(cw, ranks, sizeof(A));
  for (auto& u : mean.units) u = rng();
  std::vector<A> scales = seededValues<A>(ranks, seed + 1);
  for (int r = 0; r < ranks; r++) {
    const A s = std::fabs(scales[r]);
    std::memcpy(mean.base() + r * mean.slotBytes, &s, sizeof(A));
  }
  const std::vector<A> error = seededValues<A>(n, seed + 2, 0.1);
  compareCompress<T>(tw, n, nullptr, error, 0, false, &mean, ranks);
}

template <typename T>
void checkDecode(Twins& tw, size_t n, size_t chunkWords, double factor, uint64_t seed) {
  using A = typename Value<T>::Acc;
  CAPTURE(n);
  CAPTURE(chunkWords);
  CAPTURE(factor);
  std::mt19937_64 rng(seed);
  const size_t chunkLength = 32 * chunkWords, chunks = n ? (n + chunkLength - 1) / chunkLength : 1;
  SlotBytes slots(chunkWords, chunks, sizeof(A));
  for (auto& u : slots.units) u = rng();
  std::vector<A> scales = seededValues<A>(chunks, seed + 1, 3e3);
  for (size_t j = 0; j < chunks; j++) {
    const A s = std::fabs(scales[j]);
    std::memcpy(slots.base() + j * slots.slotBytes, &s, sizeof(A));
  }
  std::vector<T> cpuOut(n);
  OnebitDecodeArgs c{slots.base(), slots.slotBytes, chunkWords, n, dtypeOf<T>(), cpuOut.data(), factor};
  REQUIRE(tw.cpu.onebitDecode(tw.cpuCtx, &c, nullptr) == dctSuccess);
  DeviceArray<uint64_t> dSlots(slots.units);
  DeviceArray<T> dOut(n);
  OnebitDecodeArgs g{dSlots.get(), slots.slotBytes, chunkWords, n, dtypeOf<T>(), dOut.get(), factor};
  REQUIRE(tw.gpu.onebitDecode(tw.gpuCtx, &g, tw.stream) == dctSuccess);
  CUDA_REQUIRE(cudaStreamSynchronize(tw.stream));
  requireSameBytes(dOut.download(), cpuOut);  // the NaN factor's NaN too: canonical bits
}

}  // namespace

TEST_CASE("the CUDA table has the 1-bit ops") {
  CHECK((void*)cudaKernelOps().onebitCompress != nullptr);
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
  for (size_t n : {size_t(33), size_t(100003), size_t(1000003)})  // several slots
    for (size_t cw : {size_t(1), size_t(33), size_t(7813)}) {
      checkCompress<float>(tw, n, seed++, true, false, cw);
      checkCompress<double>(tw, n, seed++, true, false, cw);
    }
}

TEST_CASE("1-bit kept x (keepX) and its error read back (pending): CUDA twin equals CPU twin byte for byte") {
  Twins tw;
  uint64_t seed = 50;
  for (size_t n : {size_t(1), size_t(33), size_t(100003), size_t(1000003)})
    for (Keep keep : {Keep{true, false, 0}, Keep{true, true, 0.75}, Keep{false, true, 1.5}}) {
      CAPTURE(n);
      CAPTURE(keep.keepX);
      CAPTURE(keep.pending);
      const std::vector<float> input = seededValues<float>(n, seed), x = seededValues<float>(n, seed + 1, 0.5);
      compareCompress<float>(tw, n, &input, x, 977, false, nullptr, 0, keep);
      const std::vector<double> xD = seededValues<double>(n, seed + 2);
      compareCompress<double>(tw, n, nullptr, xD, 0, false, nullptr, 0, keep);
      seed += 4;
    }
  for (int ranks : {1, 3, 8}) {  // a server's kept x
    const size_t n = 100003;
    SlotBytes mean(onebitWords(n) + 1, ranks, sizeof(float));
    std::mt19937_64 rng(seed++);
    for (auto& u : mean.units) u = rng() & 0x3f3f3f3f3f3f3f3full;  // finite positive scales
    const std::vector<float> x = seededValues<float>(n, seed++, 0.1);
    compareCompress<float>(tw, n, nullptr, x, 0, false, &mean, ranks, Keep{true, true, 0.25});
  }
}

TEST_CASE("1-bit server compression of the ranks' mean: CUDA twin equals CPU twin byte for byte") {
  Twins tw;
  uint64_t seed = 100;
  for (size_t n : {size_t(0), size_t(1), size_t(33), size_t(100003), size_t(1000003)})
    for (int ranks : {1, 2, 3, 8}) {
      checkMean<float>(tw, n, ranks, seed++);
      checkMean<double>(tw, n, ranks, seed++);
      checkMean<Half>(tw, n, ranks, seed++);
    }
}

TEST_CASE("1-bit decode: CUDA twin equals CPU twin byte for byte") {
  Twins tw;
  uint64_t seed = 200;
  for (size_t n : {size_t(0), size_t(1), size_t(33), size_t(100003)})
    for (size_t chunkWords : {size_t(1), size_t(777)})
      for (double factor : {1.0, 4.0, std::numeric_limits<double>::quiet_NaN()}) {
        checkDecode<float>(tw, n, chunkWords, factor, seed++);
        checkDecode<double>(tw, n, chunkWords, factor, seed++);
        checkDecode<Half>(tw, n, chunkWords, factor, seed++);
        checkDecode<BFloat16>(tw, n, chunkWords, factor, seed++);
      }
}
