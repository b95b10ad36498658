// SSE2 and AVX2 bodies of the DCT-MP threshold rows (k == 0, and k >= D
// as the threshold -Inf): compares and movemasks, the same masks, counts
// and non-finite totals as the plain body. fp32/fp64 compare |x| with tau
// as the plain body does (NaN kept); fp16/bf16 compare their key bits with
// firstKeyAtLeast(tau), which keeps the same entries.
#pragma once

#include <cfloat>
#include <type_traits>

#include "base/half_types.h"
#include "kernels/row_lanes.h"
#include "kernels/row_select_scalar.h"

#if DCT_ROW_SIMD
namespace dct {

// Bits of 32 columns kept by the threshold; `nf` gets those non-finite.
inline uint32_t thresholdBitsSse2(const float* p, __m128 tau, uint32_t& nf) {
  const __m128 abs = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff)), max = _mm_set1_ps(FLT_MAX);
  uint32_t keep = 0;
  nf = 0;
#pragma GCC unroll 8
  for (int h = 0; h < 2; h++) {
    __m128i t[4], f[4];
#pragma GCC unroll 8
    for (int i = 0; i < 4; i++) {
      const __m128 a = _mm_and_ps(_mm_loadu_ps(p + 16 * h + 4 * i), abs);
      t[i] = _mm_castps_si128(_mm_cmpnlt_ps(a, tau));  // !(|x| < tau): NaN too
      f[i] = _mm_castps_si128(_mm_cmpnle_ps(a, max));  // Inf, NaN
    }
    keep |= static_cast<uint32_t>(_mm_movemask_epi8(_mm_packs_epi16(_mm_packs_epi32(t[0], t[1]),
                                                                    _mm_packs_epi32(t[2], t[3])))) << (16 * h);
    nf |= static_cast<uint32_t>(_mm_movemask_epi8(_mm_packs_epi16(_mm_packs_epi32(f[0], f[1]),
                                                                  _mm_packs_epi32(f[2], f[3])))) << (16 * h);
  }
  return keep;
}
inline uint32_t thresholdBitsSse2(const double* p, __m128d tau, uint32_t& nf) {
  const __m128d abs = _mm_castsi128_pd(_mm_set1_epi64x(0x7fffffffffffffffll)), max = _mm_set1_pd(DBL_MAX);
  // one 32-bit lane per element of two 2-element masks
  auto four = [](__m128d m0, __m128d m1) {
    const __m128 lanes = _mm_shuffle_ps(_mm_castpd_ps(m0), _mm_castpd_ps(m1), _MM_SHUFFLE(2, 0, 2, 0));
    return static_cast<uint32_t>(_mm_movemask_ps(lanes));
  };
  uint32_t keep = 0;
  nf = 0;
#pragma GCC unroll 8
  for (int q = 0; q < 8; q++) {
    const __m128d a0 = _mm_and_pd(_mm_loadu_pd(p + 4 * q), abs), a1 = _mm_and_pd(_mm_loadu_pd(p + 4 * q + 2), abs);
    keep |= four(_mm_cmpnlt_pd(a0, tau), _mm_cmpnlt_pd(a1, tau)) << (4 * q);
    nf |= four(_mm_cmpnle_pd(a0, max), _mm_cmpnle_pd(a1, max)) << (4 * q);
  }
  return keep;
}
template <typename H>  // fp16, bf16: `below` = firstKeyAtLeast(tau) - 1
inline uint32_t thresholdBitsSse2(const H* p, __m128i below, uint32_t& nf) {
  const __m128i abs = _mm_set1_epi16(0x7fff), finite = _mm_set1_epi16(static_cast<int16_t>(kInfKey<H> - 1));
  uint32_t keep = 0;
  nf = 0;
#pragma GCC unroll 8
  for (int h = 0; h < 2; h++) {
    const __m128i* q = reinterpret_cast<const __m128i*>(p + 16 * h);
    const __m128i a0 = _mm_and_si128(_mm_loadu_si128(q), abs), a1 = _mm_and_si128(_mm_loadu_si128(q + 1), abs);
    keep |= static_cast<uint32_t>(_mm_movemask_epi8(
                _mm_packs_epi16(_mm_cmpgt_epi16(a0, below), _mm_cmpgt_epi16(a1, below)))) << (16 * h);
    nf |= static_cast<uint32_t>(_mm_movemask_epi8(
              _mm_packs_epi16(_mm_cmpgt_epi16(a0, finite), _mm_cmpgt_epi16(a1, finite)))) << (16 * h);
  }
  return keep;
}

