// Pieces the vector bodies of the DCT-MP row selection share
// (row_topk_sse2.h, row_topk_avx2.h, row_threshold_simd.h): their sizes,
// the prefetch of the rows ahead, and a row's mask words from blocks of 32
// columns. The AVX2 functions carry DCT_AVX2 and run only where
// cpuHasAvx2(); lambdas would not inherit the target, so their ops are
// structs.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/row_keys.h"

#if defined(__SSE2__)
#include <immintrin.h>
#define DCT_ROW_SIMD 1
#define DCT_AVX2 __attribute__((target("avx2,popcnt")))

namespace dct {

// Columns per pass of the top-K network: their keys stay in L1.
constexpr size_t kLaneColumns = 256;
// Stages per pass of the network: 16 vector registers hold ten runs, x and
// a temporary; an eleventh spilled, and each stage then took twice as long.
constexpr size_t kLaneStages = 10;

// A row's magnitude bits as a 32-bit lane.
template <typename T>
constexpr int32_t kLaneAbs = static_cast<int32_t>((uint32_t(1) << (8 * sizeof(T) - 1)) - 1);

// A group's rows, read a block of columns at a time, are as many streams
// as lanes, which the hardware prefetchers follow poorly. So each block
// prefetches its share of the group about 8 KiB ahead, in address order,
// into L2 (into L1 it crowded out the rows in use). The evidence is in
// bench/results/2026-11-26-row-select.
template <size_t kLanes, typename T>
const char* prefetchFrom(const T* rows, size_t next, size_t n, size_t d) {
  const size_t groupBytes = kLanes * d * sizeof(T), groups = std::max<size_t>(1, 8192 / groupBytes);
  const size_t from = next + (groups - 1) * kLanes;
  return from < n ? reinterpret_cast<const char*>(rows + from * d) : nullptr;
}
// Block b's share of a group: `kBytes` (one block's bytes) from b * kBytes.
template <size_t kBytes>
inline void prefetchBlock(const char* group, size_t b) {
  for (size_t at = 0; at < kBytes; at += 64) _mm_prefetch(group + b * kBytes + at, _MM_HINT_T1);
}

// A row's mask words from bitsOf(q, keep), the bits of the 32 columns at q
// and-ed with keep: the last word reads a zero-padded copy and keeps only
// the columns below d. Returns the bits set.
template <typename T, typename BitsOf>
size_t rowWords(const T* row, size_t d, uint32_t* mask, BitsOf&& bitsOf) {
  size_t kept = 0, w = 0;
  for (; 32 * (w + 1) <= d; w++) kept += std::popcount(mask[w] = bitsOf(row + 32 * w, ~0u));
  if (const size_t rest = d - 32 * w) {
    T tail[32] = {};
    std::memcpy(tail, row + 32 * w, rest * sizeof(T));
    kept += std::popcount(mask[w] = bitsOf(tail, (uint32_t(1) << rest) - 1));
  }
  return kept;
}

// rowWords for AVX2 ops (structs with a DCT_AVX2 operator()).
template <typename T, typename Op>
DCT_AVX2 size_t rowWordsAvx2(const T* row, size_t d, uint32_t* mask, Op& op) {
  size_t kept = 0, w = 0;
  for (; 32 * (w + 1) <= d; w++) kept += std::popcount(mask[w] = op(row + 32 * w, ~0u));
  if (const size_t rest = d - 32 * w) {
    T tail[32] = {};
    std::memcpy(tail, row + 32 * w, rest * sizeof(T));
    kept += std::popcount(mask[w] = op(tail, (uint32_t(1) << rest) - 1));
  }
  return kept;
}

// The bits of four 32-bit lane masks, in order.
DCT_AVX2 inline uint32_t bits32Avx2(const __m256i* g) {
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(g[0], g[1]), _mm256_packs_epi32(g[2], g[3]));
  return static_cast<uint32_t>(
      _mm256_movemask_epi8(_mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))));
}
// The bits of two 16-bit lane masks, in order.
DCT_AVX2 inline uint32_t bits16Avx2(__m256i g0, __m256i g1) {
  return static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_permute4x64_epi64(_mm256_packs_epi16(g0, g1), 0xd8)));
}

}  // namespace dct
#else
#define DCT_ROW_SIMD 0
#endif
