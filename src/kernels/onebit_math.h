// Element rules of the 1-bit kernels (onebit_kernels.h), compiled into both
// twins so they cannot drift apart: each is a handful of single IEEE
// operations that round identically on the CPU and the GPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/half_types.h"
#include "base/host_device.h"
#include "kernels/onebit_kernels.h"

namespace dct {

// x = v + e (v widened exactly to the accumulation type A), or e itself.
template <typename T, typename A>
DCT_HOST_DEVICE A onebitInput(const T* input, A e, size_t i) {
  return input ? static_cast<A>(Value<T>::load(input[i])) + e : e;
}

// The sign bit: set for x >= 0 (+0 and -0 included), clear for x < 0 and NaN.
template <typename A>
DCT_HOST_DEVICE uint32_t onebitBit(A x) {
  return x >= A(0) ? 1u : 0u;
}

// What a bit decodes to.
template <typename A>
DCT_HOST_DEVICE A onebitSigned(uint32_t word, unsigned bit, A scale) {
  return (word >> bit) & 1u ? scale : -scale;
}

// The error left after sending x as +-scale.
template <typename A>
DCT_HOST_DEVICE A onebitError(A x, A scale) {
  return x - (x >= A(0) ? scale : -scale);
}

// Element i's error going in: error[i], or the error a kept x left
// (pending: error holds x, sent with scale p).
template <typename A>
DCT_HOST_DEVICE A onebitErrorIn(const A* error, size_t i, bool pending, A p) {
  return pending ? onebitError(error[i], p) : error[i];
}

// x^2 in fp64, never fused with the add that consumes it.
template <typename A>
DCT_HOST_DEVICE double onebitSquare(A x) {
  const double d = static_cast<double>(x);
#if defined(__CUDA_ARCH__)
  return __dmul_rn(d, d);
#else
  return d * d;
#endif
}

// The halving tree over 32 values (t is overwritten); the GPU computes the
// same sums with a warp's shuffle-down reduction.
DCT_HOST_DEVICE double onebitTree32(double* t) {
  for (int s = 16; s > 0; s >>= 1)
    for (int i = 0; i < s; i++) t[i] = t[i] + t[i + s];
  return t[0];
}

// A server's mean over the ranks of the decoded bit i (ranks in order);
// slot r holds rank r's scales and signs (onebit_kernels.h), entry k the
// scale of i's piece.
template <typename A>
DCT_HOST_DEVICE A onebitMean(OnebitSlotsOf<A> slots, int ranks, size_t i, size_t k = 0) {
  const size_t w = i / 32;
  const unsigned b = static_cast<unsigned>(i % 32);
  A sum = onebitSigned(slots.words(0)[w], b, slots.scale(0, k));
  for (int r = 1; r < ranks; r++) sum = sum + onebitSigned(slots.words(r)[w], b, slots.scale(r, k));
  return sum / static_cast<A>(ranks);
}

// The canonical quiet NaN of A (a NaN factor's output on both twins).
template <typename A> DCT_HOST_DEVICE A onebitNaN();
template <> DCT_HOST_DEVICE float onebitNaN<float>() { return bitsFloat(0x7fc00000u); }
template <> DCT_HOST_DEVICE double onebitNaN<double>() {
  const uint64_t bits = 0x7ff8000000000000ull;
  double d;
  std::memcpy(&d, &bits, sizeof(d));
  return d;
}

// One output element; chunk j's scales and signs in slot j, entry k the
// scale of i's piece.
template <typename T, typename A = typename Value<T>::Acc>
DCT_HOST_DEVICE T onebitDecoded(OnebitSlotsOf<A> slots, size_t chunkWords, size_t i, A factor, bool nanFactor,
                                size_t k = 0) {
  if (nanFactor) return Value<T>::store(onebitNaN<A>());
  const size_t w = i / 32, j = w / chunkWords;
  const A s = onebitSigned(slots.words(j)[w - j * chunkWords], static_cast<unsigned>(i % 32), slots.scale(j, k));
  return Value<T>::store(s * factor);
}

}  // namespace dct
