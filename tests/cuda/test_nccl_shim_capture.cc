// The NCCL shim's logic (NcclInterceptor + Session, as libdct_nccl_preload
// runs them) over real NCCL at world size 1, in the fixed-capacity mode and
// with the 1-bit compressor: after eager warm-up calls a call under CUDA
// graph capture is compressed (the shim's summary counts it, with a queued
// step's bytes), and the graph's replays give what the same calls made
// eagerly give, bit for bit.
// (Multi-rank NCCL needs a GPU per rank: one is lent at most.)
#include <cuda_runtime.h>
#include <doctest/doctest.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "dct/dct_nccl.h"
#include "preload/nccl_interceptor.h"

using namespace dct::preload;

namespace {

#define CUDA_OK(call) REQUIRE((call) == cudaSuccess)

bool capturingStream(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(stream, &status) != cudaSuccess || status != cudaStreamCaptureStatusNone;
}

// One rank: every agreement's values are already the max.
bool agreeAlone(uint64_t*, int) { return true; }

// nccl_preload.cc's table, with this process's NCCL (no preload here).
NcclNext realNccl() {
  NcclNext n{};
  n.allReduce = ncclAllReduce;
  n.groupStart = ncclGroupStart;
  n.groupEnd = ncclGroupEnd;
  n.commDestroy = ncclCommDestroy;
  n.commAbort = ncclCommAbort;
  n.commCount = ncclCommCount;
  n.capturing = capturingStream;
  n.captureReady = [](Session& s, const NcclCall& c) {
    dctDataType_t type;
    return dctTypeOf(c.datatype, &type) && s.captureReady(handleKey(c.comm), c.recvbuff, c.count, type);
  };
  n.agreeMax = [](ncclComm_t, cudaStream_t, uint64_t* values, int count) { return agreeAlone(values, count); };
  n.compressed = [](Session& s, const NcclCall& c) {
    CompressCall call;
    call.comm = handleKey(c.comm);
    call.sendbuf = c.sendbuff;
    call.recvbuf = c.recvbuff;
    call.count = c.count;
    dctTypeOf(c.datatype, &call.datatype);
    dctOpOf(c.op, &call.op);
    call.stream = c.stream;
    call.capturing = capturingStream(c.stream);
    return s.compress(call, [&](dctComm_t* out) { return dctCommInitNccl(c.comm, out); }, agreeAlone);
  };
  return n;
}

std::vector<float> gradient(size_t n, int step) {
  std::mt19937_64 rng(1234 + step);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (auto& x : g) x = normal(rng);
  return g;
}

// `setting` = `value` in the environment the shims' comms read.
void captureMatchesEager(const char* setting, const char* value) {
  REQUIRE(setenv(setting, value, 1) == 0);  // before any comm reads the settings
  ncclComm_t nccl = nullptr;
  int device = 0;
  REQUIRE(ncclCommInitAll(&nccl, 1, &device) == ncclSuccess);
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Policy policy;
  policy.minBytes = 0;
  // Two shims over the same communicator: one keeps calling eagerly, one
  // replays its captured call; each has its own compressor (and residual).
  Session eagerSession("eager", policy, 8), graphSession("graph", policy, 8);
  NcclInterceptor eager(eagerSession, realNccl()), graphed(graphSession, realNccl());

  const size_t n = size_t(1) << 20;
  float *grad = nullptr, *eagerOut = nullptr, *graphOut = nullptr;
  CUDA_OK(cudaMalloc(&grad, n * sizeof(float)));
  CUDA_OK(cudaMalloc(&eagerOut, n * sizeof(float)));
  CUDA_OK(cudaMalloc(&graphOut, n * sizeof(float)));
  const auto upload = [&](int step) {
    const auto g = gradient(n, step);
    CUDA_OK(cudaMemcpy(grad, g.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaDeviceSynchronize());
  };
  const auto call = [&](float* out) { return NcclCall{grad, out, n, ncclFloat32, ncclSum, nccl, s}; };

  // Warm-up, eager: the first step agrees the slots, the second runs as every later one.
  for (int step = 0; step < 2; step++) {
    upload(step);
    REQUIRE(eager.allReduce(call(eagerOut)) == ncclSuccess);
    REQUIRE(graphed.allReduce(call(graphOut)) == ncclSuccess);
    CUDA_OK(cudaStreamSynchronize(s));
  }
  REQUIRE(graphSession.summary().compressed == 2);

  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  const ncclResult_t captured = graphed.allReduce(call(graphOut));
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  REQUIRE(captured == ncclSuccess);
  const Summary sum = graphSession.summary();
  CHECK(sum.compressed == 3);
  CHECK(sum.passed[static_cast<size_t>(Verdict::Capturing)] == 0);
  CHECK(sum.wireBytes > 0);
  CHECK(sum.wireBytes < sum.denseBytes);
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

  std::vector<float> a(n), b(n);
  for (int step = 2; step < 7; step++) {
    CAPTURE(step);
    upload(step);
    REQUIRE(eager.allReduce(call(eagerOut)) == ncclSuccess);
    CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaMemcpy(a.data(), eagerOut, n * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(b.data(), graphOut, n * sizeof(float), cudaMemcpyDeviceToHost));
    REQUIRE(std::memcmp(a.data(), b.data(), n * sizeof(float)) == 0);
  }
  CHECK(eagerSession.summary().passed[static_cast<size_t>(Verdict::Capturing)] == 0);

  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  eagerSession.finish(true);
  graphSession.finish(true);
  cudaFree(grad);
  cudaFree(eagerOut);
  cudaFree(graphOut);
  cudaStreamDestroy(s);
  ncclCommDestroy(nccl);
  unsetenv(setting);
}

}  // namespace

TEST_CASE("NCCL shim: under capture a fixed-capacity call is compressed, and replays equal eager calls") {
  captureMatchesEager("DCT_CAPACITY_FACTOR", "1");
}

TEST_CASE("NCCL shim: under capture a 1-bit call is compressed, and replays equal eager calls") {
  captureMatchesEager("DCT_COMPRESSOR", "onebit");
}
