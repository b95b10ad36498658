// Growable uninitialised host buffer: std::vector would zero-fill every
// resize, which costs a full memory pass on multi-MiB scratch.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>

namespace dct {

class Buffer {
 public:
  // Capacity for at least `bytes`; keeps the first `keep` bytes on growth.
  void reserve(size_t bytes, size_t keep = 0) {
    if (bytes <= capacity_) return;
    size_t grown = capacity_ + capacity_ / 2;
    size_t cap = bytes > grown ? bytes : grown;
    std::unique_ptr<unsigned char[]> fresh(new unsigned char[cap]);
    if (keep) std::memcpy(fresh.get(), data_.get(), keep);
    data_ = std::move(fresh);
    capacity_ = cap;
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
