// A growable buffer in a kernel twin's memory space (host or device),
// allocated through the ops table so core code never calls malloc/cudaMalloc.
// Grows geometrically and is reused across steps: no allocation in the
// steady state.
#pragma once

#include <cstddef>

#include "base/debug.h"
#include "kernels/kernels.h"

namespace dct {

class TwinBuffer {
 public:
  TwinBuffer() = default;
  TwinBuffer(const TwinBuffer&) = delete;
  TwinBuffer& operator=(const TwinBuffer&) = delete;
  ~TwinBuffer() { reset(); }

  void bind(const KernelOps* ops, KernelContext* ctx) {
    reset();
    ops_ = ops;
    ctx_ = ctx;
  }
  // Capacity for at least `bytes`, keeping the first `keep` bytes.
  dctResult_t reserve(size_t bytes, size_t keep = 0, void* stream = nullptr) {
    if (bytes <= capacity_) return dctSuccess;
    size_t grown = capacity_ + capacity_ / 2;
    size_t cap = bytes > grown ? bytes : grown;
    void* fresh = nullptr;
    dctResult_t res = ops_->allocate(ctx_, &fresh, cap);
    if (res != dctSuccess) return res;
    if (keep) res = ops_->copy(ctx_, fresh, data_, keep, stream);
    if (res == dctSuccess && keep) res = ops_->synchronize(ctx_, stream);
    ops_->release(ctx_, data_);
    data_ = fresh;
    capacity_ = cap;
    return res;
  }
  template <typename T = void>
  T* as() const { return static_cast<T*>(data_); }
  size_t capacity() const { return capacity_; }
  void reset() {
    if (ops_ && data_) ops_->release(ctx_, data_);
    data_ = nullptr;
    capacity_ = 0;
  }

 private:
  const KernelOps* ops_ = nullptr;
  KernelContext* ctx_ = nullptr;
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

// b.reserve(bytes), its running out of memory said on `comm`:
// "<fn>: out of memory for <what> (<bytes> bytes, count <count>)".
inline dctResult_t reserveFor(TwinBuffer& b, size_t bytes, dctComm_t comm, const char* fn, const char* what,
                              size_t count) {
  const dctResult_t res = b.reserve(bytes);
  if (res == dctOutOfMemory)
    return fail(comm, res, "%s: out of memory for %s (%zu bytes, count %zu)", fn, what, bytes, count);
  return res;
}

}  // namespace dct
