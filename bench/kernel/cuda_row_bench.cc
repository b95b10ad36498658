#include "cuda_row_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/kernels.h"

namespace dctbench {
namespace {

bool ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

// Median host wall clock of `reps` calls of body, each ended by a stream sync.
template <typename Body>
double medianUs(int reps, cudaStream_t s, const Body& body) {
  std::vector<double> us;
  for (int rep = -1; rep < reps; rep++) {  // rep -1: warm-up
    cudaStreamSynchronize(s);
    const auto t0 = std::chrono::steady_clock::now();
    if (!body()) return -1;
    cudaStreamSynchronize(s);
    if (rep >= 0) us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

struct DeviceBuffers {
  std::vector<void*> owned;
  template <typename T>
  T* get(size_t count) {
    void* p = nullptr;
    if (!ok(cudaMalloc(&p, std::max<size_t>(count * sizeof(T), 1)), "cudaMalloc")) return nullptr;
    owned.push_back(p);
    return static_cast<T*>(p);
  }
  ~DeviceBuffers() {
    for (void* p : owned) cudaFree(p);
  }
};

bool runSize(const CudaRowOptions& opt, size_t n, const std::vector<float>& host, const dct::KernelOps& ops,
             dct::KernelContext* ctx, cudaStream_t s) {
  const size_t d = opt.rowLength, R = n / d, cells = R * d, words = dct::maskWords(d);
  const size_t k = std::max<size_t>(1, static_cast<size_t>(std::ceil(opt.rowDensity * double(d) - 1e-9)));
  const int format = d <= 256 ? 1 : d <= 65536 ? 2 : 4;
  DeviceBuffers b;
  float *rows = b.get<float>(cells), *out = b.get<float>(cells), *values = b.get<float>(R * d);
  uint32_t *mask = b.get<uint32_t>(R * words), *counts = b.get<uint32_t>(R);
  uint64_t* offsets = b.get<uint64_t>(R + 1);
  uint8_t* wireMask = b.get<uint8_t>(R * d * format + 8);
  if (!rows || !out || !values || !mask || !counts || !offsets || !wireMask) return false;
  if (!ok(cudaMemcpy(rows, host.data(), cells * 4, cudaMemcpyHostToDevice), "cudaMemcpy")) return false;
  dct::RowSelectArgs sel{rows, R, d, dctFloat32, k, 0, mask, counts};
  const double selectUs = medianUs(opt.reps, s, [&] { return ops.rowSelect(ctx, &sel, s) == dctSuccess; });
  dct::RowOffsetsArgs off{counts, 4, 0, R, offsets};
  if (ops.rowOffsets(ctx, &off, s) != dctSuccess) return false;
  dct::RowWireArgs wire{rows, R, d, dctFloat32, mask, offsets, 0, format, wireMask, nullptr, 0, values};
  const double packUs = medianUs(opt.reps, s, [&] { return ops.rowPack(ctx, &wire, s) == dctSuccess; });
  dct::RowWireArgs back = wire;
  back.rows = out;
  const double unpackUs = medianUs(opt.reps, s, [&] { return ops.rowUnpack(ctx, &back, s) == dctSuccess; });
  const double copyUs = medianUs(opt.reps, s, [&] {
    return ok(cudaMemcpyAsync(out, rows, cells * 4, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
  });
  if (selectUs < 0 || packUs < 0 || unpackUs < 0 || copyUs < 0) return false;
  const double copyGBs = 8.0 * cells / (copyUs * 1e3);
  struct Row { const char* name; double bytes, us; };
  for (const Row& r : {Row{"row-select", 4.0 * cells, selectUs}, Row{"row-pack", 4.0 * cells, packUs},
                       Row{"row-unpack", 4.0 * cells, unpackUs}, Row{"memcpy-d2d", 8.0 * cells, copyUs}}) {
    const double gbs = r.bytes / (r.us * 1e3);
    std::printf(" %11zu %5zu %4zu %12s %12.1f %9.2f %9.2f %9.3f\n", cells, d, k, r.name, r.us, gbs, gbs / copyGBs,
                r.us * 1e3 / double(cells));
  }
  std::printf("#   n %zu: kept %llu of %zu entries\n", cells, static_cast<unsigned long long>(off.total), cells);
  std::fflush(stdout);
  return true;
}

}  // namespace

int runCudaRowBench(const CudaRowOptions& opt, const char* deviceName) {
  std::printf("# cuda_kernel_perf -R: %s, CUDA row kernels, float, D %zu, K = ceil(%g D), median of %d reps\n",
              deviceName, opt.rowLength, opt.rowDensity, opt.reps);
  std::printf("#%11s %5s %4s %12s %12s %9s %9s %9s\n", "n", "D", "K", "kernel", "median_us", "GB/s", "x_memcpy",
              "ns/elem");
  std::vector<float> host(opt.maxN);
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : host) x = normal(rng);
  const dct::KernelOps& ops = dct::cudaKernelOps();
  dct::KernelContext* ctx = nullptr;
  if (ops.createContext(&ctx) != dctSuccess) return 1;
  cudaStream_t s;
  if (!ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate")) return 1;
  bool good = true;
  for (size_t n = opt.minN; n <= opt.maxN && good; n *= opt.factor) good = runSize(opt, n, host, ops, ctx, s);
  ops.destroyContext(ctx);
  cudaStreamDestroy(s);
  return good ? 0 : 1;
}

}  // namespace dctbench
