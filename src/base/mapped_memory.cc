#include "base/mapped_memory.h"

#include <sys/mman.h>

#include <cstdint>

namespace dct {

void* mapMemory(size_t bytes, size_t align, bool hugePages) {
  // Map `align` more and cut the unaligned head and the tail away.
  const size_t span = bytes + align;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = align ? (start + align - 1) & ~(align - 1) : start;
  if (aligned > start) munmap(raw, aligned - start);
  if (start + span > aligned + bytes) munmap(reinterpret_cast<void*>(aligned + bytes), start + span - aligned - bytes);
  if (hugePages) madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

void unmapMemory(void* ptr, size_t bytes) {
  if (ptr) munmap(ptr, bytes);
}

}  // namespace dct
