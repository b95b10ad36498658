// Vector bodies of the fused select: acc stored with the taken lanes zeroed,
// and a movemask of the taken lanes so the rare hits are extracted with ctz
// instead of a second pass. Same results, bit for bit, as the scalar loop.
//  * SSE2 (the x86-64 baseline): eight elements per step, fp32 and fp64.
//  * AVX2 for fp32, chosen at run time where the CPU has it: sixteen
//    elements per step. The SSE2 body is bound by instructions, not memory:
//    2^24 fp32 out of place on one Zen 4 core took 6.4 ms (SSE2) and 6.2
//    (AVX2) with plain stores, 5.9 and 5.0 streamed; an in-place add of the
//    same bytes, 3.9 (bench/results/2026-11-25-select-avx2).
// kStream writes the new residual with non-temporal stores (kernels.h's
// kStreamBytes): `residual + begin` must then be aligned to the vector
// (selectAlignment), and the caller fences (streamFence) before anyone else
// reads it.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__SSE2__)
#include <immintrin.h>

#include "kernels/cpu_features.h"
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

// Bytes `residual + begin` must be aligned to for the streamed bodies.
template <typename T>
inline size_t selectAlignment() {
  return sizeof(T) == 4 && cpuHasAvx2() ? 32 : 16;
}

template <bool kStream>
inline void storeLanes(float* p, __m128 v) {
  if constexpr (kStream) _mm_stream_ps(p, v);
  else _mm_storeu_ps(p, v);
}
template <bool kStream>
inline void storeLanes(double* p, __m128d v) {
  if constexpr (kStream) _mm_stream_pd(p, v);
  else _mm_storeu_pd(p, v);
}
template <bool kStream>
__attribute__((target("avx2"))) inline void storeLanes(float* p, __m256 v) {
  if constexpr (kStream) _mm256_stream_ps(p, v);
  else _mm256_storeu_ps(p, v);
}

// Appends the hits of [begin, end) to idx/val from position m; returns the
// new count and, in `done`, where the scalar tail starts.
template <typename I, bool kHasGrad, bool kStream>
size_t selectSse2(const float* __restrict grad, const float* in, float* residual, size_t begin, size_t end,
                  float tau, I* __restrict idx, float* __restrict val, size_t m, size_t& done) {
  const __m128 absMask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  const __m128 vtau = _mm_set1_ps(tau);
  size_t i = begin;
  for (; i + 8 <= end; i += 8) {
    __m128 a0 = _mm_loadu_ps(in + i), a1 = _mm_loadu_ps(in + i + 4);
    if constexpr (kHasGrad) {
      a0 = _mm_add_ps(a0, _mm_loadu_ps(grad + i));
      a1 = _mm_add_ps(a1, _mm_loadu_ps(grad + i + 4));
    }
    // not-less-than: true for |acc| >= tau and for NaN, like !(|acc| < tau)
    const __m128 t0 = _mm_cmpnlt_ps(_mm_and_ps(a0, absMask), vtau);
    const __m128 t1 = _mm_cmpnlt_ps(_mm_and_ps(a1, absMask), vtau);
    storeLanes<kStream>(residual + i, _mm_andnot_ps(t0, a0));
    storeLanes<kStream>(residual + i + 4, _mm_andnot_ps(t1, a1));
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

template <typename I, bool kHasGrad, bool kStream>
size_t selectSse2(const double* __restrict grad, const double* in, double* residual, size_t begin, size_t end,
                  double tau, I* __restrict idx, double* __restrict val, size_t m, size_t& done) {
  const __m128d absMask = _mm_castsi128_pd(_mm_set1_epi64x(0x7fffffffffffffffll));
  const __m128d vtau = _mm_set1_pd(tau);
  size_t i = begin;
  for (; i + 4 <= end; i += 4) {
    __m128d a0 = _mm_loadu_pd(in + i), a1 = _mm_loadu_pd(in + i + 2);
    if constexpr (kHasGrad) {
      a0 = _mm_add_pd(a0, _mm_loadu_pd(grad + i));
      a1 = _mm_add_pd(a1, _mm_loadu_pd(grad + i + 2));
    }
    const __m128d t0 = _mm_cmpnlt_pd(_mm_and_pd(a0, absMask), vtau);
    const __m128d t1 = _mm_cmpnlt_pd(_mm_and_pd(a1, absMask), vtau);
    storeLanes<kStream>(residual + i, _mm_andnot_pd(t0, a0));
    storeLanes<kStream>(residual + i + 2, _mm_andnot_pd(t1, a1));
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

template <typename I, bool kHasGrad, bool kStream>
__attribute__((target("avx2"))) size_t selectAvx2(const float* __restrict grad, const float* in, float* residual,
                                                  size_t begin, size_t end, float tau, I* __restrict idx,
                                                  float* __restrict val, size_t m, size_t& done) {
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 vtau = _mm256_set1_ps(tau);
  size_t i = begin;
  for (; i + 16 <= end; i += 16) {
    __m256 a0 = _mm256_loadu_ps(in + i), a1 = _mm256_loadu_ps(in + i + 8);
    if constexpr (kHasGrad) {
      a0 = _mm256_add_ps(a0, _mm256_loadu_ps(grad + i));
      a1 = _mm256_add_ps(a1, _mm256_loadu_ps(grad + i + 8));
    }
    // unordered not-less-than: NaN is taken, as in the SSE2 body
    const __m256 t0 = _mm256_cmp_ps(_mm256_and_ps(a0, absMask), vtau, _CMP_NLT_UQ);
    const __m256 t1 = _mm256_cmp_ps(_mm256_and_ps(a1, absMask), vtau, _CMP_NLT_UQ);
    storeLanes<kStream>(residual + i, _mm256_andnot_ps(t0, a0));
    storeLanes<kStream>(residual + i + 8, _mm256_andnot_ps(t1, a1));
    const unsigned mask = _mm256_movemask_ps(t0) | (_mm256_movemask_ps(t1) << 8);
    if (mask) {
      alignas(32) float lanes[16];
      _mm256_store_ps(lanes, a0);
      _mm256_store_ps(lanes + 8, a1);
      m = emitLanes(mask, i, lanes, idx, val, m);
    }
  }
  done = i;
  return m;
}

template <typename I, bool kHasGrad, bool kStream>
size_t selectSimd(const float* grad, const float* in, float* residual, size_t begin, size_t end, float tau, I* idx,
                  float* val, size_t m, size_t& done) {
  if (cpuHasAvx2()) return selectAvx2<I, kHasGrad, kStream>(grad, in, residual, begin, end, tau, idx, val, m, done);
  return selectSse2<I, kHasGrad, kStream>(grad, in, residual, begin, end, tau, idx, val, m, done);
}

template <typename I, bool kHasGrad, bool kStream>
size_t selectSimd(const double* grad, const double* in, double* residual, size_t begin, size_t end, double tau,
                  I* idx, double* val, size_t m, size_t& done) {
  return selectSse2<I, kHasGrad, kStream>(grad, in, residual, begin, end, tau, idx, val, m, done);
}

}  // namespace dct
#endif
