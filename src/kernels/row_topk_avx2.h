// AVX2 body of the DCT-MP per-row top-K, picked at run time where the CPU
// has AVX2 (row_topk_sse2.h has the method): eight rows per network for
// fp32/fp16/bf16 (32-bit lanes, native max/min), four for fp64 (64-bit
// lanes: compare, then swap with xor, AVX2 having no 64-bit max).
#pragma once

#include <type_traits>
#include <utility>

#include "kernels/row_lanes.h"
#include "kernels/row_select_scalar.h"

#if DCT_ROW_SIMD
namespace dct {

// Lanes of 32-bit keys: fp32, and fp16/bf16 zero-extended.
struct Avx2Keys32 {
  static constexpr size_t kLanes = 8;  // rows per network, columns per transpose
  static constexpr size_t kMaxK = 64;  // past it the plain body's nth_element wins
  DCT_AVX2 static __m256i splat(int64_t x) { return _mm256_set1_epi32(static_cast<int32_t>(x)); }
  DCT_AVX2 static __m256i equal(__m256i a, __m256i b) { return _mm256_cmpeq_epi32(a, b); }
  DCT_AVX2 static __m256i minus(__m256i a, __m256i b) { return _mm256_sub_epi32(a, b); }
  // hi keeps the larger, lo moves on with the smaller
  DCT_AVX2 static void order(__m256i& hi, __m256i& lo) {
    const __m256i l = _mm256_min_epi32(hi, lo);
    hi = _mm256_max_epi32(hi, lo);
    lo = l;
  }
  template <typename T>
  DCT_AVX2 static __m256i key(__m256i v) {  // NaN ranks as Inf
    return _mm256_min_epi32(_mm256_and_si256(v, splat(kLaneAbs<T>)), splat(kInfKey<T>));
  }
  DCT_AVX2 static __m256i load(const float* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  template <typename H>
  DCT_AVX2 static __m256i load(const H* p) {
    return _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  DCT_AVX2 static void transpose(__m256i* r) {
    __m256i t[8], u[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i += 4) {
      u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
      u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
      u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
      u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 4; i++) {
      r[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
      r[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
    }
  }
  // Bits of 32 columns whose key is above `below`.
  DCT_AVX2 static uint32_t above(const float* p, int64_t below) {
    const __m256i abs = splat(0x7fffffff), b = splat(below);
    __m256i g[4];
#pragma GCC unroll 8
    for (int i = 0; i < 4; i++) g[i] = _mm256_cmpgt_epi32(_mm256_and_si256(load(p + 8 * i), abs), b);
    return bits32Avx2(g);
  }
  template <typename H>
  DCT_AVX2 static uint32_t above(const H* p, int64_t below) {
    const __m256i abs = _mm256_set1_epi16(0x7fff), b = _mm256_set1_epi16(static_cast<int16_t>(below));
    const __m256i* q = reinterpret_cast<const __m256i*>(p);
    return bits16Avx2(_mm256_cmpgt_epi16(_mm256_and_si256(_mm256_loadu_si256(q), abs), b),
                      _mm256_cmpgt_epi16(_mm256_and_si256(_mm256_loadu_si256(q + 1), abs), b));
  }
};

// Lanes of 64-bit keys: fp64.
struct Avx2Keys64 {
  static constexpr size_t kLanes = 4;
  static constexpr size_t kMaxK = 32;
  DCT_AVX2 static __m256i splat(int64_t x) { return _mm256_set1_epi64x(x); }
  DCT_AVX2 static __m256i equal(__m256i a, __m256i b) { return _mm256_cmpeq_epi64(a, b); }
  DCT_AVX2 static __m256i minus(__m256i a, __m256i b) { return _mm256_sub_epi64(a, b); }
  DCT_AVX2 static void order(__m256i& hi, __m256i& lo) {  // as Avx2Keys32's, by compare and xor
    const __m256i swap = _mm256_and_si256(_mm256_xor_si256(hi, lo), _mm256_cmpgt_epi64(lo, hi));
    hi = _mm256_xor_si256(hi, swap);
    lo = _mm256_xor_si256(lo, swap);
  }
  template <typename T>
  DCT_AVX2 static __m256i key(__m256i v) {
    const __m256i a = _mm256_and_si256(v, splat(0x7fffffffffffffffll)), inf = splat(kInfKey<double>);
    return _mm256_xor_si256(a, _mm256_and_si256(_mm256_xor_si256(a, inf), _mm256_cmpgt_epi64(a, inf)));
  }
  DCT_AVX2 static __m256i load(const double* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  DCT_AVX2 static void transpose(__m256i* r) {
    const __m256i t0 = _mm256_unpacklo_epi64(r[0], r[1]), t1 = _mm256_unpackhi_epi64(r[0], r[1]);
    const __m256i t2 = _mm256_unpacklo_epi64(r[2], r[3]), t3 = _mm256_unpackhi_epi64(r[2], r[3]);
    r[0] = _mm256_permute2x128_si256(t0, t2, 0x20);
    r[1] = _mm256_permute2x128_si256(t1, t3, 0x20);
    r[2] = _mm256_permute2x128_si256(t0, t2, 0x31);
    r[3] = _mm256_permute2x128_si256(t1, t3, 0x31);
  }
  DCT_AVX2 static uint32_t above(const double* p, int64_t below) {
    const __m256i abs = splat(0x7fffffffffffffffll), b = splat(below);
    uint32_t bits = 0;
#pragma GCC unroll 8
    for (int q = 0; q < 8; q++) {
      const __m256i g = _mm256_cmpgt_epi64(_mm256_and_si256(load(p + 4 * q), abs), b);
      bits |= static_cast<uint32_t>(_mm256_movemask_pd(_mm256_castsi256_pd(g))) << (4 * q);
    }
    return bits;
  }
};

template <typename Keys, typename T>
DCT_AVX2 void columnKeysAvx2(const T* const* p, size_t c, size_t n, __m256i* cols, const char* next) {
  constexpr size_t L = Keys::kLanes;
  size_t j = 0;
  for (; j + L <= n; j += L) {
    if (next) prefetchBlock<L * L * sizeof(T)>(next, (c + j) / L);
    __m256i r[L];
#pragma GCC unroll 8
    for (size_t l = 0; l < L; l++) r[l] = Keys::load(p[l] + c + j);
    Keys::transpose(r);
#pragma GCC unroll 8
    for (size_t i = 0; i < L; i++) cols[j + i] = Keys::template key<T>(r[i]);
  }
  if (j < n) {
    T tail[L][L] = {};
    __m256i r[L];
#pragma GCC unroll 8
    for (size_t l = 0; l < L; l++) {
      std::memcpy(tail[l], p[l] + c + j, (n - j) * sizeof(T));
      r[l] = Keys::load(tail[l]);
    }
    Keys::transpose(r);
    for (size_t i = 0; i < n - j; i++) cols[j + i] = Keys::template key<T>(r[i]);
  }
}

// networkSse2 in AVX2 (row_topk_sse2.h).
template <typename Keys, bool kMore, size_t... I>
DCT_AVX2 void passAvx2(__m256i* cols, size_t n, __m256i* best, std::index_sequence<I...>) {
  __m256i b[] = {best[I]...};
  for (size_t j = 0; j < n; j++) {
    __m256i x = cols[j];
    (Keys::order(b[I], x), ...);
    if constexpr (kMore) cols[j] = x;
  }
  ((best[I] = b[I]), ...);
}

template <typename Keys, size_t K>
DCT_AVX2 void networkAvx2(__m256i* cols, size_t n, __m256i* best) {
  constexpr size_t kPasses = (K + kLaneStages - 1) / kLaneStages, kFirst = (K + kPasses - 1) / kPasses;
  passAvx2<Keys, (K > kFirst)>(cols, n, best, std::make_index_sequence<kFirst>());
  if constexpr (K > kFirst) networkAvx2<Keys, K - kFirst>(cols, n, best + kFirst);
}

using NetworkAvx2 = void (*)(__m256i*, size_t, __m256i*);
template <typename Keys, typename Seq> struct NetworksAvx2;
template <typename Keys, size_t... K>
struct NetworksAvx2<Keys, std::index_sequence<K...>> {
  static constexpr NetworkAvx2 of[] = {&networkAvx2<Keys, K + 1>...};  // [k - 1]
};

// The columns whose key is above `below`.
template <typename Keys>
struct AboveAvx2 {
  int64_t below;
  template <typename T>
  DCT_AVX2 uint32_t operator()(const T* q, uint32_t keep) const { return Keys::above(q, below) & keep; }
};

template <typename T>
using Avx2Keys = std::conditional_t<sizeof(T) == 8, Avx2Keys64, Avx2Keys32>;

template <typename T>
DCT_AVX2 size_t topKRowsAvx2(const T* rows, size_t n, size_t d, size_t k, uint32_t* mask, uint32_t* counts) {
  using Keys = Avx2Keys<T>;
  using Lane = std::conditional_t<sizeof(T) == 8, int64_t, int32_t>;
  constexpr size_t L = Keys::kLanes;
  const NetworkAvx2 network = NetworksAvx2<Keys, std::make_index_sequence<Keys::kMaxK>>::of[k - 1];
  const __m256i inf = Keys::splat(kInfKey<T>);
  __m256i best[Keys::kMaxK], cols[kLaneColumns];
  size_t nonFinite = 0;
  for (size_t g = 0; g < n; g += L) {
    const size_t lanes = std::min(L, n - g);
    const T* p[L];
    for (size_t l = 0; l < L; l++) p[l] = rows + (g + std::min(l, lanes - 1)) * d;  // spare lanes: the last row again
    for (size_t i = 0; i < k; i++) best[i] = Keys::splat(-1);  // below every key
    for (size_t c = 0; c < d; c += kLaneColumns) {
      const size_t m = std::min(kLaneColumns, d - c);
      columnKeysAvx2<Keys>(p, c, m, cols, prefetchFrom<L>(rows, g + L, n, d));
      network(cols, m, best);
    }
    __m256i nfTop = _mm256_setzero_si256();
    for (size_t i = 0; i < k; i++) nfTop = Keys::minus(nfTop, Keys::equal(best[i], inf));
    alignas(32) Lane kth[L], nf[L];
    _mm256_store_si256(reinterpret_cast<__m256i*>(kth), best[k - 1]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(nf), nfTop);
    for (size_t l = 0; l < lanes; l++) {
      const auto key = static_cast<RowKey<T>>(kth[l]);
      AboveAvx2<Keys> atLeastKth{static_cast<int64_t>(key) - 1};
      uint32_t* words = mask + (g + l) * maskWords(d);
      const size_t atLeast = rowWordsAvx2(p[l], d, words, atLeastKth);
      nonFinite += finishRow(p[l], d, k, key, static_cast<size_t>(nf[l]), atLeast, words, counts[g + l]);
    }
  }
  return nonFinite;
}

}  // namespace dct
#endif
