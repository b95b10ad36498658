// A comm's sticky asynchronous error (dctCommGetAsyncError): an int32 that
// device kernels write when a queued step fails and the host reads without
// waiting for any stream, as NCCL's abort flag. Pinned, mapped host memory
// once a device step needs it; plain memory before (host steps).
#pragma once

#include <atomic>
#include <cstdint>

#include "dct/dct.h"

namespace dct {

class AsyncFlag {
 public:
  AsyncFlag() = default;
  AsyncFlag(const AsyncFlag&) = delete;
  AsyncFlag& operator=(const AsyncFlag&) = delete;
  ~AsyncFlag();
  // Device-visible memory (a device step is about to use the flag): mapped
  // once, carrying over what the plain word held. dctCudaError if CUDA
  // cannot map host memory.
  dctResult_t mapForDevice();
  // Where the ops read and write it (the twin's view).
  int32_t* pointer(bool device) {
    if (!mapped_) return &plain_;
    return device ? deviceView_ : mapped_;
  }
  // 0, or the dctResult_t of the first failed step.
  int32_t read() const {
    const int32_t* at = mapped_ ? mapped_ : &plain_;
    return reinterpret_cast<const std::atomic<int32_t>*>(at)->load(std::memory_order_acquire);
  }

 private:
  int32_t plain_ = 0;
  int32_t* mapped_ = nullptr;      // host view of the pinned word
  int32_t* deviceView_ = nullptr;  // its device pointer
};

}  // namespace dct
