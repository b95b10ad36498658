// CUDA twin against the CPU twin on the half types, byte for byte
// (half_util.h's rule): convert for every pair of types and several factors,
// add with a half (or any) second operand, and the fused EF + select
// (compact and dense) with fp16/bf16 gradients and values. Inputs carry
// NaN, +-Inf, subnormals and values past the half types' range.
#include "base/dtype.h"
#include "half_util.h"

using namespace dct;
using namespace dct::test;

namespace {

const std::vector<size_t> kSizes = {0, 1, 2, 3, 7, 11, 1000003};

template <typename D, typename S>
void compareConvert(Twins& tw, size_t n, double factor, uint64_t seed, bool inPlace) {
  CAPTURE(n);
  CAPTURE(factor);
  CAPTURE(dtypeName(dtypeOf<D>()));
  CAPTURE(dtypeName(dtypeOf<S>()));
  CAPTURE(inPlace);
  const auto src = mixedValues<S>(n, seed);
  std::vector<D> cpu(n);
  DeviceArray<S> dSrc(src);
  DeviceArray<D> dDst(inPlace ? 0 : n);
  D* gpuDst = reinterpret_cast<D*>(dSrc.get());
  if (inPlace) {
    std::memcpy(cpu.data(), src.data(), n * sizeof(D));
    REQUIRE(tw.cpu.convert(tw.cpuCtx, cpu.data(), dtypeOf<D>(), cpu.data(), dtypeOf<S>(), n, factor, nullptr) ==
            dctSuccess);
  } else {
    REQUIRE(tw.cpu.convert(tw.cpuCtx, cpu.data(), dtypeOf<D>(), src.data(), dtypeOf<S>(), n, factor, nullptr) ==
            dctSuccess);
    gpuDst = dDst.get();
  }
  REQUIRE(tw.gpu.convert(tw.gpuCtx, gpuDst, dtypeOf<D>(), dSrc.get(), dtypeOf<S>(), n, factor, tw.stream) ==
          dctSuccess);
  REQUIRE(tw.gpu.synchronize(tw.gpuCtx, tw.stream) == dctSuccess);
  std::vector<D> gpu(n);
  CUDA_REQUIRE(cudaMemcpy(gpu.data(), gpuDst, n * sizeof(D), cudaMemcpyDeviceToHost));
  requireSameResults(gpu, cpu, n);
}

// a never holds NaN (a NaN in both operands has no defined sign), b any
// value; a's Inf meeting b's -Inf makes the host's own NaN.
template <typename T, typename B>
void compareAdd(Twins& tw, size_t n, uint64_t seed, bool inPlace) {
  CAPTURE(n);
  CAPTURE(dtypeName(dtypeOf<T>()));
  CAPTURE(dtypeName(dtypeOf<B>()));
  CAPTURE(inPlace);
  const auto a = mixedValues<T>(n, seed, NaNs::none);
  const auto b = mixedValues<B>(n, seed + 1);
  std::vector<T> cpuA = a, cpuOut(n);
  T* cpuDst = inPlace ? cpuA.data() : cpuOut.data();
  REQUIRE(tw.cpu.add(tw.cpuCtx, cpuDst, cpuA.data(), b.data(), n, dtypeOf<T>(), dtypeOf<B>(), nullptr) ==
          dctSuccess);
  DeviceArray<T> dA(a), dOut(n);
  DeviceArray<B> dB(b);
  T* gpuDst = inPlace ? dA.get() : dOut.get();
  REQUIRE(tw.gpu.add(tw.gpuCtx, gpuDst, dA.get(), dB.get(), n, dtypeOf<T>(), dtypeOf<B>(), tw.stream) ==
          dctSuccess);
  requireSameResults(inPlace ? dA.download() : dOut.download(), inPlace ? cpuA : cpuOut, n);
}

struct SelectCase {
  size_t n, capacity;
  double tau;
  int indexBytes;
  bool withGrad, dense;
  uint64_t seed;
};

// acc = residual + T(grad) (the residual never NaN: see compareAdd); past
// capacity only tame values, where acc - V(acc) + V(acc) is acc again.
template <typename T, typename G, typename V>
void compareSelect(Twins& tw, const SelectCase& c) {
  CAPTURE(c.n);
  CAPTURE(c.capacity);
  CAPTURE(c.tau);
  CAPTURE(c.indexBytes);
  CAPTURE(c.withGrad);
  CAPTURE(c.dense);
  CAPTURE(dtypeName(dtypeOf<T>()));
  CAPTURE(dtypeName(dtypeOf<G>()));
  CAPTURE(dtypeName(dtypeOf<V>()));
  const bool wild = c.dense || c.capacity >= c.n;
  const auto residual = mixedValues<T>(c.n, c.seed, NaNs::none, wild);
  const auto grad = mixedValues<G>(c.n, c.seed + 1, NaNs::any, wild);
  const size_t slots = c.dense ? c.n : c.capacity;
  const size_t indexBytes = c.dense ? 0 : slots * c.indexBytes;

  std::vector<T> cpuResidual = residual;
  std::vector<uint8_t> cpuIdx(indexBytes + 8);
  std::vector<V> cpuVal(slots + 1);
  SelectArgs ca{c.withGrad ? grad.data() : nullptr, cpuResidual.data(), c.n, dtypeOf<T>(), c.indexBytes, c.tau,
                c.capacity, c.dense ? nullptr : cpuIdx.data(), cpuVal.data()};
  ca.gradType = dtypeOf<G>();
  ca.valueType = dtypeOf<V>();
  REQUIRE((c.dense ? tw.cpu.selectDense(tw.cpuCtx, &ca, nullptr) : tw.cpu.selectCompact(tw.cpuCtx, &ca, nullptr)) ==
          dctSuccess);

  DeviceArray<T> dResidual(residual);
  DeviceArray<G> dGrad(grad);
  DeviceArray<uint8_t> dIdx(indexBytes + 8);
  DeviceArray<V> dVal(slots + 1);
  dIdx.fillBytes(0xff);
  dVal.fillBytes(0xff);
  SelectArgs ga{c.withGrad ? dGrad.get() : nullptr, dResidual.get(), c.n, dtypeOf<T>(), c.indexBytes, c.tau,
                c.capacity, c.dense ? nullptr : dIdx.get(), dVal.get()};
  ga.gradType = dtypeOf<G>();
  ga.valueType = dtypeOf<V>();
  REQUIRE((c.dense ? tw.gpu.selectDense(tw.gpuCtx, &ga, tw.stream) : tw.gpu.selectCompact(tw.gpuCtx, &ga, tw.stream)) ==
          dctSuccess);

  REQUIRE(ga.nnz == ca.nnz);
  CHECK(ga.selected == ca.selected);
  CHECK(ga.nonFinite == ca.nonFinite);
  const auto idx = dIdx.download();
  if (!c.dense) REQUIRE(std::memcmp(idx.data(), cpuIdx.data(), ca.nnz * c.indexBytes) == 0);
  auto val = dVal.download();
  requireSameResults(val, cpuVal, c.dense ? c.n : ca.nnz);
  const uint16_t guard = 0xffff;
  if (!c.dense) CHECK(std::memcmp(&val[ca.nnz], &guard, sizeof(guard)) == 0);  // nothing past nnz
  requireSameResults(dResidual.download(), cpuResidual, c.n);
}

template <typename T, typename G, typename V>
void compareSelectSizes(Twins& tw, uint64_t seed) {
  for (size_t n : kSizes) {
    for (bool dense : {false, true}) {
      compareSelect<T, G, V>(tw, {n, n, 1.0, 4, true, dense, seed++});
      compareSelect<T, G, V>(tw, {n, n, 1e-30, 8, true, dense, seed++});  // every nonzero
      compareSelect<T, G, V>(tw, {n, n, 2.5, 4, false, dense, seed++});
    }
    compareSelect<T, G, V>(tw, {n, n / 10, 0.5, 4, true, false, seed++});  // past capacity
    compareSelect<T, G, V>(tw, {n, 0, 0.5, 8, true, false, seed++});
  }
}

}  // namespace

