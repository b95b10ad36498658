// Anonymous memory straight from the kernel, never the heap: the CPU twin's
// tensor-sized blocks (on huge-page boundaries), kernel_perf's buffers laid
// out the same way, and the link probe's buffers (whose heap memory, reused
// by a compressor after MPI had sent from it, slowed its selection for
// good).
#pragma once

#include <cstddef>

namespace dct {

// `bytes` zero-filled bytes at a multiple of `align` (a power of two; 0: a
// page), asked for transparent huge pages if `hugePages`; null if the
// kernel refuses. Give them back with unmapMemory(ptr, bytes).
void* mapMemory(size_t bytes, size_t align = 0, bool hugePages = false);
void unmapMemory(void* ptr, size_t bytes);

// Transparent huge pages are 2 MiB on x86-64; huge-page blocks are mapped on
// that boundary and in whole pages, so the advice covers all of them.
constexpr size_t kHugePageBytes = size_t(1) << 21;
inline size_t hugePageRounded(size_t bytes) { return (bytes + kHugePageBytes - 1) & ~(kHugePageBytes - 1); }

// One mapping, owned: mapped when made (in whole huge pages if asked for
// them), unmapped when destroyed; data() is null if the kernel refused.
class MappedMemory {
 public:
  explicit MappedMemory(size_t bytes, bool hugePages = false)
      : bytes_(hugePages ? hugePageRounded(bytes) : bytes),
        data_(mapMemory(bytes_, hugePages ? kHugePageBytes : 0, hugePages)) {}
  ~MappedMemory() { unmapMemory(data_, bytes_); }
  MappedMemory(const MappedMemory&) = delete;
  MappedMemory& operator=(const MappedMemory&) = delete;
  void* data() const { return data_; }

 private:
  size_t bytes_;
  void* data_;
};

}  // namespace dct
