// cuda_step_perf: a whole dctSparseAllreduce step on device buffers over a
// 1-rank NCCL communicator, fp32 at density -D, against cudaMemcpy D2D on
// the same buffers. Per size it reports, medians of -n steps:
//   variable   the default step (sizes exchanged, host staging of counts):
//              wall clock of the call plus its stream sync;
//   fixed      the fixed-capacity step (capacity -c): wall clock of the call
//              plus the sync, and the host-blocked time, the call's own wall
//              clock while a 20 ms kernel queued before it still runs;
//   graph      one replay of the fixed step captured in a CUDA graph;
//   bound      12 bytes per element (read gradient and residual, write the
//              residual) at the copy's measured rate: the select's traffic.
// -a globaltopk: global top-k's plan instead of the allgather plan (at one
// rank its owner selects over the whole tensor: the owner pass's cost).
// -1: the 1-bit allreduce instead (queued on the stream after its first
// step; no variable column). One rank exchanges nothing on a wire: these
// are the compression's device costs and the host's part in them. Exits 77
// where no GPU is usable.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "count_arg.h"
#include "dct/dct.h"
#include "dct/dct_nccl.h"

cudaError_t dctTestSpin(cudaStream_t stream, double milliseconds);  // tests/cuda/spin_kernel.cu

namespace {

#define OK(call)                                                          \
  do {                                                                    \
    if (!(call)) {                                                        \
      std::fprintf(stderr, "%s failed: %s\n", #call, dctGetLastError(nullptr)); \
      std::exit(1);                                                       \
    }                                                                     \
  } while (0)

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Setup {
  size_t n;
  float *grad = nullptr, *out = nullptr;
  cudaStream_t stream = nullptr;
  dctComm_t comm = nullptr;
};

bool onebit = false;
dctAlgorithm_t algorithm = dctAlgoAllgather;

dctCompressor_t compressor(const Setup& s, double density, double capacity) {
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  cfg.density = density;
  cfg.algorithm = algorithm;
  cfg.capacityFactor = onebit ? 0 : capacity;
  if (onebit) cfg.compressor = dctCompressorOnebit;
  dctCompressor_t c = nullptr;
  OK(dctCompressorCreate(s.comm, s.n, dctFloat32, &cfg, &c) == dctSuccess);
  return c;
}

bool step(const Setup& s, dctCompressor_t c) {
  return dctSparseAllreduce(s.grad, s.out, s.n, dctFloat32, dctSum, c, s.comm, s.stream) == dctSuccess;
}

// Median wall clock of fn() followed by a stream sync, after two warm-ups.
template <typename Fn>
double timed(const Setup& s, int reps, Fn&& fn) {
  std::vector<double> t;
  for (int i = 0; i < reps + 2; i++) {
    const auto start = Clock::now();
    OK(fn());
    OK(cudaStreamSynchronize(s.stream) == cudaSuccess);
    if (i >= 2) t.push_back(msSince(start) * 1e3);
  }
  return median(t);
}

void row(Setup& s, double density, double capacity, int reps) {
  const size_t bytes = s.n * sizeof(float);
  const double copy = timed(s, reps, [&] {
    return cudaMemcpyAsync(s.out, s.grad, bytes, cudaMemcpyDeviceToDevice, s.stream) == cudaSuccess;
  });
  dctCompressor_t variable = compressor(s, density, 0), fixed = compressor(s, density, capacity);
  const double varUs = onebit ? 0 : timed(s, reps, [&] { return step(s, variable); });
  const double fixUs = timed(s, reps, [&] { return step(s, fixed); });
  std::vector<double> blocked;
  for (int i = 0; i < reps; i++) {
    OK(dctTestSpin(s.stream, 20.0) == cudaSuccess);
    const auto start = Clock::now();
    OK(step(s, fixed));
    blocked.push_back(msSince(start) * 1e3);
    OK(cudaStreamQuery(s.stream) == cudaErrorNotReady);  // the spin still runs: nothing waited for it
    OK(cudaStreamSynchronize(s.stream) == cudaSuccess);
  }
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  OK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  const bool captured = step(s, fixed);
  OK(cudaStreamEndCapture(s.stream, &graph) == cudaSuccess && captured);
  OK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  const double graphUs = timed(s, reps, [&] { return cudaGraphLaunch(exec, s.stream) == cudaSuccess; });
  dctResult_t async = dctSuccess;
  OK(dctCommGetAsyncError(s.comm, &async) == dctSuccess && async == dctSuccess);
  const double bound = copy * 12.0 / 8.0;
  std::printf("%10zu %8.4f %5.2f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %6.2f %6.2f\n", s.n, density, capacity,
              copy, bound, varUs, fixUs, median(blocked), graphUs, fixUs / bound, graphUs / bound);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  dctCompressorDestroy(variable);
  dctCompressorDestroy(fixed);
}

}  // namespace

int main(int argc, char** argv) {
  size_t minN = size_t(1) << 20, maxN = size_t(1) << 24;
  double density = 0.01, capacity = 1.25;
  int reps = 10, opt;
  while ((opt = getopt(argc, argv, "b:e:D:c:n:a:1h")) != -1) {
    if ((opt == 'b' && dctbench::parseCount(optarg, minN)) || (opt == 'e' && dctbench::parseCount(optarg, maxN)))
      continue;
    if (opt == 'D') density = std::atof(optarg);
    else if (opt == 'c') capacity = std::atof(optarg);
    else if (opt == 'n') reps = std::max(1, std::atoi(optarg));
    else if (opt == '1') onebit = true;
    else if (opt == 'a' && std::string(optarg) == "globaltopk") algorithm = dctAlgoGlobalTopk;
    else if (opt == 'a' && std::string(optarg) == "allgather") algorithm = dctAlgoAllgather;
    else {
      std::fputs("usage: cuda_step_perf [-b minN] [-e maxN] [-D density] [-c capacity] [-n reps]"
                 " [-a allgather|globaltopk] [-1] (N by 4)\n",
                 opt == 'h' ? stdout : stderr);
      return opt == 'h' ? 0 : 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("skipped: no CUDA device");
    return 77;
  }
  Setup s;
  ncclComm_t nccl = nullptr;
  int device = 0;
  OK(ncclCommInitAll(&nccl, 1, &device) == ncclSuccess);
  OK(dctCommInitNccl(nccl, &s.comm) == dctSuccess);
  OK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) == cudaSuccess);
  std::printf("# 1-rank NCCL, fp32, %s, medians of %d; times in us; x_bound = step / 12-byte bound\n",
              onebit ? "1-bit allreduce (fixed = the queued step)"
                     : algorithm == dctAlgoGlobalTopk ? "top-K, global top-k plan" : "top-K, allgather plan",
              reps);
  std::printf("%10s %8s %5s %10s %10s %10s %10s %10s %10s %6s %6s\n", "n", "density", "c", "copy", "bound",
              "variable", "fixed", "blocked", "graph", "x_fix", "x_graph");
  for (size_t n = minN; n <= maxN; n *= 4) {
    s.n = n;
    OK(cudaMalloc(&s.grad, n * sizeof(float)) == cudaSuccess && cudaMalloc(&s.out, n * sizeof(float)) == cudaSuccess);
    std::vector<float> h(n);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal;
    for (auto& x : h) x = normal(rng);
    OK(cudaMemcpy(s.grad, h.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    row(s, density, capacity, reps);
    cudaFree(s.grad);
    cudaFree(s.out);
  }
  dctCommDestroy(s.comm);
  ncclCommDestroy(nccl);
  cudaStreamDestroy(s.stream);
  return 0;
}
