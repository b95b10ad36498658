#include "base/half_bulk.h"

#include "base/half_types.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define DCT_HAVE_F16C_PATH 1
#endif

namespace dct {
namespace {

#if DCT_HAVE_F16C_PATH
bool hasF16c() {
  static const bool yes = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return yes;
}

// Eight lanes to fp16; a group holding a NaN goes the scalar way (F16C keeps
// NaN payloads, the library writes the canonical NaN).
__attribute__((target("avx,f16c"))) inline bool store8(__m256 x, uint16_t* dst) {
  if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)) != 0) return false;
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
  return true;
}

__attribute__((target("avx,f16c"))) size_t halfToFloatF16c(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  return i;
}

__attribute__((target("avx,f16c"))) size_t floatToHalfF16c(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    if (!store8(_mm256_loadu_ps(src + i), dst + i))
      for (size_t j = i; j < i + 8; j++) dst[j] = floatToHalfBits(src[j]);
  return i;
}

__attribute__((target("avx,f16c"))) size_t halfSumF16c(const uint16_t* a, const uint16_t* b, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    if (!store8(_mm256_add_ps(x, y), dst + i))
      for (size_t j = i; j < i + 8; j++) dst[j] = floatToHalfBits(halfBitsToFloat(a[j]) + halfBitsToFloat(b[j]));
  }
  return i;
}
#endif

}  // namespace

void halfToFloatBulk(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
#if DCT_HAVE_F16C_PATH
  if (hasF16c()) i = halfToFloatF16c(src, dst, n);
#endif
  for (; i < n; i++) dst[i] = halfBitsToFloat(src[i]);
}

void floatToHalfBulk(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
#if DCT_HAVE_F16C_PATH
  if (hasF16c()) i = floatToHalfF16c(src, dst, n);
#endif
  for (; i < n; i++) dst[i] = floatToHalfBits(src[i]);
}

void halfSumBulk(const uint16_t* a, const uint16_t* b, uint16_t* dst, size_t n) {
  size_t i = 0;
#if DCT_HAVE_F16C_PATH
  if (hasF16c()) i = halfSumF16c(a, b, dst, n);
#endif
  for (; i < n; i++) dst[i] = floatToHalfBits(halfBitsToFloat(a[i]) + halfBitsToFloat(b[i]));
}

}  // namespace dct
