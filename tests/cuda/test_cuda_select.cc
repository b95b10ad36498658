// CUDA twin of the fused EF + select + compact (and its dense form) against
// the CPU twin on the same seeded inputs: indices identical, values and
// residual bit-exact, counts equal.
#include "cuda_util.h"

using namespace dct;
using namespace dct::test;

namespace {

// `outOfPlace`: the residual is read from one buffer and written to
// another (the compressor's spare), which must be left as it was.
template <typename T, typename I>
void compareCompact(Twins& tw, size_t n, uint64_t seed, bool withGrad, double tau, size_t capacity,
                    bool outOfPlace = false) {
  CAPTURE(n);
  CAPTURE(seed);
  CAPTURE(withGrad);
  CAPTURE(capacity);
  CAPTURE(outOfPlace);
  CAPTURE(sizeof(T));
  CAPTURE(sizeof(I));
  const auto grad = randomVector<T>(n, seed);
  const auto residual = randomVector<T>(n, seed + 1);

  std::vector<T> cpuResidual = outOfPlace ? std::vector<T>(n, T(-3)) : residual;
  std::vector<I> cpuIdx(capacity);
  std::vector<T> cpuVal(capacity);
  SelectArgs ca{withGrad ? grad.data() : nullptr, cpuResidual.data(), n, dtypeOf<T>(),
                static_cast<int>(sizeof(I)), tau, capacity, cpuIdx.data(), cpuVal.data()};
  if (outOfPlace) ca.residualIn = residual.data();
  REQUIRE(tw.cpu.selectCompact(tw.cpuCtx, &ca, nullptr) == dctSuccess);

  DeviceArray<T> dGrad(grad), dResidualIn(residual), dResidual(outOfPlace ? std::vector<T>(n, T(-3)) : residual);
  DeviceArray<I> dIdx(capacity + 1);  // one guard slot past capacity
  DeviceArray<T> dVal(capacity + 1);
  dIdx.fillBytes(0xff);
  dVal.fillBytes(0xff);
  SelectArgs ga{withGrad ? dGrad.get() : nullptr, dResidual.get(), n, dtypeOf<T>(),
                static_cast<int>(sizeof(I)), tau, capacity, dIdx.get(), dVal.get()};
  if (outOfPlace) ga.residualIn = dResidualIn.get();
  REQUIRE(tw.gpu.selectCompact(tw.gpuCtx, &ga, tw.stream) == dctSuccess);
  if (outOfPlace) requireSameValues(dResidualIn.download(), residual, n);

  REQUIRE(ga.nnz == ca.nnz);
  CHECK(ga.selected == ca.selected);
  CHECK(ga.nonFinite == ca.nonFinite);
  const auto idx = dIdx.download();
  const auto val = dVal.download();
  for (size_t j = 0; j < ca.nnz; j++) {
    CAPTURE(j);
    REQUIRE(idx[j] == cpuIdx[j]);
  }
  requireSameValues(val, cpuVal, ca.nnz);
  for (size_t j = ca.nnz; j <= capacity; j++) REQUIRE(idx[j] == I(~I(0)));  // nothing past nnz
  requireSameValues(dResidual.download(), cpuResidual, n);
}

template <typename T>
void compareDense(Twins& tw, size_t n, uint64_t seed, bool withGrad, double tau) {
  CAPTURE(n);
  CAPTURE(withGrad);
  CAPTURE(sizeof(T));
  const auto grad = randomVector<T>(n, seed);
  const auto residual = randomVector<T>(n, seed + 1);
  std::vector<T> cpuResidual = residual, cpuOut(n, T(-5));
  SelectArgs ca{withGrad ? grad.data() : nullptr, cpuResidual.data(), n, dtypeOf<T>(), 4, tau, n,
                nullptr, cpuOut.data()};
  REQUIRE(tw.cpu.selectDense(tw.cpuCtx, &ca, nullptr) == dctSuccess);

  DeviceArray<T> dGrad(grad), dResidual(residual), dOut(n);
  dOut.fillBytes(0x7f);
  SelectArgs ga{withGrad ? dGrad.get() : nullptr, dResidual.get(), n, dtypeOf<T>(), 4, tau, n,
                nullptr, dOut.get()};
  REQUIRE(tw.gpu.selectDense(tw.gpuCtx, &ga, tw.stream) == dctSuccess);
  CHECK(ga.selected == ca.selected);
  CHECK(ga.nnz == ca.nnz);
  CHECK(ga.nonFinite == ca.nonFinite);
  requireSameValues(dOut.download(), cpuOut, n);
  requireSameValues(dResidual.download(), cpuResidual, n);
}

}  // namespace

