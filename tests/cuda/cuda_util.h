// Helpers for the CUDA twin tests: device arrays, both twins' contexts, and
// the comparison rule (bit-exact, except that NaN payloads may differ: x86
// keeps an operand's payload, the GPU returns its canonical NaN).
#pragma once

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/memory_space.h"
#include "base/half_types.h"
#include "kernels/kernels.h"
#include "reference.h"

namespace dct::test {

#define CUDA_REQUIRE(call) REQUIRE((call) == cudaSuccess)

// Uploads and fills run on the legacy stream (cudaMemcpy of pageable memory
// may return before the data lands) while the ops under test run on a
// non-blocking stream that does not wait for it: each one finishes before
// returning, and a download first waits for everything queued.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    if (n_) CUDA_REQUIRE(cudaMalloc(&p_, n_ * sizeof(T)));
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() {
    if (p_) cudaFree(p_);
  }
  void upload(const std::vector<T>& host) {
    REQUIRE(host.size() == n_);
    if (n_) CUDA_REQUIRE(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
    CUDA_REQUIRE(cudaDeviceSynchronize());
  }
  void fillBytes(int byte) {
    if (n_) CUDA_REQUIRE(cudaMemset(p_, byte, n_ * sizeof(T)));
    CUDA_REQUIRE(cudaDeviceSynchronize());
  }
  std::vector<T> download() const {
    CUDA_REQUIRE(cudaDeviceSynchronize());
    std::vector<T> host(n_);
    if (n_) CUDA_REQUIRE(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  T* get() const { return static_cast<T*>(p_); }
  size_t size() const { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

// One context per twin, plus a non-default stream for the CUDA one.
struct Twins {
  const KernelOps& cpu = cpuKernelOps();
  const KernelOps& gpu = cudaKernelOps();
  KernelContext* cpuCtx = nullptr;
  KernelContext* gpuCtx = nullptr;
  cudaStream_t stream = nullptr;
  Twins() {
    REQUIRE(cpu.createContext(&cpuCtx) == dctSuccess);
    REQUIRE(gpu.createContext(&gpuCtx) == dctSuccess);
    CUDA_REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  ~Twins() {
    cpu.destroyContext(cpuCtx);
    gpu.destroyContext(gpuCtx);
    cudaStreamDestroy(stream);
  }
};

template <typename T>
bool sameValue(T a, T b) {
  return (std::isnan(a) && std::isnan(b)) || sameBits(a, b);
}

template <typename T>
void requireSameValues(const std::vector<T>& gpu, const std::vector<T>& cpu, size_t count) {
  REQUIRE(gpu.size() >= count);
  REQUIRE(cpu.size() >= count);
  for (size_t i = 0; i < count; i++) {
    CAPTURE(i);
    REQUIRE(sameValue(gpu[i], cpu[i]));
  }
}

// float, double, Half or BFloat16 -> its dctDataType_t.
template <typename T>
constexpr dctDataType_t dtypeOf() {
  return Value<T>::type;
}

}  // namespace dct::test
