// SSE2 body of the fused select (x86-64 baseline, so no dispatch needed):
// eight elements per step, acc stored with the taken lanes zeroed, and a
// movemask of the taken lanes so the rare hits are extracted with ctz
// instead of a second pass. Same results, bit for bit, as the scalar loop.
#pragma once

#include <cstddef>

#if defined(__SSE2__)
#include <emmintrin.h>
#define DCT_SELECT_SIMD 1

namespace dct {

// Lanes of `mask` (bit l = element base + l) go to the message.
template <typename T, typename I>
inline size_t emitLanes(unsigned mask, size_t base, const T* lanes, I* idx, T* val, size_t m) {
  while (mask) {
    const int l = __builtin_ctz(mask);
    idx[m] = static_cast<I>(base + l);
    val[m] = lanes[l];
    m++;
    mask &= mask - 1;
  }
  return m;
}

template <typename I, bool kHasGrad>
size_t selectSimd(const float* __restrict grad, const float* in, float* residual, size_t begin, size_t end,
                  float tau, I* __restrict idx, float* __restrict val, size_t& done) {
  const __m128 absMask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  const __m128 vtau = _mm_set1_ps(tau);
  size_t m = 0, i = begin;
  for (; i + 8 <= end; i += 8) {
    __m128 a0 = _mm_loadu_ps(in + i), a1 = _mm_loadu_ps(in + i + 4);
    if constexpr (kHasGrad) {
      a0 = _mm_add_ps(a0, _mm_loadu_ps(grad + i));
      a1 = _mm_add_ps(a1, _mm_loadu_ps(grad + i + 4));
    }
    // not-less-than: true for |acc| >= tau and for NaN, like !(|acc| < tau)
    const __m128 t0 = _mm_cmpnlt_ps(_mm_and_ps(a0, absMask), vtau);
    const __m128 t1 = _mm_cmpnlt_ps(_mm_and_ps(a1, absMask), vtau);
    _mm_storeu_ps(residual + i, _mm_andnot_ps(t0, a0));
    _mm_storeu_ps(residual + i + 4, _mm_andnot_ps(t1, a1));
    const unsigned mask = _mm_movemask_ps(t0) | (_mm_movemask_ps(t1) << 4);
    if (mask) {
      alignas(16) float lanes[8];
      _mm_store_ps(lanes, a0);
      _mm_store_ps(lanes + 4, a1);
      m = emitLanes(mask, i, lanes, idx, val, m);
    }
  }
  done = i;
  return m;
}

template <typename I, bool kHasGrad>
size_t selectSimd(const double* __restrict grad, const double* in, double* residual, size_t begin, size_t end,
                  double tau, I* __restrict idx, double* __restrict val, size_t& done) {
  const __m128d absMask = _mm_castsi128_pd(_mm_set1_epi64x(0x7fffffffffffffffll));
  const __m128d vtau = _mm_set1_pd(tau);
  size_t m = 0, i = begin;
  for (; i + 4 <= end; i += 4) {
    __m128d a0 = _mm_loadu_pd(in + i), a1 = _mm_loadu_pd(in + i + 2);
    if constexpr (kHasGrad) {
      a0 = _mm_add_pd(a0, _mm_loadu_pd(grad + i));
      a1 = _mm_add_pd(a1, _mm_loadu_pd(grad + i + 2));
    }
    const __m128d t0 = _mm_cmpnlt_pd(_mm_and_pd(a0, absMask), vtau);
    const __m128d t1 = _mm_cmpnlt_pd(_mm_and_pd(a1, absMask), vtau);
    _mm_storeu_pd(residual + i, _mm_andnot_pd(t0, a0));
    _mm_storeu_pd(residual + i + 2, _mm_andnot_pd(t1, a1));
    const unsigned mask = _mm_movemask_pd(t0) | (_mm_movemask_pd(t1) << 2);
    if (mask) {
      alignas(16) double lanes[4];
      _mm_store_pd(lanes, a0);
      _mm_store_pd(lanes + 2, a1);
      m = emitLanes(mask, i, lanes, idx, val, m);
    }
  }
  done = i;
  return m;
}

}  // namespace dct
#endif
