// Growable uninitialised host buffer: std::vector would zero-fill every
// resize, which costs a full memory pass on multi-MiB scratch. Growing never
// throws (it runs inside steps and thread-pool bodies, where an exception
// would strand the other ranks or terminate): it reports dctOutOfMemory and
// leaves the buffer as it was.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <new>

#include "dct/dct.h"

namespace dct {

class Buffer {
 public:
  // Capacity for at least `bytes`; keeps the first `keep` bytes on growth.
  [[nodiscard]] dctResult_t reserve(size_t bytes, size_t keep = 0) noexcept {
    if (bytes <= capacity_) return dctSuccess;
    const size_t grown = capacity_ + capacity_ / 2;
    size_t cap = bytes > grown ? bytes : grown;
    std::unique_ptr<unsigned char[]> fresh(new (std::nothrow) unsigned char[cap]);
    if (!fresh && cap > bytes) fresh.reset(new (std::nothrow) unsigned char[cap = bytes]);  // without the slack
    if (!fresh) return dctOutOfMemory;
    if (keep) std::memcpy(fresh.get(), data_.get(), keep);
    data_ = std::move(fresh);
    capacity_ = cap;
    return dctSuccess;
  }
  template <typename T = void>
  T* as() { return reinterpret_cast<T*>(data_.get()); }
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(data_.get()); }
  size_t capacity() const { return capacity_; }

 private:
  std::unique_ptr<unsigned char[]> data_;
  size_t capacity_ = 0;
};

}  // namespace dct