TEST_CASE("CUDA select matches the CPU twin on odd sizes, fp32/fp64, uint32/uint64") {
  Twins tw;
  for (size_t n : kOddSizes) {
    compareCompact<float, uint32_t>(tw, n, 11, true, 1.5, n);
    compareCompact<float, uint32_t>(tw, n, 12, false, 2.0, n);
    compareCompact<double, uint32_t>(tw, n, 13, true, 1.0, n);
    compareCompact<float, uint64_t>(tw, n, 14, true, 2.5, n);
    compareCompact<double, uint64_t>(tw, n, 15, false, 0.5, n);
  }
}

TEST_CASE("CUDA select past capacity keeps the rest in the residual") {
  Twins tw;
  for (size_t n : kOddSizes) {
    compareCompact<float, uint32_t>(tw, n, 21, true, 1.0, n / 10);
    compareCompact<float, uint32_t>(tw, n, 22, true, 1.0, 0);
    compareCompact<double, uint64_t>(tw, n, 23, true, 0.25, n / 3 + 1);
    compareCompact<double, uint32_t>(tw, n, 24, false, 3.0, 5);
  }
}

// The one-pass kernel's look-back (cuda_select.cu): out of place, 16K
// tiles, and capacity cut at a tile's end (4096 entries) and inside one
// thread's 16 (a tiny tau takes nearly every entry).
TEST_CASE("CUDA select out of place, over many tiles, cut at and inside a tile") {
  Twins tw;
  for (size_t n : kOddSizes) {
    compareCompact<float, uint32_t>(tw, n, 51, true, 1.5, n, true);
    compareCompact<double, uint64_t>(tw, n, 52, true, 1.0, n / 7, true);
  }
  compareCompact<float, uint32_t>(tw, size_t(1) << 26, 53, true, 2.5, size_t(1) << 26, true);
  for (size_t capacity : {size_t(4096), size_t(4096 + 7), size_t(3 * 4096 + 16)})
    compareCompact<float, uint32_t>(tw, 50001, 54, true, 1e-45, capacity);
}

TEST_CASE("CUDA select with a tiny tau takes every nonzero, never exact zeros") {
  Twins tw;
  for (size_t n : {size_t(4099), size_t(1) << 20}) {
    compareCompact<float, uint32_t>(tw, n, 31, true, 1e-45, n);
    compareCompact<double, uint64_t>(tw, n, 32, true, 4.9e-324, n);
  }
}

TEST_CASE("CUDA select on the default stream, reusing one context across sizes") {
  Twins tw;
  cudaStream_t mine = tw.stream;
  tw.stream = nullptr;  // legacy default stream
  for (size_t n : {size_t(1000003), size_t(7), size_t(3000017)})
    compareCompact<float, uint32_t>(tw, n, 41 + n, true, 1.0, n / 50);
  tw.stream = mine;
}

TEST_CASE("CUDA dense select matches the CPU twin") {
  Twins tw;
  for (size_t n : kOddSizes) {
    for (bool withGrad : {true, false}) {
      compareDense<float>(tw, n, 71, withGrad, 1.2);
      compareDense<double>(tw, n, 73, withGrad, 0.7);
    }
  }
}

// Type triples the CPU twin refuses (a gradient or values wider than the
// accumulation type) the CUDA twin refuses too, compact and dense, and
// writes nothing.
TEST_CASE("CUDA select refuses the type pairs the CPU twin refuses") {
  Twins tw;
  const size_t n = 1001;
  const auto grad = randomVector<double>(n, 95);
  const auto residual = randomVector<float>(n, 96);
  DeviceArray<double> dGrad(grad);
  DeviceArray<float> dResidual(residual);
  DeviceArray<uint32_t> dIdx(n);
  DeviceArray<double> dVal(n);
  std::vector<float> cpuResidual = residual;
  std::vector<uint32_t> cpuIdx(n);
  std::vector<double> cpuVal(n);
  for (bool wideGrad : {true, false}) {
    CAPTURE(wideGrad);
    SelectArgs ca{wideGrad ? grad.data() : nullptr, cpuResidual.data(), n, dctFloat32, 4, 0.5, n,
                  cpuIdx.data(), cpuVal.data()};
    SelectArgs ga{wideGrad ? dGrad.get() : nullptr, dResidual.get(), n, dctFloat32, 4, 0.5, n,
                  dIdx.get(), dVal.get()};
    for (SelectArgs* a : {&ca, &ga}) {
      if (wideGrad) a->gradType = dctFloat64;
      else a->valueType = dctFloat64;
    }
    CHECK(tw.cpu.selectCompact(tw.cpuCtx, &ca, nullptr) == dctNotSupported);
    CHECK(tw.gpu.selectCompact(tw.gpuCtx, &ga, tw.stream) == dctNotSupported);
    CHECK(tw.cpu.selectDense(tw.cpuCtx, &ca, nullptr) == dctNotSupported);
    CHECK(tw.gpu.selectDense(tw.gpuCtx, &ga, tw.stream) == dctNotSupported);
  }
  REQUIRE(tw.gpu.synchronize(tw.gpuCtx, tw.stream) == dctSuccess);
  CHECK(cpuResidual == residual);
  CHECK(dResidual.download() == residual);
}
