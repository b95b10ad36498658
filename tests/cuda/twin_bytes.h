// Bytes in one kernel twin's memory (device or host), for the stream-step
// op tests: every read and write waits for the device.
#pragma once

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "cuda_util.h"

namespace dct::test {

// Bytes in one twin's memory; every read and write waits for the device.
class Bytes {
 public:
  Bytes(bool device, size_t bytes) : device_(device), bytes_(bytes) {
    if (device_) {
      if (bytes_) CUDA_REQUIRE(cudaMalloc(&p_, bytes_));
    } else {
      host_.assign(bytes_ ? bytes_ : 1, 0);
      p_ = host_.data();
    }
    fill(0);
  }
  Bytes(const Bytes&) = delete;
  Bytes& operator=(const Bytes&) = delete;
  ~Bytes() {
    if (device_ && p_) cudaFree(p_);
  }
  void* get() const { return p_; }
  size_t size() const { return bytes_; }
  void write(const void* src, size_t bytes, size_t offset = 0) {
    REQUIRE(offset + bytes <= bytes_);
    if (bytes == 0) return;
    if (device_) {
      CUDA_REQUIRE(cudaDeviceSynchronize());
      CUDA_REQUIRE(cudaMemcpy(static_cast<char*>(p_) + offset, src, bytes, cudaMemcpyHostToDevice));
      CUDA_REQUIRE(cudaDeviceSynchronize());
    } else {
      std::memcpy(static_cast<char*>(p_) + offset, src, bytes);
    }
  }
  void fill(int byte) {
    std::vector<unsigned char> b(bytes_, static_cast<unsigned char>(byte));
    write(b.data(), bytes_);
  }
  std::vector<unsigned char> read() const {
    std::vector<unsigned char> out(bytes_);
    if (bytes_ == 0) return out;
    if (device_) {
      CUDA_REQUIRE(cudaDeviceSynchronize());
      CUDA_REQUIRE(cudaMemcpy(out.data(), p_, bytes_, cudaMemcpyDeviceToHost));
    } else {
      std::memcpy(out.data(), p_, bytes_);
    }
    return out;
  }

 private:
  bool device_;
  size_t bytes_;
  void* p_ = nullptr;
  std::vector<unsigned char> host_;
};

}  // namespace dct::test
