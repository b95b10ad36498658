// The replaceable global allocation functions, with the fault seam of
// alloc_fault.h. Everything goes to malloc/free (aligned_alloc for the
// aligned forms), so every delete form frees alike.
#include "alloc_fault.h"

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

#include <execinfo.h>
#include <unistd.h>

namespace dcttest::alloc {
namespace {

std::atomic<bool> armedFlag{false};
std::atomic<long long> counted{0}, failing{-1};
std::atomic<bool> firedFlag{false};

// Whether this allocation is the one to fail.
bool failNow() {
  if (!armedFlag.load(std::memory_order_relaxed)) return false;
  const long long n = counted.fetch_add(1, std::memory_order_relaxed);
  if (n != failing.load(std::memory_order_relaxed)) return false;
  firedFlag.store(true, std::memory_order_relaxed);
  // DCT_ALLOC_FAULT_TRACE: where the failing allocation was made, to stderr.
  static const bool trace = std::getenv("DCT_ALLOC_FAULT_TRACE") != nullptr;
  if (trace) {
    void* frames[32];
    const int depth = backtrace(frames, 32);
    backtrace_symbols_fd(frames, depth, STDERR_FILENO);
    (void)!write(STDERR_FILENO, "----\n", 5);
  }
  return true;
}

void* allocate(std::size_t n, std::size_t align) noexcept {
  if (failNow()) return nullptr;
  if (n == 0) n = 1;
  if (align <= alignof(std::max_align_t)) return std::malloc(n);
  return std::aligned_alloc(align, (n + align - 1) / align * align);
}

void* allocateOrThrow(std::size_t n, std::size_t align) {
  void* p = allocate(n, align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void arm(long long failAt) {
  counted.store(0);
  failing.store(failAt);
  firedFlag.store(false);
  armedFlag.store(true);
}

long long disarm() {
  armedFlag.store(false);
  failing.store(-1);
  return counted.load();
}

bool fired() { return firedFlag.load(); }

}  // namespace dcttest::alloc

using dcttest::alloc::allocate;
using dcttest::alloc::allocateOrThrow;
constexpr std::size_t kPlain = alignof(std::max_align_t);

void* operator new(std::size_t n) { return allocateOrThrow(n, kPlain); }
void* operator new[](std::size_t n) { return allocateOrThrow(n, kPlain); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return allocate(n, kPlain); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return allocate(n, kPlain); }
void* operator new(std::size_t n, std::align_val_t a) { return allocateOrThrow(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return allocateOrThrow(n, static_cast<std::size_t>(a)); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(n, static_cast<std::size_t>(a));
}

void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
