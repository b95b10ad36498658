// Size arithmetic that cannot wrap. Every count x element size, every sum
// of per-rank sizes (ours or a peer's) and every conversion into MPI's int
// counts goes through these, so that a huge argument or a peer's bogus size
// becomes a clear error instead of a short buffer.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>

namespace dct {

// out = a * b; false (out untouched) when the product does not fit size_t.
[[nodiscard]] inline bool checkedMul(size_t a, size_t b, size_t& out) noexcept {
  size_t r;
  if (__builtin_mul_overflow(a, b, &r)) return false;
  out = r;
  return true;
}

// out = a + b; false (out untouched) when the sum does not fit size_t.
[[nodiscard]] inline bool checkedAdd(size_t a, size_t b, size_t& out) noexcept {
  size_t r;
  if (__builtin_add_overflow(a, b, &r)) return false;
  out = r;
  return true;
}

// out = a * b + c, all or nothing.
[[nodiscard]] inline bool checkedMulAdd(size_t a, size_t b, size_t c, size_t& out) noexcept {
  size_t p;
  return checkedMul(a, b, p) && checkedAdd(p, c, out);
}

// out = sum of n values; false on overflow.
template <typename T>
[[nodiscard]] inline bool checkedSum(const T* values, size_t n, size_t& out) noexcept {
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    if (static_cast<uint64_t>(values[i]) > SIZE_MAX) return false;
    if (!checkedAdd(total, static_cast<size_t>(values[i]), total)) return false;
  }
  out = total;
  return true;
}

// A (bytes, offsets) layout of n blocks: false when a block's end does not
// fit size_t (no buffer holds it); else `end` is the furthest non-empty end.
inline bool checkedExtent(const size_t* bytes, const size_t* offsets, int n, size_t& end) {
  size_t e = 0;
  for (int i = 0; i < n; i++) {
    size_t blockEnd = 0;
    if (bytes[i] == 0) continue;
    if (!checkedAdd(offsets[i], bytes[i], blockEnd)) return false;
    if (blockEnd > e) e = blockEnd;
  }
  end = e;
  return true;
}

// A peer's or a caller's 64-bit size as size_t (lossless on LP64; checked
// for 32-bit builds).
[[nodiscard]] inline bool toSize(uint64_t v, size_t& out) noexcept {
  if (v > SIZE_MAX) return false;
  out = static_cast<size_t>(v);
  return true;
}

// MPI's int counts and displacements.
[[nodiscard]] inline bool toInt(size_t v, int& out) noexcept {
  if (v > static_cast<size_t>(INT_MAX)) return false;
  out = static_cast<int>(v);
  return true;
}

}  // namespace dct