template <typename T, typename Acc = typename Value<T>::Acc>
size_t thresholdRowsSse2(const T* rows, size_t n, size_t d, Acc tau, uint32_t* mask, uint32_t* counts) {
  const auto limit = [&] {
    if constexpr (std::is_same_v<T, float>) return _mm_set1_ps(tau);
    else if constexpr (std::is_same_v<T, double>) return _mm_set1_pd(tau);
    else return _mm_set1_epi16(static_cast<int16_t>(firstKeyAtLeast<T>(tau) - 1));
  }();
  size_t nonFinite = 0;
  auto kept = [&](const T* q, uint32_t keep) {
    uint32_t nf;
    const uint32_t bits = thresholdBitsSse2(q, limit, nf) & keep;
    nonFinite += std::popcount(bits & nf);
    return bits;
  };
  for (size_t r = 0; r < n; r++)
    counts[r] = static_cast<uint32_t>(rowWords(rows + r * d, d, mask + r * maskWords(d), kept));
  return nonFinite;
}

// Bits of 32 columns kept by the threshold; `nf` gets those non-finite.
DCT_AVX2 inline uint32_t thresholdBitsAvx2(const float* p, __m256i limit, uint32_t& nf) {
  const __m256 tau = _mm256_castsi256_ps(limit);
  const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), max = _mm256_set1_ps(FLT_MAX);
  __m256i t[4], f[4];
#pragma GCC unroll 8
  for (int i = 0; i < 4; i++) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(p + 8 * i), abs);
    t[i] = _mm256_castps_si256(_mm256_cmp_ps(a, tau, _CMP_NLT_UQ));  // !(|x| < tau): NaN too
    f[i] = _mm256_castps_si256(_mm256_cmp_ps(a, max, _CMP_NLE_UQ));  // Inf, NaN
  }
  nf = bits32Avx2(f);
  return bits32Avx2(t);
}
DCT_AVX2 inline uint32_t thresholdBitsAvx2(const double* p, __m256i limit, uint32_t& nf) {
  const __m256d tau = _mm256_castsi256_pd(limit);
  const __m256d abs = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffll)), max = _mm256_set1_pd(DBL_MAX);
  uint32_t keep = 0;
  nf = 0;
#pragma GCC unroll 8
  for (int q = 0; q < 8; q++) {
    const __m256d a = _mm256_and_pd(_mm256_loadu_pd(p + 4 * q), abs);
    keep |= static_cast<uint32_t>(_mm256_movemask_pd(_mm256_cmp_pd(a, tau, _CMP_NLT_UQ))) << (4 * q);
    nf |= static_cast<uint32_t>(_mm256_movemask_pd(_mm256_cmp_pd(a, max, _CMP_NLE_UQ))) << (4 * q);
  }
  return keep;
}
template <typename H>  // fp16, bf16: `below` = firstKeyAtLeast(tau) - 1
DCT_AVX2 inline uint32_t thresholdBitsAvx2(const H* p, __m256i below, uint32_t& nf) {
  const __m256i abs = _mm256_set1_epi16(0x7fff), finite = _mm256_set1_epi16(static_cast<int16_t>(kInfKey<H> - 1));
  const __m256i* q = reinterpret_cast<const __m256i*>(p);
  const __m256i a0 = _mm256_and_si256(_mm256_loadu_si256(q), abs);
  const __m256i a1 = _mm256_and_si256(_mm256_loadu_si256(q + 1), abs);
  nf = bits16Avx2(_mm256_cmpgt_epi16(a0, finite), _mm256_cmpgt_epi16(a1, finite));
  return bits16Avx2(_mm256_cmpgt_epi16(a0, below), _mm256_cmpgt_epi16(a1, below));
}

// The columns the threshold keeps, counting the non-finite among them.
template <typename T>
struct KeptAvx2 {
  __m256i limit;  // tau (fp32, fp64), or the key below the first kept (fp16, bf16)
  size_t nonFinite = 0;
  DCT_AVX2 explicit KeptAvx2(typename Value<T>::Acc tau) {
    if constexpr (std::is_same_v<T, float>) limit = _mm256_castps_si256(_mm256_set1_ps(tau));
    else if constexpr (std::is_same_v<T, double>) limit = _mm256_castpd_si256(_mm256_set1_pd(tau));
    else limit = _mm256_set1_epi16(static_cast<int16_t>(firstKeyAtLeast<T>(tau) - 1));
  }
  DCT_AVX2 uint32_t operator()(const T* q, uint32_t keep) {
    uint32_t nf;
    const uint32_t bits = thresholdBitsAvx2(q, limit, nf) & keep;
    nonFinite += std::popcount(bits & nf);
    return bits;
  }
};

template <typename T, typename Acc = typename Value<T>::Acc>
DCT_AVX2 size_t thresholdRowsAvx2(const T* rows, size_t n, size_t d, Acc tau, uint32_t* mask, uint32_t* counts) {
  KeptAvx2<T> kept(tau);
  for (size_t r = 0; r < n; r++)
    counts[r] = static_cast<uint32_t>(rowWordsAvx2(rows + r * d, d, mask + r * maskWords(d), kept));
  return kept.nonFinite;
}

}  // namespace dct
#endif
