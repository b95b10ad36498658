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

}  // namespace nccltest
