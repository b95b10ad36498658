// The CUDA twin's table and memory ops: device-pointer test (which picks the
// twin), allocate/copy/release, absSum against the CPU twin, error mapping
// and unsupported dtypes.
#include <cstring>
#include <string>

#include "core/compressor.h"
#include "cuda_util.h"

using namespace dct;
using namespace dct::test;

TEST_CASE("the CUDA table is complete and device-side") {
  const KernelOps& ops = cudaKernelOps();
  CHECK(std::string(ops.name) == "cuda");
  CHECK(ops.device);
  const void* fns[] = {(void*)ops.createContext, (void*)ops.destroyContext, (void*)ops.allocate,
                       (void*)ops.release, (void*)ops.copy, (void*)ops.synchronize,
                       (void*)ops.accumulate, (void*)ops.selectCompact, (void*)ops.selectDense,
                       (void*)ops.threshold, (void*)ops.scatterAdd, (void*)ops.zero, (void*)ops.scale,
                       (void*)ops.absSum};
  for (const void* fn : fns) CHECK(fn != nullptr);
}

TEST_CASE("cudaPointerIsDevice: device and managed yes, host (pageable or pinned) no") {
  void* device = nullptr;
  void* managed = nullptr;
  void* pinned = nullptr;
  CUDA_REQUIRE(cudaMalloc(&device, 64));
  CUDA_REQUIRE(cudaMallocManaged(&managed, 64));
  CUDA_REQUIRE(cudaMallocHost(&pinned, 64));
  std::vector<float> heap(16);
  int stack = 0;
  CHECK(isDeviceMemory(device));
  CHECK(isDeviceMemory(static_cast<char*>(device) + 8));
  CHECK(isDeviceMemory(managed));
  CHECK_FALSE(isDeviceMemory(pinned));
  CHECK_FALSE(isDeviceMemory(heap.data()));
  CHECK_FALSE(isDeviceMemory(&stack));
  CHECK_FALSE(isDeviceMemory(nullptr));
  CHECK(&twinFor(device) == &cudaKernelOps());
  CHECK(&twinFor(heap.data()) == &cpuKernelOps());
  CHECK(cudaGetLastError() == cudaSuccess);  // no error left behind
  cudaFree(device);
  cudaFree(managed);
  cudaFreeHost(pinned);
}

TEST_CASE("allocate, copy, zero, release round-trip on a stream") {
  Twins tw;
  void* a = nullptr;
  void* b = nullptr;
  REQUIRE(tw.gpu.allocate(tw.gpuCtx, &a, 0) == dctSuccess);
  CHECK(a == nullptr);
  const size_t n = 100003;
  REQUIRE(tw.gpu.allocate(tw.gpuCtx, &a, n * sizeof(float)) == dctSuccess);
  REQUIRE(tw.gpu.allocate(tw.gpuCtx, &b, n * sizeof(float)) == dctSuccess);
  CHECK(isDeviceMemory(a));
  auto x = randomVector<float>(n, 5);
  CUDA_REQUIRE(cudaMemcpyAsync(a, x.data(), n * sizeof(float), cudaMemcpyHostToDevice, tw.stream));
  REQUIRE(tw.gpu.copy(tw.gpuCtx, b, a, n * sizeof(float), tw.stream) == dctSuccess);
  REQUIRE(tw.gpu.zero(tw.gpuCtx, a, n * sizeof(float), tw.stream) == dctSuccess);
  REQUIRE(tw.gpu.synchronize(tw.gpuCtx, tw.stream) == dctSuccess);
  std::vector<float> back(n), zeros(n);
  CUDA_REQUIRE(cudaMemcpy(back.data(), b, n * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_REQUIRE(cudaMemcpy(zeros.data(), a, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(std::memcmp(back.data(), x.data(), n * sizeof(float)) == 0);
  for (float v : zeros) REQUIRE(sameBits(v, 0.0f));
  tw.gpu.release(tw.gpuCtx, a);
  tw.gpu.release(tw.gpuCtx, b);
  tw.gpu.release(tw.gpuCtx, nullptr);
}

TEST_CASE("absSum matches the CPU twin (fp32, fp64, odd sizes, empty)") {
  Twins tw;
  for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(100003)}) {
    CAPTURE(n);
    const auto xf = randomVector<float>(n, 11, false);
    const auto xd = randomVector<double>(n, 12, false);
    DeviceArray<float> df(xf);
    DeviceArray<double> dd(xd);
    double cpuF = -1, gpuF = -1, cpuD = -1, gpuD = -1;
    REQUIRE(tw.cpu.absSum(tw.cpuCtx, xf.data(), n, dctFloat32, &cpuF, nullptr) == dctSuccess);
    REQUIRE(tw.gpu.absSum(tw.gpuCtx, df.get(), n, dctFloat32, &gpuF, tw.stream) == dctSuccess);
    REQUIRE(tw.cpu.absSum(tw.cpuCtx, xd.data(), n, dctFloat64, &cpuD, nullptr) == dctSuccess);
    REQUIRE(tw.gpu.absSum(tw.gpuCtx, dd.get(), n, dctFloat64, &gpuD, tw.stream) == dctSuccess);
    CHECK(gpuF == doctest::Approx(cpuF).epsilon(1e-12));
    CHECK(gpuD == doctest::Approx(cpuD).epsilon(1e-12));
    if (n == 0) CHECK(gpuF == 0.0);
  }
}

TEST_CASE("an impossible allocation is dctOutOfMemory with the CUDA message, and clears") {
  Twins tw;
  void* p = nullptr;
  CHECK(tw.gpu.allocate(tw.gpuCtx, &p, size_t(1) << 62) == dctOutOfMemory);
  CHECK(p == nullptr);
  CHECK(std::string(dctGetLastError(nullptr)).find("cudaMalloc") != std::string::npos);
  CHECK(cudaGetLastError() == cudaSuccess);
  REQUIRE(tw.gpu.allocate(tw.gpuCtx, &p, 256) == dctSuccess);  // still usable
  tw.gpu.release(tw.gpuCtx, p);
}

TEST_CASE("unsupported dtypes are dctNotSupported, like the CPU twin") {
  Twins tw;
  DeviceArray<float> r(16), g(16), v(16);
  DeviceArray<uint32_t> idx(16);
  SelectArgs sa{g.get(), r.get(), 16, dctFloat16, 4, 1.0, 16, idx.get(), v.get()};
  CHECK(tw.gpu.selectCompact(tw.gpuCtx, &sa, tw.stream) == dctNotSupported);
  CHECK(tw.gpu.selectDense(tw.gpuCtx, &sa, tw.stream) == dctNotSupported);
  CHECK(tw.gpu.accumulate(tw.gpuCtx, r.get(), g.get(), 16, dctBFloat16, tw.stream) == dctNotSupported);
  CHECK(tw.gpu.scale(tw.gpuCtx, r.get(), 16, dctFloat16, 2.0, tw.stream) == dctNotSupported);
  ScatterArgs sc{r.get(), 16, dctFloat16, 4, idx.get(), v.get(), 1, true};
  sc.valueType = dctFloat32;  // values wider than the dense buffer: not a pair libdct uses
  CHECK(tw.gpu.scatterAdd(tw.gpuCtx, &sc, tw.stream) == dctNotSupported);
}
