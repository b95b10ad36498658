// The 8-byte index path end to end (what tensors of 2^32 elements or more
// take): select with uint64 indices, pack them, scatter the packed message,
// CPU twin against CUDA twin bit for bit at every stage. Also packing of
// indices past 2^32, which no dense tensor in a test can reach.
#include <random>
#include <set>

#include "cuda_util.h"
#include "kernels/index_packing.h"

using namespace dct;
using namespace dct::test;

namespace {

template <typename T>
void comparePipeline(Twins& tw, size_t n, double tau, uint64_t seed) {
  CAPTURE(n);
  CAPTURE(tau);
  CAPTURE(sizeof(T));
  const auto grad = randomVector<T>(n, seed), residual = randomVector<T>(n, seed + 1);
  const auto dense = randomVector<T>(n, seed + 2);

  // Select.
  std::vector<T> cpuResidual = residual, cpuVal(n);
  std::vector<uint64_t> cpuIdx(n);
  SelectArgs ca{grad.data(), cpuResidual.data(), n, dtypeOf<T>(), 8, tau, n, cpuIdx.data(), cpuVal.data()};
  REQUIRE(tw.cpu.selectCompact(tw.cpuCtx, &ca, nullptr) == dctSuccess);
  DeviceArray<T> dGrad(grad), dResidual(residual), dVal(n);
  DeviceArray<uint64_t> dIdx(n);
  SelectArgs ga{dGrad.get(), dResidual.get(), n, dtypeOf<T>(), 8, tau, n, dIdx.get(), dVal.get()};
  REQUIRE(tw.gpu.selectCompact(tw.gpuCtx, &ga, tw.stream) == dctSuccess);
  REQUIRE(ga.nnz == ca.nnz);
  const size_t nnz = ca.nnz;
  const auto gpuIdx = dIdx.download();
  for (size_t j = 0; j < nnz; j++) REQUIRE(gpuIdx[j] == cpuIdx[j]);
  requireSameValues(dVal.download(), cpuVal, nnz);
  requireSameValues(dResidual.download(), cpuResidual, n);

  // Pack.
  const size_t room = packing::maxPackedBytes(nnz, 8);
  std::vector<uint8_t> cpuPacked(room);
  PackArgs cp{cpuIdx.data(), nnz, 8, cpuPacked.data()};
  REQUIRE(tw.cpu.packIndices(tw.cpuCtx, &cp, nullptr) == dctSuccess);
  DeviceArray<uint8_t> dPacked(room + 8);
  PackArgs gp{dIdx.get(), nnz, 8, dPacked.get()};
  REQUIRE(tw.gpu.packIndices(tw.gpuCtx, &gp, tw.stream) == dctSuccess);
  REQUIRE(gp.bytes == cp.bytes);
  auto gpuPacked = dPacked.download();
  if (nnz > 0) REQUIRE(std::memcmp(gpuPacked.data(), cpuPacked.data(), cp.bytes) == 0);

  // Scatter the packed message.
  std::vector<T> cpuDense = dense;
  ScatterArgs cs{cpuDense.data(), n, dtypeOf<T>(), 8, cpuPacked.data(), cpuVal.data(), nnz, true, cp.bytes};
  REQUIRE(tw.cpu.scatterAddPacked(tw.cpuCtx, &cs, nullptr) == dctSuccess);
  DeviceArray<T> dDense(dense);
  ScatterArgs gs{dDense.get(), n, dtypeOf<T>(), 8, dPacked.get(), dVal.get(), nnz, true, gp.bytes};
  REQUIRE(tw.gpu.scatterAddPacked(tw.gpuCtx, &gs, tw.stream) == dctSuccess);
  REQUIRE(tw.gpu.synchronize(tw.gpuCtx, tw.stream) == dctSuccess);
  requireSameValues(dDense.download(), cpuDense, n);
}

}  // namespace

TEST_CASE("8-byte indices: select, pack, packed scatter-add match the CPU twin") {
  Twins tw;
  for (size_t n : {size_t(1), size_t(129), size_t(100003), size_t(1000003)}) {
    comparePipeline<float>(tw, n, 2.0, 101 + n);   // ~5%
    comparePipeline<float>(tw, n, 0.5, 102 + n);   // ~60%: dense runs, narrow gaps
    comparePipeline<double>(tw, n, 2.5, 103 + n);  // ~1%
  }
}

TEST_CASE("8-byte indices past 2^32 pack to the CPU twin's bytes") {
  Twins tw;
  std::mt19937_64 rng(111);
  for (uint64_t span : {uint64_t(1) << 33, uint64_t(1) << 40, ~uint64_t(0)}) {
    CAPTURE(span);
    std::uniform_int_distribution<uint64_t> pos(uint64_t(1) << 32, span - 1);
    std::set<uint64_t> picked;
    while (picked.size() < 5000) picked.insert(pos(rng));
    const std::vector<uint64_t> idx(picked.begin(), picked.end());
    const size_t room = packing::maxPackedBytes(idx.size(), 8);
    std::vector<uint8_t> cpuPacked(room);
    PackArgs cp{idx.data(), idx.size(), 8, cpuPacked.data()};
    REQUIRE(tw.cpu.packIndices(tw.cpuCtx, &cp, nullptr) == dctSuccess);
    DeviceArray<uint64_t> dIdx(idx);
    DeviceArray<uint8_t> dPacked(room);
    PackArgs gp{dIdx.get(), idx.size(), 8, dPacked.get()};
    REQUIRE(tw.gpu.packIndices(tw.gpuCtx, &gp, tw.stream) == dctSuccess);
    REQUIRE(gp.bytes == cp.bytes);
    REQUIRE(std::memcmp(dPacked.download().data(), cpuPacked.data(), cp.bytes) == 0);
  }
}
