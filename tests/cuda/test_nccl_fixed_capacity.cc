// dctSparseAllreduce's fixed-capacity step on device buffers over NCCL, at
// world size 1 (a lent machine has one GPU; more ranks run over staged MPI
// in the MPI tests): the call returns while a kernel queued before it still
// runs, and a captured call's replays equal eager calls bit for bit and
// advance the compressor as eager steps do.
#include <cstring>
#include <vector>

#include "nccl_one_rank.h"

using namespace nccltest;

namespace {

template <dctAlgorithm_t Algo = dctAlgoAuto>
dctCompressor_t fixedCompressor(dctComm_t comm, size_t n) {
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  cfg.density = 0.01;
  cfg.capacityFactor = Algo == dctAlgoGlobalTopk ? 1.25 : 1.0;
  cfg.algorithm = Algo;
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(comm, n, dctFloat32, &cfg, &c) == dctSuccess);
  return c;
}

// A captured step's replays and the eager steps end with the same residuals.
template <dctAlgorithm_t Algo>
void replaysAsEager() {
  OneRank r;
  const size_t n = 1000003;
  dctCompressor_t eager = fixedCompressor<Algo>(r.comm, n), graphed = fixedCompressor<Algo>(r.comm, n);
  replaysMatchEagerCalls(r, eager, graphed, n, 6);
  Tensor ra(n), rb(n);  // fp32 residuals, in device memory where the steps ran
  REQUIRE(dctCompressorGetResidual(eager, ra.p, r.stream) == dctSuccess);
  REQUIRE(dctCompressorGetResidual(graphed, rb.p, r.stream) == dctSuccess);
  const auto ha = ra.download(), hb = rb.download();
  CHECK(std::memcmp(ha.data(), hb.data(), n * sizeof(float)) == 0);
  dctCompressorDestroy(eager);
  dctCompressorDestroy(graphed);
}

}  // namespace

TEST_CASE("fixed-capacity dctSparseAllreduce on NCCL returns while a kernel queued before it still runs") {
  returnsUnderQueuedKernel(fixedCompressor<>);
}

TEST_CASE("a captured fixed-capacity dctSparseAllreduce replays N times as N eager calls") {
  replaysAsEager<dctAlgoAuto>();
}

TEST_CASE("fixed-capacity global top-k on NCCL: queued without blocking, replays equal eager calls") {
  returnsUnderQueuedKernel(fixedCompressor<dctAlgoGlobalTopk>);
  replaysAsEager<dctAlgoGlobalTopk>();
}

// The asynchronous error contract (docs/fixed_capacity.md): a rank whose own
// checks fail still queues the step and votes its error, so the step fails
// on the device and the comm's sticky error is set; later steps on that comm
// change nothing and say so; the compressor keeps its last committed step,
// which a compressor on a new comm continues bit for bit.
TEST_CASE("a refused fixed-capacity call fails the comm asynchronously; its saved state continues on a new comm") {
  OneRank r, fresh, reference;
  const size_t n = 250007;
  Tensor grad(n), out(n), refOut(n);
  dctCompressor_t c = fixedCompressor<>(r.comm, n), ref = fixedCompressor<>(reference.comm, n);
  for (int step = 0; step < 2; step++) {
    grad.upload(step);
    REQUIRE(dctSparseAllreduce(grad.p, out.p, n, dctFloat32, dctSum, c, r.comm, r.stream) == dctSuccess);
    REQUIRE(dctSparseAllreduce(grad.p, refOut.p, n, dctFloat32, dctSum, ref, reference.comm, reference.stream) ==
            dctSuccess);
  }
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
  CHECK(stepsOf(c) == 2);
  size_t bytes = 0;
  REQUIRE(dctCompressorSaveState(c, nullptr, &bytes, r.stream) == dctSuccess);
  std::vector<char> state(bytes);
  REQUIRE(dctCompressorSaveState(c, state.data(), &bytes, r.stream) == dctSuccess);
  dctCompressor_t moved = fixedCompressor<>(fresh.comm, n);
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
