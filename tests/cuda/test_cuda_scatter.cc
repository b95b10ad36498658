// CUDA twin of scatter-add (sorted unique and repeated indices, kernel and
// dctScatterAdd) and of the streaming ops (accumulate, zero, scale) against
// the CPU twin, bit-exact.
#include <algorithm>
#include <random>

#include "cuda_util.h"
#include "dct/dct.h"

using namespace dct;
using namespace dct::test;

namespace {

template <typename T, typename I>
void compareScatter(Twins& tw, size_t n, size_t nnz, bool sortedUnique, uint64_t seed) {
  CAPTURE(n);
  CAPTURE(nnz);
  CAPTURE(sortedUnique);
  CAPTURE(sizeof(T));
  CAPTURE(sizeof(I));
  const auto idx = randomIndices<I>(n, nnz, sortedUnique, seed);
  const auto val = randomVector<T>(nnz, seed + 1);
  const auto dense = randomVector<T>(n, seed + 2);

  std::vector<T> cpuDense = dense;
  ScatterArgs ca{cpuDense.data(), n, dtypeOf<T>(), static_cast<int>(sizeof(I)), idx.data(), val.data(),
                 nnz, sortedUnique};
  REQUIRE(tw.cpu.scatterAdd(tw.cpuCtx, &ca, nullptr) == dctSuccess);

  DeviceArray<T> dDense(dense), dVal(val);
  DeviceArray<I> dIdx(idx);
  ScatterArgs ga{dDense.get(), n, dtypeOf<T>(), static_cast<int>(sizeof(I)), dIdx.get(), dVal.get(),
                 nnz, sortedUnique};
  REQUIRE(tw.gpu.scatterAdd(tw.gpuCtx, &ga, tw.stream) == dctSuccess);
  REQUIRE(tw.gpu.synchronize(tw.gpuCtx, tw.stream) == dctSuccess);
  requireSameValues(dDense.download(), cpuDense, n);
}

}  // namespace

TEST_CASE("CUDA scatter-add matches the CPU twin") {
  Twins tw;
  for (size_t n : kOddSizes) {
    if (n == 0) continue;
    for (size_t nnz : {size_t(0), size_t(1), n / 2, n, 3 * n}) {
      if (nnz <= n) {
        compareScatter<float, uint32_t>(tw, n, nnz, true, 31 + nnz);
        compareScatter<double, uint64_t>(tw, n, nnz, true, 32 + nnz);
        compareScatter<float, uint64_t>(tw, n, nnz, true, 35 + nnz);
        compareScatter<double, uint32_t>(tw, n, nnz, true, 36 + nnz);
      }
      // Repeated indices (3n: every target hit ~3 times; tiny n: long runs).
      compareScatter<float, uint32_t>(tw, n, nnz, false, 33 + nnz);
      compareScatter<double, uint32_t>(tw, n, nnz, false, 34 + nnz);
      compareScatter<float, uint64_t>(tw, n, nnz, false, 37 + nnz);
      compareScatter<double, uint64_t>(tw, n, nnz, false, 38 + nnz);
    }
  }
}

TEST_CASE("dctScatterAdd on device buffers: ascending and repeated indices, as on the host") {
  Twins tw;
  const size_t n = 1000003;
  for (bool ascending : {true, false}) {
    for (size_t nnz : {size_t(1), size_t(1000), n / 2, 2 * n}) {
      if (ascending && nnz > n) continue;
      CAPTURE(ascending);
      CAPTURE(nnz);
      const auto idx = randomIndices<uint32_t>(n, nnz, ascending, 61 + nnz);
      const auto val = randomVector<float>(nnz, 62 + nnz);
      auto host = randomVector<float>(n, 63);
      DeviceArray<float> dDense(host), dVal(val);
      DeviceArray<uint32_t> dIdx(idx);
      for (int call = 0; call < 2; call++) {  // the second call reuses the shared context
        REQUIRE(dctScatterAdd(host.data(), n, idx.data(), val.data(), nnz, dctFloat32, nullptr) == dctSuccess);
        REQUIRE(dctScatterAdd(dDense.get(), n, dIdx.get(), dVal.get(), nnz, dctFloat32, tw.stream) == dctSuccess);
        REQUIRE(cudaStreamSynchronize(tw.stream) == cudaSuccess);
        requireSameValues(dDense.download(), host, n);
      }
    }
  }
  // Out of range on the device: refused, nothing written.
  std::vector<uint32_t> bad = {1, 4};
  DeviceArray<uint32_t> dBad(bad);
  DeviceArray<float> dSmall(std::vector<float>(4, 0.0f)), dTwo(std::vector<float>{1.0f, 2.0f});
  CHECK(dctScatterAdd(dSmall.get(), 4, dBad.get(), dTwo.get(), 2, dctFloat32, tw.stream) == dctInvalidArgument);
  CHECK(dSmall.download() == std::vector<float>(4, 0.0f));
}

TEST_CASE("CUDA accumulate, zero and scale match the CPU twin") {
  Twins tw;
  for (size_t n : kOddSizes) {
    CAPTURE(n);
    auto r = randomVector<float>(n, 41), g = randomVector<float>(n, 42);
    DeviceArray<float> dr(r), dg(g);
    REQUIRE(tw.cpu.accumulate(tw.cpuCtx, r.data(), g.data(), n, dctFloat32, nullptr) == dctSuccess);
    REQUIRE(tw.gpu.accumulate(tw.gpuCtx, dr.get(), dg.get(), n, dctFloat32, tw.stream) == dctSuccess);
    REQUIRE(tw.gpu.synchronize(tw.gpuCtx, tw.stream) == dctSuccess);
    requireSameValues(dr.download(), r, n);
    REQUIRE(tw.cpu.scale(tw.cpuCtx, r.data(), n, dctFloat32, 1.0 / 3.0, nullptr) == dctSuccess);
    REQUIRE(tw.gpu.scale(tw.gpuCtx, dr.get(), n, dctFloat32, 1.0 / 3.0, tw.stream) == dctSuccess);
    REQUIRE(tw.gpu.synchronize(tw.gpuCtx, tw.stream) == dctSuccess);
    requireSameValues(dr.download(), r, n);
    REQUIRE(tw.gpu.zero(tw.gpuCtx, dr.get(), n * sizeof(float), tw.stream) == dctSuccess);
    REQUIRE(tw.gpu.synchronize(tw.gpuCtx, tw.stream) == dctSuccess);
    for (float v : dr.download()) REQUIRE(sameBits(v, 0.0f));

    auto rd = randomVector<double>(n, 43), gd = randomVector<double>(n, 44);
    DeviceArray<double> drd(rd), dgd(gd);
    REQUIRE(tw.cpu.accumulate(tw.cpuCtx, rd.data(), gd.data(), n, dctFloat64, nullptr) == dctSuccess);
    REQUIRE(tw.gpu.accumulate(tw.gpuCtx, drd.get(), dgd.get(), n, dctFloat64, tw.stream) == dctSuccess);
    REQUIRE(tw.cpu.scale(tw.cpuCtx, rd.data(), n, dctFloat64, 0.1, nullptr) == dctSuccess);
    REQUIRE(tw.gpu.scale(tw.gpuCtx, drd.get(), n, dctFloat64, 0.1, tw.stream) == dctSuccess);
    REQUIRE(tw.gpu.synchronize(tw.gpuCtx, tw.stream) == dctSuccess);
    requireSameValues(drd.download(), rd, n);
  }
}
