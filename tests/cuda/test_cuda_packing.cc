// CUDA twin of delta bit-packing against the CPU twin: the same bytes for
// the same index list, and the same dense result from a packed scatter-add.
#include "cuda_util.h"
#include "kernels/index_packing.h"

using namespace dct;
using namespace dct::test;

namespace {

template <typename I>
std::vector<uint8_t> cpuPack(Twins& tw, const std::vector<I>& idx) {
  std::vector<uint8_t> out(packing::maxPackedBytes(idx.size(), sizeof(I)));
  PackArgs args{idx.data(), idx.size(), static_cast<int>(sizeof(I)), out.data()};
  REQUIRE(tw.cpu.packIndices(tw.cpuCtx, &args, nullptr) == dctSuccess);
  out.resize(args.bytes);
  return out;
}

template <typename T, typename I>
void comparePacking(Twins& tw, size_t n, size_t nnz, uint64_t seed) {
  CAPTURE(n);
  CAPTURE(nnz);
  CAPTURE(sizeof(I));
  const auto idx = randomIndices<I>(n, nnz, true, seed);
  const auto val = randomVector<T>(nnz, seed + 1);
  const auto dense = randomVector<T>(n, seed + 2);
  const auto bytes = cpuPack(tw, idx);

  DeviceArray<I> dIdx(idx);
  DeviceArray<uint8_t> dPacked(packing::maxPackedBytes(nnz, sizeof(I)) + 8);
  dPacked.fillBytes(0xee);
  PackArgs pa{dIdx.get(), nnz, static_cast<int>(sizeof(I)), dPacked.get()};
  REQUIRE(tw.gpu.packIndices(tw.gpuCtx, &pa, tw.stream) == dctSuccess);
  REQUIRE(pa.bytes == bytes.size());
  auto gpuBytes = dPacked.download();
  gpuBytes.resize(pa.bytes);
  REQUIRE(gpuBytes == bytes);

  std::vector<T> cpuDense = dense;
  ScatterArgs ca{cpuDense.data(), n, dtypeOf<T>(), static_cast<int>(sizeof(I)), bytes.data(), val.data(),
                 nnz, true, bytes.size()};
  REQUIRE(tw.cpu.scatterAddPacked(tw.cpuCtx, &ca, nullptr) == dctSuccess);
  DeviceArray<T> dDense(dense), dVal(val);
  ScatterArgs ga{dDense.get(), n, dtypeOf<T>(), static_cast<int>(sizeof(I)), dPacked.get(), dVal.get(),
                 nnz, true, pa.bytes};
  REQUIRE(tw.gpu.scatterAddPacked(tw.gpuCtx, &ga, tw.stream) == dctSuccess);
  REQUIRE(tw.gpu.synchronize(tw.gpuCtx, tw.stream) == dctSuccess);
  requireSameValues(dDense.download(), cpuDense, n);
}

}  // namespace

TEST_CASE("CUDA packing writes the CPU twin's bytes; packed scatter-add matches") {
  Twins tw;
  for (size_t n : kOddSizes) {
    if (n == 0) continue;
    for (size_t nnz : {size_t(0), size_t(1), n / 100, n / 2, n}) {
      comparePacking<float, uint32_t>(tw, n, nnz, 71 + nnz);
      comparePacking<double, uint64_t>(tw, n, nnz, 72 + nnz);
    }
  }
}

TEST_CASE("CUDA packed scatter-add skips malformed groups whole") {
  Twins tw;
  const size_t n = 10000, nnz = 300;
  const auto idx = randomIndices<uint32_t>(n, nnz, true, 81);
  const auto val = randomVector<float>(nnz, 82, false);
  auto bytes = cpuPack(tw, idx);
  const packing::Layout l(nnz, 4);
  bytes[l.widths] = 40;  // group 0 wider than a uint32 index
  DeviceArray<uint8_t> dPacked(bytes);
  DeviceArray<float> dVal(val), dDense(std::vector<float>(idx.back(), 0.0f));  // last index past n
  ScatterArgs ga{dDense.get(), idx.back(), dctFloat32, 4, dPacked.get(), dVal.get(), nnz, true, bytes.size()};
  REQUIRE(tw.gpu.scatterAddPacked(tw.gpuCtx, &ga, tw.stream) == dctSuccess);
  REQUIRE(tw.gpu.synchronize(tw.gpuCtx, tw.stream) == dctSuccess);
  const auto out = dDense.download();
  for (size_t j = 0; j < 128; j++) REQUIRE(out[idx[j]] == 0.0f);       // group 0 skipped
  for (size_t j = 128; j < 256; j++) REQUIRE(out[idx[j]] == val[j]);   // group 1 added
  for (size_t j = 256; j + 1 < nnz; j++) REQUIRE(out[idx[j]] == 0.0f);  // group 2 skipped
}
