// The 1-bit allreduce (dctCompressorOnebit) on device buffers over NCCL,
// at world size 1 (a lent machine has one GPU; more ranks run over staged
// MPI in the MPI tests and on the CPU twin in test_onebit_async): after
// its first (synchronous) step a call returns while a kernel queued before
// it still runs, a captured call's replays equal eager calls bit for bit
// and advance the compressor as eager steps do, and a refused call fails
// the comm asynchronously with nothing committed.
#include <cstring>
#include <vector>

#include "nccl_one_rank.h"

using namespace nccltest;

namespace {

dctCompressor_t onebitCompressor(dctComm_t comm, size_t n) {
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  cfg.compressor = dctCompressorOnebit;
  cfg.warmupSteps = 0;
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(comm, n, dctFloat32, &cfg, &c) == dctSuccess);
  return c;
}

std::vector<float> residualOf(dctCompressor_t c, size_t n, cudaStream_t stream) {
  Tensor r(n);
  REQUIRE(dctCompressorGetResidual(c, r.p, stream) == dctSuccess);
  return r.download();
}

}  // namespace

TEST_CASE("a 1-bit dctSparseAllreduce on NCCL returns while a kernel queued before it still runs") {
  returnsUnderQueuedKernel(onebitCompressor);
}

TEST_CASE("a captured 1-bit dctSparseAllreduce replays N times as N eager calls") {
  OneRank r;
  const size_t n = 1000003;
  dctCompressor_t eager = onebitCompressor(r.comm, n), graphed = onebitCompressor(r.comm, n);
  replaysMatchEagerCalls(r, eager, graphed, n, 6);
  dctStats_t sa{}, sb{};
  REQUIRE(dctCompressorGetStats(eager, &sa) == dctSuccess);
  REQUIRE(dctCompressorGetStats(graphed, &sb) == dctSuccess);
  CHECK(std::memcmp(&sa.threshold, &sb.threshold, sizeof sa.threshold) == 0);  // the last worker scale
  const auto ha = residualOf(eager, n, r.stream), hb = residualOf(graphed, n, r.stream);
  CHECK(std::memcmp(ha.data(), hb.data(), n * sizeof(float)) == 0);
  dctCompressorDestroy(eager);
  dctCompressorDestroy(graphed);
}

TEST_CASE("a refused 1-bit call fails the comm asynchronously; its saved state continues on a new comm") {
  OneRank r, fresh, reference;
  const size_t n = 250007;
  Tensor grad(n), out(n), refOut(n);
  dctCompressor_t c = onebitCompressor(r.comm, n), ref = onebitCompressor(reference.comm, n);
  for (int step = 0; step < 2; step++) {
    grad.upload(step);
    REQUIRE(dctSparseAllreduce(grad.p, out.p, n, dctFloat32, dctSum, c, r.comm, r.stream) == dctSuccess);
    REQUIRE(dctSparseAllreduce(grad.p, refOut.p, n, dctFloat32, dctSum, ref, reference.comm, reference.stream) ==
            dctSuccess);
  }
  CUDA_OK(cudaStreamSynchronize(r.stream));
  const auto before = out.download();
  grad.upload(2);
  std::vector<float> host(n, 1.0f);  // a host send buffer with a device receive buffer: refused on this rank
  CHECK(dctSparseAllreduce(host.data(), out.p, n, dctFloat32, dctSum, c, r.comm, r.stream) == dctInvalidArgument);
  CUDA_OK(cudaStreamSynchronize(r.stream));
  dctResult_t async = dctSuccess;
  REQUIRE(dctCommGetAsyncError(r.comm, &async) == dctSuccess);
  CHECK(async == dctInvalidArgument);
  const dctResult_t later = dctSparseAllreduce(grad.p, out.p, n, dctFloat32, dctSum, c, r.comm, r.stream);
  CHECK(later == dctInvalidArgument);  // the sticky error, nothing changed
  CHECK(std::strstr(dctGetLastError(r.comm), "dctCommGetAsyncError") != nullptr);
  CUDA_OK(cudaStreamSynchronize(r.stream));
  const auto after = out.download();
  CHECK(std::memcmp(before.data(), after.data(), n * sizeof(float)) == 0);  // nothing decoded
  CHECK(stepsOf(c) == 2);
  size_t bytes = 0;
  REQUIRE(dctCompressorSaveState(c, nullptr, &bytes, r.stream) == dctSuccess);
  std::vector<char> state(bytes);
  REQUIRE(dctCompressorSaveState(c, state.data(), &bytes, r.stream) == dctSuccess);
  dctCompressor_t moved = onebitCompressor(fresh.comm, n);
  REQUIRE(dctCompressorLoadState(moved, state.data(), bytes, fresh.stream) == dctSuccess);
  for (int step = 2; step < 5; step++) {
    CAPTURE(step);
    grad.upload(step);
    REQUIRE(dctSparseAllreduce(grad.p, out.p, n, dctFloat32, dctSum, moved, fresh.comm, fresh.stream) == dctSuccess);
    REQUIRE(dctSparseAllreduce(grad.p, refOut.p, n, dctFloat32, dctSum, ref, reference.comm, reference.stream) ==
            dctSuccess);
    CUDA_OK(cudaStreamSynchronize(fresh.stream));
    CUDA_OK(cudaStreamSynchronize(reference.stream));
    const auto a = out.download(), b = refOut.download();
    REQUIRE(std::memcmp(a.data(), b.data(), n * sizeof(float)) == 0);
  }
  REQUIRE(dctCommGetAsyncError(fresh.comm, &async) == dctSuccess);
  CHECK(async == dctSuccess);
  dctCompressorDestroy(c);
  dctCompressorDestroy(moved);
  dctCompressorDestroy(ref);
}
