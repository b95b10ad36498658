// cuda_kernel_perf: the CUDA twin's kernels, as the compressor calls them
// through the ops table, against cudaMemcpy device-to-device on the same
// buffers, and the fused select against an exact top-k (CUB radix sort of
// all magnitudes: the exact threshold op). Times are host wall clock around
// each op including its stream sync (what a step pays), median of -n reps.
// Exits 77 ("skipped: no CUDA device") where no GPU is usable.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "count_arg.h"
#include "cuda_row_bench.h"
#include "kernels/index_packing.h"
#include "kernels/kernels.h"
#include "kernels/sampling.h"
#include "threshold_bench.h"

namespace {

struct Options {
  size_t minN = size_t(1) << 20, maxN = size_t(1) << 28, factor = 4;
  int reps = 10;
  double density = 0.01;
};

const char* kUsage =
    "usage: cuda_kernel_perf [-b minN] [-e maxN] [-f factor] [-n reps] [-D density]\n"
    "  element counts (float), default 2^20 .. 2^28 by 4; K/M = 2^10/2^20\n"
    "kernels: select (fused EF + threshold + compaction, 3*4 B/element), pack and\n"
    "scatter-packed (the message's packed indices), tau-sample, tau-exact (CUB radix\n"
    "sort of every magnitude: an exact top-k), memcpy-d2d (2*4 B/element).\n"
    "       cuda_kernel_perf -T [-b minN] [-e maxN] [-f factor] [-n reps] [-D density]\n"
    "                        [-d float|double|half|bf16]\n"
    "  the threshold estimators side by side (sampled / exact / bisect; see\n"
    "  kernel_perf -h): defaults 1M .. 16M by 4, densities 0.001, 0.01, 0.1, 5 reps.\n"
    "       cuda_kernel_perf -R [-L rowLength] [-K rowDensity] [-b minN] [-e maxN] [-f factor] [-n reps]\n"
    "  DCT-MP row kernels (row-select, row-pack, row-unpack) vs memcpy-d2d, fp32 rows,\n"
    "  defaults D 64, K = ceil(0.05 D), 1M .. 64M elements by 4.\n";

#define CHECK_CUDA(call)                                                         \
  do {                                                                           \
    cudaError_t e_ = (call);                                                     \
    if (e_ != cudaSuccess) {                                                     \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));           \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)
