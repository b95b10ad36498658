// The row wire kernels for rows of up to kWarpRowMax entries: one warp per
// row (cuda_rows_warp.cuh). Lane l holds mask word l, a warp scan of their
// popcounts places each word's kept entries, and word i is broadcast to
// the lanes for tile i (columns 32 i .. 32 i + 31): each kept value goes
// to its place, a row's columns are read or written in coalesced tiles.
// Rules and layouts are cuda_rows.cu's (the CPU twin's).
#pragma once

#include "cuda_rows_warp.cuh"
#include "cuda_values.cuh"
#include "kernels/row_args.h"
#include "kernels/row_wire.h"

namespace dct::gpu::rows {

template <typename To, typename From>
__device__ __forceinline__ To wireValueOf(From x) {
  if constexpr (::cuda::std::is_same_v<To, From>) return x;
  else return storeValue<To>(loadValue(x));
}

// Lane l's mask word of the row (zero past it) and the kept entries before it.
struct LaneWord {
  uint32_t word, before;
};
__device__ __forceinline__ LaneWord laneWord(const uint32_t* words, size_t W, WordScan::TempStorage& scan) {
  const unsigned lane = laneId();
  const uint32_t word = lane < W ? words[lane] : 0u;
  return {word, keptBefore(scan, word)};
}

// The whole row is read up front, with the mask words: one round of loads
// per row, where reading each word's kept entries after its store would
// wait on memory once per word (the stores may alias the row).
template <typename T, typename W, int ITEMS>
__global__ void __launch_bounds__(kRowWarpThreads) packWarpRows(RowWireArgs a) {
  __shared__ WordScan::TempStorage scan[kRowWarps];
  const unsigned lane = laneId(), warp = threadIdx.x / 32;
  const size_t D = a.rowLength, wordsPerRow = dct::maskWords(D), bitmapBytes = dct::bitmapBytes(D);
  const T* in = static_cast<const T*>(a.rows);
  W* values = static_cast<W*>(a.values);
  DCT_WARP_STRIDE(r, a.rowCount) {
    const size_t at = a.offsets[r] - a.base;
    const T* row = in + r * D;
    T x[ITEMS];
    #pragma unroll
    for (int i = 0; i < ITEMS; i++) {
      const size_t j = static_cast<size_t>(i) * 32 + lane;
      x[i] = j < D ? row[j] : T{};
    }
    if (a.mask == nullptr) {  // uniform across the warp
      #pragma unroll
      for (int i = 0; i < ITEMS; i++) {
        const size_t j = static_cast<size_t>(i) * 32 + lane;
        if (j < D) values[at + j] = wireValueOf<W>(x[i]);
      }
    } else {
      const uint32_t* words = a.mask + r * wordsPerRow;
      if (a.maskFormat == 0) {  // the words' bytes, little-endian (the CPU twin's memcpy)
        uint8_t* out = static_cast<uint8_t*>(a.wireMask) + r * bitmapBytes;
        for (size_t b = lane; b < bitmapBytes; b += 32)
          out[b] = static_cast<uint8_t>(words[b / 4] >> (8 * (b % 4)));
      }
      const LaneWord mine = laneWord(words, wordsPerRow, scan[warp]);
      #pragma unroll
      for (int i = 0; i < ITEMS; i++) {  // tiles past the row have j >= D
        const uint32_t word = __shfl_sync(kFullWarp, mine.word, i);
        const uint32_t before = __shfl_sync(kFullWarp, mine.before, i);
        const size_t j = static_cast<size_t>(i) * 32 + lane;
        if (j < D && (word >> lane) & 1u) {
          const size_t m = at + before + __popc(word & ((1u << lane) - 1u));
          if (a.maskFormat > 0) writeWidth(a.wireMask, m, a.maskFormat, static_cast<uint32_t>(j));
          values[m] = wireValueOf<W>(x[i]);
        }
      }
      __syncwarp();  // scan[warp] is reused by the next row
    }
    // Last: a store waiting on offsets[r + 1] would hold back the loads after it.
    if (a.wireCounts && lane == 0)
      writeWidth(a.wireCounts, r, a.countBytes, static_cast<uint32_t>(a.offsets[r + 1] - a.offsets[r]));
  }
}

// Wire mask -> a.mask; counts the malformed rows (their words unspecified).
// Index lists set their bits in the warp's shared words first.
__global__ void __launch_bounds__(kRowWarpThreads) decodeWarpRows(RowWireArgs a, unsigned long long* malformed) {
  __shared__ uint32_t rowWords[kRowWarps][32];
  const unsigned lane = laneId(), warp = threadIdx.x / 32;
  const size_t D = a.rowLength, W = dct::maskWords(D), bitmapBytes = dct::bitmapBytes(D);
  unsigned long long bad = 0;  // lane 0's
  DCT_WARP_STRIDE(r, a.rowCount) {
    uint32_t* words = a.mask + r * W;
    const uint64_t count = a.offsets[r + 1] - a.offsets[r];
    bool wrong;
    if (a.maskFormat == 0) {
      const uint8_t* in = static_cast<const uint8_t*>(a.wireMask) + r * bitmapBytes;
      uint32_t word = 0;
      if (lane < W) {
        for (size_t b = 4 * size_t(lane); b < 4 * size_t(lane) + 4 && b < bitmapBytes; b++)
          word |= uint32_t(in[b]) << (8 * (b % 4));
        words[lane] = word;
      }
      uint32_t bits = __popc(word);
      for (int o = 16; o > 0; o /= 2) bits += __shfl_xor_sync(kFullWarp, bits, o);
      const bool tailClear = D % 8 == 0 || (in[D / 8] >> (D % 8)) == 0;
      wrong = !tailClear || bits != count;
    } else {
      const size_t at = a.offsets[r] - a.base;
      rowWords[warp][lane] = 0;
      __syncwarp();  // the zeros land before any bit is set
      // More than D entries cannot be strictly ascending below D: rejected
      // without reading them (the CPU twin stops at the first bad one).
      bool mine = count > D;
      for (size_t m = lane; !mine && m < count; m += 32) {
        const uint64_t j = readWidth(a.wireMask, at + m, a.maskFormat);
        if (j >= D || (m > 0 && j <= readWidth(a.wireMask, at + m - 1, a.maskFormat))) mine = true;
        else atomicOr(&rowWords[warp][j / 32], 1u << (j % 32));
      }
      wrong = __any_sync(kFullWarp, mine);
      __syncwarp();  // every bit is set before the words are read
      if (lane < W) words[lane] = rowWords[warp][lane];
      __syncwarp();  // read before the next row zeroes them
    }
    if (lane == 0) bad += wrong;
  }
  if (lane == 0 && bad) atomicAdd(malformed, bad);
}

// Dense rows from the values: whole rows (null mask), else zeros off the
// mask and the row's values in column order on it. Every value of the row
// is loaded before any entry is stored (as in packWarpRows: one wait on
// memory per row, not one per mask word).
template <typename T, typename W, int ITEMS>
__global__ void __launch_bounds__(kRowWarpThreads) expandWarpRows(RowWireArgs a) {
  __shared__ WordScan::TempStorage scan[kRowWarps];
  const unsigned lane = laneId(), warp = threadIdx.x / 32;
  const size_t D = a.rowLength, wordsPerRow = dct::maskWords(D);
  T* out = static_cast<T*>(a.rows);
  const W* values = static_cast<const W*>(a.values);
  DCT_WARP_STRIDE(r, a.rowCount) {
    const size_t at = a.offsets[r] - a.base;
    T* row = out + r * D;
    if (a.mask == nullptr) {
      for (size_t j = lane; j < D; j += 32) row[j] = wireValueOf<T>(values[at + j]);
      continue;
    }
    const LaneWord mine = laneWord(a.mask + r * wordsPerRow, wordsPerRow, scan[warp]);
    T x[ITEMS];
    #pragma unroll
    for (int i = 0; i < ITEMS; i++) {  // tiles past the row have j >= D
      const uint32_t word = __shfl_sync(kFullWarp, mine.word, i);
      const uint32_t before = __shfl_sync(kFullWarp, mine.before, i);
      const size_t j = static_cast<size_t>(i) * 32 + lane;
      const bool kept = j < D && ((word >> lane) & 1u);
      x[i] = kept ? wireValueOf<T>(values[at + before + __popc(word & ((1u << lane) - 1u))])
                  : T{};  // all-zero bits: +0 in every type
    }
    #pragma unroll
    for (int i = 0; i < ITEMS; i++) {
      const size_t j = static_cast<size_t>(i) * 32 + lane;
      if (j < D) row[j] = x[i];
    }
    __syncwarp();  // scan[warp] is reused by the next row
  }
}

}  // namespace dct::gpu::rows
