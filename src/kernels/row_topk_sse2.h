// SSE2 body of the DCT-MP per-row top-K (the x86-64 baseline; AVX2 in
// row_topk_avx2.h where the CPU has it), for fp32/fp16/bf16 and k up to
// kSse2MaxK. Same masks, counts and non-finite totals as the plain body
// (row_select_scalar.h), bit for bit.
//  * Four rows at once, one per 32-bit lane (fp16/bf16 keys zero-extended).
//    Each column's keys of the four rows (4x4 transposes) pass an insertion
//    network of k registers (max stays, min moves on), which leaves every
//    lane's k largest keys: the k-th decides the row's cut.
//  * Then each row alone: compares and movemasks mark the columns at or
//    above the k-th largest key, which are the answer when they are exactly
//    k; ties there, or more than k non-finite, go to the plain finish.
//  * SSE2 has no 32-bit max: compare, then swap with xor (keys are below
//    2^31, so signed compares order them).
#pragma once

#include <utility>

#include "kernels/row_lanes.h"
#include "kernels/row_select_scalar.h"

#if DCT_ROW_SIMD
namespace dct {

// Largest k of this body: past it the network (2k operations per column)
// lost to the plain body's nth_element.
constexpr size_t kSse2MaxK = 32;

inline __m128i lanes4Sse2(const float* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
template <typename H>  // fp16, bf16: zero-extended
inline __m128i lanes4Sse2(const H* p) {
  return _mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), _mm_setzero_si128());
}

inline void transpose4Sse2(__m128i* r) {
  const __m128i t0 = _mm_unpacklo_epi32(r[0], r[1]), t1 = _mm_unpackhi_epi32(r[0], r[1]);
  const __m128i t2 = _mm_unpacklo_epi32(r[2], r[3]), t3 = _mm_unpackhi_epi32(r[2], r[3]);
  r[0] = _mm_unpacklo_epi64(t0, t2);
  r[1] = _mm_unpackhi_epi64(t0, t2);
  r[2] = _mm_unpacklo_epi64(t1, t3);
  r[3] = _mm_unpackhi_epi64(t1, t3);
}

// Keys of columns [c, c + n) of the rows p[0..3], one column per vector.
template <typename T>
void columnKeysSse2(const T* const* p, size_t c, size_t n, __m128i* cols, const char* next) {
  const __m128i abs = _mm_set1_epi32(kLaneAbs<T>), inf = _mm_set1_epi32(kInfKey<T>);
  auto keys = [&](__m128i* r, size_t j, size_t m) {
    transpose4Sse2(r);
#pragma GCC unroll 8
    for (size_t i = 0; i < m; i++) {
      const __m128i a = _mm_and_si128(r[i], abs);  // then min(a, Inf): NaN ranks as Inf
      cols[j + i] = _mm_xor_si128(a, _mm_and_si128(_mm_xor_si128(a, inf), _mm_cmpgt_epi32(a, inf)));
    }
  };
  size_t j = 0;
  for (; j + 4 <= n; j += 4) {
    if (next) prefetchBlock<16 * sizeof(T)>(next, (c + j) / 4);
    __m128i r[4];
#pragma GCC unroll 8
    for (size_t l = 0; l < 4; l++) r[l] = lanes4Sse2(p[l] + c + j);
    keys(r, j, 4);
  }
  if (j < n) {
    T tail[4][4] = {};
    __m128i r[4];
#pragma GCC unroll 8
    for (size_t l = 0; l < 4; l++) {
      std::memcpy(tail[l], p[l] + c + j, (n - j) * sizeof(T));
      r[l] = lanes4Sse2(tail[l]);
    }
    keys(r, j, n - j);
  }
}

// One pass of the network: every column of cols through stages
// best[I...] (the descending run of each lane), the runs in registers (so
// the stages are compile-time indices); with kMore, what falls out of the
// last stage replaces the column, for the next pass.
template <bool kMore, size_t... I>
void passSse2(__m128i* cols, size_t n, __m128i* best, std::index_sequence<I...>) {
  __m128i b[] = {best[I]...};
  for (size_t j = 0; j < n; j++) {
    __m128i x = cols[j];
    auto order = [&x](__m128i& hi) {  // hi keeps the larger, x moves on with the smaller
      const __m128i swap = _mm_and_si128(_mm_xor_si128(x, hi), _mm_cmpgt_epi32(x, hi));
      hi = _mm_xor_si128(hi, swap);
      x = _mm_xor_si128(x, swap);
    };
    (order(b[I]), ...);
    if constexpr (kMore) cols[j] = x;
  }
  ((best[I] = b[I]), ...);
}

