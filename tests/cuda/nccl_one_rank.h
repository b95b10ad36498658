// Fixtures of the 1-rank NCCL tests of the queued steps
// (test_nccl_fixed_capacity.cc, test_nccl_onebit.cc): a communicator of
// one GPU with libdct's comm and a non-blocking stream, an fp32 device
// tensor with seeded normal contents, the compressor's step counter, and
// the check that a queued step does not block the host.
#pragma once

#include <cuda_runtime.h>
#include <doctest/doctest.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "dct/dct.h"
#include "dct/dct_nccl.h"

cudaError_t dctTestSpin(cudaStream_t stream, double milliseconds);  // spin_kernel.cu

#define CUDA_OK(call) REQUIRE((call) == cudaSuccess)

namespace nccltest {

struct OneRank {
  ncclComm_t nccl = nullptr;
  dctComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  OneRank() {
    int device = 0;
    REQUIRE(ncclCommInitAll(&nccl, 1, &device) == ncclSuccess);
    REQUIRE(dctCommInitNccl(nccl, &comm) == dctSuccess);
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  ~OneRank() {
    dctCommDestroy(comm);
    ncclCommDestroy(nccl);
    cudaStreamDestroy(stream);
  }
};

struct Tensor {
  float* p = nullptr;
  size_t n;
  explicit Tensor(size_t count) : n(count) { CUDA_OK(cudaMalloc(&p, n * sizeof(float))); }
  ~Tensor() { cudaFree(p); }
  void upload(int step) {
    std::mt19937_64 rng(99 + step);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> h(n);
    for (auto& x : h) x = normal(rng);
    CUDA_OK(cudaMemcpy(p, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaDeviceSynchronize());
  }
  std::vector<float> download() const {
    std::vector<float> h(n);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(h.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
  }
};

inline uint64_t stepsOf(dctCompressor_t c) {
  dctStats_t st{};
  REQUIRE(dctCompressorGetStats(c, &st) == dctSuccess);  // waits for the last step
  return st.step;
}

// After two eager steps (the first is synchronous), a step of the
// compressor make(comm, n) gives returns while a 50 ms kernel queued before
// it still runs, and completes without an asynchronous error.
inline void returnsUnderQueuedKernel(dctCompressor_t (*make)(dctComm_t, size_t)) {
  OneRank r;
  const size_t n = size_t(1) << 22;
  Tensor grad(n), out(n);
  dctCompressor_t c = make(r.comm, n);
  for (int step = 0; step < 2; step++) {
    grad.upload(step);
    REQUIRE(dctSparseAllreduce(grad.p, out.p, n, dctFloat32, dctSum, c, r.comm, r.stream) == dctSuccess);
  }
  CUDA_OK(cudaStreamSynchronize(r.stream));
  grad.upload(2);
  CUDA_OK(dctTestSpin(r.stream, 50.0));
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(dctSparseAllreduce(grad.p, out.p, n, dctFloat32, dctSum, c, r.comm, r.stream) == dctSuccess);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  CAPTURE(ms);
  CHECK(cudaStreamQuery(r.stream) == cudaErrorNotReady);
  CHECK(ms < 25.0);
  CUDA_OK(cudaStreamSynchronize(r.stream));
  dctResult_t async = dctInternalError;
  REQUIRE(dctCommGetAsyncError(r.comm, &async) == dctSuccess);
  CHECK(async == dctSuccess);
  CHECK(stepsOf(c) == 3);
  dctCompressorDestroy(c);
}

// Two eager steps of both compressors, then one call of `graphed` captured
// and replayed `replays` times beside eager calls of `eager` on the same
// gradients: each replay's output equals the eager call's, bit for bit, and
// both compressors have counted every step.
inline void replaysMatchEagerCalls(OneRank& r, dctCompressor_t eager, dctCompressor_t graphed, size_t n,
                                   int replays) {
  Tensor grad(n), eagerOut(n), graphOut(n);
  for (int step = 0; step < 2; step++) {
    grad.upload(step);
    REQUIRE(dctSparseAllreduce(grad.p, eagerOut.p, n, dctFloat32, dctAvg, eager, r.comm, r.stream) == dctSuccess);
    REQUIRE(dctSparseAllreduce(grad.p, graphOut.p, n, dctFloat32, dctAvg, graphed, r.comm, r.stream) == dctSuccess);
  }
  CUDA_OK(cudaStreamSynchronize(r.stream));
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeGlobal));
  const dctResult_t captured =
      dctSparseAllreduce(grad.p, graphOut.p, n, dctFloat32, dctAvg, graphed, r.comm, r.stream);
  CUDA_OK(cudaStreamEndCapture(r.stream, &graph));
  REQUIRE(captured == dctSuccess);
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int step = 2; step < 2 + replays; step++) {
    CAPTURE(step);
    grad.upload(step);
    REQUIRE(dctSparseAllreduce(grad.p, eagerOut.p, n, dctFloat32, dctAvg, eager, r.comm, r.stream) == dctSuccess);
    CUDA_OK(cudaGraphLaunch(exec, r.stream));
    CUDA_OK(cudaStreamSynchronize(r.stream));
    const auto a = eagerOut.download(), b = graphOut.download();
    REQUIRE(std::memcmp(a.data(), b.data(), n * sizeof(float)) == 0);
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CHECK(stepsOf(graphed) == stepsOf(eager));
  CHECK(stepsOf(graphed) == static_cast<uint64_t>(2 + replays));
}

}  // namespace nccltest
