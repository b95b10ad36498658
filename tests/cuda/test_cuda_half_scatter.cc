// CUDA scatter-add (plain and packed indices) against the CPU twin when the
// dense buffer or the values are fp16/bf16: every pair the CUDA twin takes
// (values at most as wide as the dense buffer), ascending and repeated
// indices, byte for byte (half_util.h's rule). Wider values than the dense
// buffer are refused with dctNotSupported.
#include "base/dtype.h"
#include "half_util.h"
#include "kernels/index_packing.h"

using namespace dct;
using namespace dct::test;

namespace {

// The dense buffer holds no NaN; repeated indices get negative NaNs only
// (two NaNs meeting in one sum must agree on the sign to have a defined one).
template <typename D, typename V, typename I>
void compareScatter(Twins& tw, size_t n, size_t nnz, bool sortedUnique, bool packed, uint64_t seed) {
  CAPTURE(n);
  CAPTURE(nnz);
  CAPTURE(sortedUnique);
  CAPTURE(packed);
  CAPTURE(dtypeName(dtypeOf<D>()));
  CAPTURE(dtypeName(dtypeOf<V>()));
  CAPTURE(sizeof(I));
  const auto idx = randomIndices<I>(n, nnz, sortedUnique, seed);
  const auto val = mixedValues<V>(nnz, seed + 1, sortedUnique ? NaNs::any : NaNs::negative);
  const auto dense = mixedValues<D>(n, seed + 2, NaNs::none);
  const int indexBytes = static_cast<int>(sizeof(I));

  std::vector<uint8_t> bytes;
  if (packed) {
    bytes.resize(packing::maxPackedBytes(nnz, sizeof(I)));
    PackArgs pa{idx.data(), nnz, indexBytes, bytes.data()};
    REQUIRE(tw.cpu.packIndices(tw.cpuCtx, &pa, nullptr) == dctSuccess);
    bytes.resize(pa.bytes);
  }
  std::vector<D> cpuDense = dense;
  ScatterArgs ca{cpuDense.data(), n, dtypeOf<D>(), indexBytes, packed ? static_cast<const void*>(bytes.data()) : idx.data(),
                 val.data(), nnz, sortedUnique, bytes.size(), dtypeOf<V>()};
  REQUIRE((packed ? tw.cpu.scatterAddPacked(tw.cpuCtx, &ca, nullptr) : tw.cpu.scatterAdd(tw.cpuCtx, &ca, nullptr)) ==
          dctSuccess);

  DeviceArray<D> dDense(dense);
  DeviceArray<V> dVal(val);
  DeviceArray<I> dIdx(idx);
  DeviceArray<uint8_t> dBytes(bytes);
  ScatterArgs ga{dDense.get(), n, dtypeOf<D>(), indexBytes, packed ? static_cast<const void*>(dBytes.get()) : dIdx.get(),
                 dVal.get(), nnz, sortedUnique, bytes.size(), dtypeOf<V>()};
  REQUIRE((packed ? tw.gpu.scatterAddPacked(tw.gpuCtx, &ga, tw.stream) : tw.gpu.scatterAdd(tw.gpuCtx, &ga, tw.stream)) ==
          dctSuccess);
  REQUIRE(tw.gpu.synchronize(tw.gpuCtx, tw.stream) == dctSuccess);
  requireSameResults(dDense.download(), cpuDense, n);
}

template <typename D, typename V, typename I>
void compareScatterSizes(Twins& tw, uint64_t& seed) {
  for (size_t n : {size_t(1), size_t(2), size_t(3), size_t(7), size_t(11), size_t(1000003)}) {
    for (size_t nnz : {size_t(0), size_t(1), n / 2, n}) {
      compareScatter<D, V, I>(tw, n, nnz, true, false, seed++);
      compareScatter<D, V, I>(tw, n, nnz, true, true, seed++);
    }
    for (size_t nnz : {size_t(1), n, 3 * n}) compareScatter<D, V, I>(tw, n, nnz, false, false, seed++);
  }
}

}  // namespace

TEST_CASE("CUDA scatter-add with fp16/bf16 values or dense buffers matches the CPU twin") {
  Twins tw;
  uint64_t seed = 100;
  forEachType([&]<typename D>() {
    forEachType([&]<typename V>() {
      if constexpr (sizeof(V) <= sizeof(D)) {
        compareScatterSizes<D, V, uint32_t>(tw, seed);
        compareScatterSizes<D, V, uint64_t>(tw, seed);
      }
    });
  });
}

TEST_CASE("CUDA scatter-add refuses values wider than the dense buffer") {
  Twins tw;
  DeviceArray<Half> dense(8);
  DeviceArray<float> values(2);
  DeviceArray<uint32_t> idx(std::vector<uint32_t>{1, 5});
  for (bool sortedUnique : {true, false}) {
    ScatterArgs a{dense.get(), 8, dctFloat16, 4, idx.get(), values.get(), 2, sortedUnique, 0, dctFloat32};
    CHECK(tw.gpu.scatterAdd(tw.gpuCtx, &a, tw.stream) == dctNotSupported);
  }
  ScatterArgs a{dense.get(), 8, dctBFloat16, 4, idx.get(), values.get(), 2, true, 64, dctFloat64};
  CHECK(tw.gpu.scatterAddPacked(tw.gpuCtx, &a, tw.stream) == dctNotSupported);
}