// The k-th largest keys' network: passes of at most kLaneStages stages
// (more spill registers), of even size.
template <size_t K>
void networkSse2(__m128i* cols, size_t n, __m128i* best) {
  constexpr size_t kPasses = (K + kLaneStages - 1) / kLaneStages, kFirst = (K + kPasses - 1) / kPasses;
  passSse2<(K > kFirst)>(cols, n, best, std::make_index_sequence<kFirst>());
  if constexpr (K > kFirst) networkSse2<K - kFirst>(cols, n, best + kFirst);
}

using NetworkSse2 = void (*)(__m128i*, size_t, __m128i*);
template <typename Seq> struct NetworksSse2;
template <size_t... K>
struct NetworksSse2<std::index_sequence<K...>> {
  static constexpr NetworkSse2 of[] = {&networkSse2<K + 1>...};  // [k - 1]
};

// Bits of 32 columns whose key is above `below` (the k-th largest - 1).
inline uint32_t atLeastBitsSse2(const float* p, __m128i below) {
  const __m128i abs = _mm_set1_epi32(0x7fffffff);
  uint32_t bits = 0;
#pragma GCC unroll 8
  for (int h = 0; h < 2; h++) {
    __m128i g[4];
#pragma GCC unroll 8
    for (int i = 0; i < 4; i++)
      g[i] = _mm_cmpgt_epi32(_mm_and_si128(lanes4Sse2(p + 16 * h + 4 * i), abs), below);
    const __m128i bytes = _mm_packs_epi16(_mm_packs_epi32(g[0], g[1]), _mm_packs_epi32(g[2], g[3]));
    bits |= static_cast<uint32_t>(_mm_movemask_epi8(bytes)) << (16 * h);
  }
  return bits;
}
template <typename H>  // fp16, bf16: 16-bit lanes
inline uint32_t atLeastBitsSse2(const H* p, __m128i below) {
  const __m128i abs = _mm_set1_epi16(0x7fff);
  uint32_t bits = 0;
#pragma GCC unroll 8
  for (int h = 0; h < 2; h++) {
    const __m128i* q = reinterpret_cast<const __m128i*>(p + 16 * h);
    const __m128i g0 = _mm_cmpgt_epi16(_mm_and_si128(_mm_loadu_si128(q), abs), below);
    const __m128i g1 = _mm_cmpgt_epi16(_mm_and_si128(_mm_loadu_si128(q + 1), abs), below);
    bits |= static_cast<uint32_t>(_mm_movemask_epi8(_mm_packs_epi16(g0, g1))) << (16 * h);
  }
  return bits;
}

template <typename T>
size_t topKRowsSse2(const T* rows, size_t n, size_t d, size_t k, uint32_t* mask, uint32_t* counts) {
  static_assert(sizeof(T) <= 4, "fp64 has no 64-bit compare in SSE2: the plain body");
  const NetworkSse2 network = NetworksSse2<std::make_index_sequence<kSse2MaxK>>::of[k - 1];
  const __m128i inf = _mm_set1_epi32(kInfKey<T>);
  __m128i best[kSse2MaxK], cols[kLaneColumns];
  size_t nonFinite = 0;
  for (size_t g = 0; g < n; g += 4) {
    const size_t lanes = std::min<size_t>(4, n - g);
    const T* p[4];
    for (size_t l = 0; l < 4; l++) p[l] = rows + (g + std::min(l, lanes - 1)) * d;  // spare lanes: the last row again
    for (size_t i = 0; i < k; i++) best[i] = _mm_set1_epi32(-1);  // below every key
    for (size_t c = 0; c < d; c += kLaneColumns) {
      const size_t m = std::min(kLaneColumns, d - c);
      columnKeysSse2(p, c, m, cols, prefetchFrom<4>(rows, g + 4, n, d));
      network(cols, m, best);
    }
    __m128i nfTop = _mm_setzero_si128();
    for (size_t i = 0; i < k; i++) nfTop = _mm_sub_epi32(nfTop, _mm_cmpeq_epi32(best[i], inf));
    alignas(16) int32_t kth[4], nf[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(kth), best[k - 1]);
    _mm_store_si128(reinterpret_cast<__m128i*>(nf), nfTop);
    for (size_t l = 0; l < lanes; l++) {
      const auto key = static_cast<RowKey<T>>(kth[l]);
      const int32_t below = static_cast<int32_t>(key) - 1;
      const __m128i belowV = sizeof(T) == 4 ? _mm_set1_epi32(below) : _mm_set1_epi16(static_cast<int16_t>(below));
      uint32_t* words = mask + (g + l) * maskWords(d);
      const size_t atLeast =
          rowWords(p[l], d, words, [&](const T* q, uint32_t keep) { return atLeastBitsSse2(q, belowV) & keep; });
      nonFinite += finishRow(p[l], d, k, key, static_cast<size_t>(nf[l]), atLeast, words, counts[g + l]);
    }
  }
  return nonFinite;
}

}  // namespace dct
#endif