#define CHECK_DCT(call)                                                          \
  do {                                                                           \
    if ((call) != dctSuccess) {                                                  \
      std::fprintf(stderr, "%s failed\n", #call);                                \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

template <typename Body>
double medianUs(int reps, cudaStream_t s, const Body& body) {
  std::vector<double> us;
  for (int rep = -1; rep < reps; rep++) {  // rep -1: warm-up (scratch growth)
    CHECK_CUDA(cudaStreamSynchronize(s));
    auto t0 = std::chrono::steady_clock::now();
    body();
    CHECK_CUDA(cudaStreamSynchronize(s));
    auto t1 = std::chrono::steady_clock::now();
    if (rep >= 0) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

void* deviceAlloc(size_t bytes) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, bytes ? bytes : 1));
  return p;
}

void runSize(const Options& opt, size_t n, const std::vector<float>& host, dct::KernelContext* ctx,
             cudaStream_t s) {
  const dct::KernelOps& ops = dct::cudaKernelOps();
  const size_t bytes = n * sizeof(float), capacity = static_cast<size_t>(4 * opt.density * n) + 1024;
  auto* grad = static_cast<float*>(deviceAlloc(bytes));
  auto* saved = static_cast<float*>(deviceAlloc(bytes));
  auto* residual = static_cast<float*>(deviceAlloc(bytes));
  auto* copy = static_cast<float*>(deviceAlloc(bytes));
  auto* indices = static_cast<uint32_t*>(deviceAlloc(capacity * 4));
  auto* values = static_cast<float*>(deviceAlloc(capacity * 4));
  auto* packed = deviceAlloc(dct::packing::maxPackedBytes(capacity, 4));
  CHECK_CUDA(cudaMemcpy(grad, host.data(), bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(saved, host.data() + host.size() - n, bytes, cudaMemcpyHostToDevice));

  // tau for ~density of |grad + residual|, from the exact estimator once.
  CHECK_CUDA(cudaMemcpy(residual, saved, bytes, cudaMemcpyDeviceToDevice));
  CHECK_DCT(ops.accumulate(ctx, residual, grad, n, dctFloat32, s));
  double tau = 0, t = 0;
  dct::ThresholdArgs exact{residual, n, dctFloat32, opt.density, dctThresholdExact, 0};
  CHECK_DCT(ops.threshold(ctx, &exact, &tau, s));

  struct Row { const char* name; double bytes, us; };
  std::vector<Row> rows;
  dct::SelectArgs sel{grad, residual, n, dctFloat32, 4, tau, capacity, indices, values};
  double selectUs = 0;
  {  // every rep starts from the same residual (restored outside the timing)
    std::vector<double> us;
    for (int rep = -1; rep < opt.reps; rep++) {
      CHECK_CUDA(cudaMemcpyAsync(residual, saved, bytes, cudaMemcpyDeviceToDevice, s));
      CHECK_CUDA(cudaStreamSynchronize(s));
      auto t0 = std::chrono::steady_clock::now();
      CHECK_DCT(ops.selectCompact(ctx, &sel, s));
      auto t1 = std::chrono::steady_clock::now();
      if (rep >= 0) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    std::sort(us.begin(), us.end());
    selectUs = us[us.size() / 2];
  }
  rows.push_back({"select", 12.0 * n, selectUs});
  dct::PackArgs pack{indices, sel.nnz, 4, packed};
  rows.push_back({"pack", 4.0 * sel.nnz, medianUs(opt.reps, s, [&] { CHECK_DCT(ops.packIndices(ctx, &pack, s)); })});
  dct::ScatterArgs add{copy, n, dctFloat32, 4, packed, values, sel.nnz, true, pack.bytes};
  rows.push_back({"scatter-packed", 16.0 * sel.nnz,
                  medianUs(opt.reps, s, [&] { CHECK_DCT(ops.scatterAddPacked(ctx, &add, s)); })});
  dct::ThresholdArgs sampled{residual, n, dctFloat32, opt.density, dctThresholdSampled, 1};
  rows.push_back({"tau-sample", 4.0 * dct::thresholdSampleSize(n, opt.density),
                  medianUs(opt.reps, s, [&] { CHECK_DCT(ops.threshold(ctx, &sampled, &t, s)); })});
  const double exactUs = medianUs(opt.reps, s, [&] { CHECK_DCT(ops.threshold(ctx, &exact, &t, s)); });
  rows.push_back({"tau-exact", 8.0 * n, exactUs});
  const double copyUs = medianUs(opt.reps, s, [&] {
    CHECK_CUDA(cudaMemcpyAsync(copy, grad, bytes, cudaMemcpyDeviceToDevice, s));
  });
  rows.push_back({"memcpy-d2d", 8.0 * n, copyUs});
  const double copyGBs = 8.0 * n / (copyUs * 1e3);
  for (const Row& r : rows) {
    const double gbs = r.bytes / (r.us * 1e3);
    std::printf(" %11zu %14s %13.0f %12.1f %9.2f %9.2f\n", n, r.name, r.bytes, r.us, gbs, gbs / copyGBs);
  }
  std::printf("#   n %zu: selected %.3f%%, packed index %.2f B; select vs exact top-k (radix sort): %.1fx faster\n",
              n, 100.0 * sel.selected / n, sel.nnz ? double(pack.bytes) / sel.nnz : 0.0, exactUs / selectUs);
  std::fflush(stdout);
  for (void* p : {static_cast<void*>(grad), static_cast<void*>(saved), static_cast<void*>(residual),
                  static_cast<void*>(copy), static_cast<void*>(indices), static_cast<void*>(values), packed})
    cudaFree(p);
}

}  // namespace

int main(int argc, char** argv) {
  using dctbench::parseCount;
  Options opt;
  dctbench::ThresholdBenchOptions topt;
  dctbench::CudaRowOptions ropt;
  bool thresholds = false, rowKernels = false, sized = false, factored = false, repeated = false, dense = false;
  for (int c; (c = getopt(argc, argv, "b:e:f:n:D:d:L:K:TRh")) != -1;) {
    bool ok = true;
    if (c == 'b') ok = parseCount(optarg, opt.minN), sized = true;
    else if (c == 'e') ok = parseCount(optarg, opt.maxN), sized = true;
    else if (c == 'f') ok = parseCount(optarg, opt.factor) && opt.factor >= 2, factored = true;
    else if (c == 'n') ok = (opt.reps = std::atoi(optarg)) > 0, repeated = true;
    else if (c == 'D') ok = (opt.density = std::atof(optarg)) > 0 && opt.density <= 1, dense = true;
    else if (c == 'd') ok = dctbench::parseThresholdType(optarg, topt.dtype);
    else if (c == 'T') thresholds = true;
    else if (c == 'R') rowKernels = true;
    else if (c == 'L') ok = parseCount(optarg, ropt.rowLength) && ropt.rowLength >= 1;
    else if (c == 'K') ok = (ropt.rowDensity = std::atof(optarg)) > 0 && ropt.rowDensity <= 1;
    else ok = false;
    if (!ok) {
      std::fputs(kUsage, c == 'h' ? stdout : stderr);
      return c == 'h' ? 0 : 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  if (rowKernels) {
    if (sized) ropt.minN = opt.minN, ropt.maxN = opt.maxN;
    if (factored) ropt.factor = opt.factor;
    if (repeated) ropt.reps = opt.reps;
    return dctbench::runCudaRowBench(ropt, prop.name);
  }
  if (thresholds) {
    if (sized) topt.minN = opt.minN, topt.maxN = opt.maxN;
    if (factored) topt.factor = static_cast<double>(opt.factor);
    if (repeated) topt.reps = opt.reps;
    if (dense) topt.density = opt.density;
    const dct::KernelOps& ops = dct::cudaKernelOps();
    dct::KernelContext* ctx = nullptr;
    CHECK_DCT(ops.createContext(&ctx));
    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    dctbench::DataPlacement device{
        [](size_t bytes) { return deviceAlloc(bytes); },
        [](void* dst, const void* src, size_t bytes) {
          CHECK_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
          CHECK_CUDA(cudaDeviceSynchronize());  // a pageable copy may return before it lands
        },
        [](void* p) { CHECK_CUDA(cudaFree(p)); }};
    const std::string title = std::string("cuda_kernel_perf -T, ") + prop.name;
    const int rc = dctbench::runThresholdComparison(topt, ops, ctx, s, &device, title.c_str());
    ops.destroyContext(ctx);
    cudaStreamDestroy(s);
    return rc;
  }
  std::printf("# cuda_kernel_perf: %s, CUDA ops table, float, density %g, median of %d reps\n", prop.name,
              opt.density, opt.reps);
  std::printf("#%11s %14s %13s %12s %9s %9s\n", "n", "kernel", "bytes", "median_us", "GB/s", "x_memcpy");
  // Heavy-tailed input (normal times log-normal scale), twice maxN: grad
  // from the front, the starting residual from the back.
  std::vector<float> host(2 * opt.maxN);
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> scale(1 << 16);
  for (float& x : scale) x = std::exp(normal(rng));
  for (size_t i = 0; i < host.size(); i++) host[i] = normal(rng) * scale[rng() & 0xffff];
  const dct::KernelOps& ops = dct::cudaKernelOps();
  dct::KernelContext* ctx = nullptr;
  CHECK_DCT(ops.createContext(&ctx));
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (size_t n = opt.minN; n <= opt.maxN; n *= opt.factor) runSize(opt, n, host, ctx, s);
  ops.destroyContext(ctx);
  cudaStreamDestroy(s);
  return 0;
}