TEST_CASE("CUDA convert matches the CPU twin for every pair of types") {
  Twins tw;
  uint64_t seed = 500;
  forEachType([&]<typename D>() {
    forEachType([&]<typename S>() {
      for (size_t n : kSizes)
        for (double factor : {1.0, 0.25, -3.0, 1.0 / 3.0, 0.0, 1e6, 1e-30})
          compareConvert<D, S>(tw, n, factor, seed++, false);
      if constexpr (sizeof(D) == sizeof(S))  // the same buffer, rewritten in place
        for (double factor : {1.0, 0.125, 7.0}) compareConvert<D, S>(tw, 1000003, factor, seed++, true);
    });
  });
}

TEST_CASE("CUDA add widens a half (or any) second operand as the CPU twin does") {
  Twins tw;
  uint64_t seed = 700;
  forEachType([&]<typename B>() {
    for (size_t n : kSizes)
      for (bool inPlace : {false, true}) {
        compareAdd<float, B>(tw, n, seed++, inPlace);
        compareAdd<double, B>(tw, n, seed++, inPlace);
      }
  });
}

TEST_CASE("CUDA select with fp16/bf16 gradients and values matches the CPU twin") {
  Twins tw;
  compareSelectSizes<float, Half, Half>(tw, 1000);
  compareSelectSizes<float, BFloat16, BFloat16>(tw, 2000);
  compareSelectSizes<float, Half, BFloat16>(tw, 3000);
  compareSelectSizes<float, float, Half>(tw, 4000);  // fp32 gradients sent as halves
  compareSelectSizes<float, float, BFloat16>(tw, 5000);
  compareSelectSizes<float, BFloat16, float>(tw, 6000);
  compareSelectSizes<double, double, float>(tw, 7000);
  compareSelectSizes<double, double, Half>(tw, 8000);
  compareSelectSizes<double, Half, BFloat16>(tw, 9000);  // the CUDA dense path adds first here
  compareSelectSizes<double, float, double>(tw, 9500);
}
