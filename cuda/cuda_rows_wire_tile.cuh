// The row wire kernels for masked rows of up to kLaneWireMax entries: one
// thread per row. A row this short holds a few kept entries, which a warp
// per row (the scan, the shuffles, the ballots of cuda_rows_wire_warp.cuh)
// spends more instructions placing than the row has bytes.
//   packLaneRows     walks its row's mask bits: reads only the kept values
//                    and writes them, with their indices or bitmap bytes
//   decodeLaneRows   a row's wire mask into its mask words, in registers;
//                    counts the malformed rows (cuda_rows.cu's rules)
//   expandTileRows   a warp zeroes a tile of 32 consecutive rows in shared
//                    memory, each lane writes its row's kept values there,
//                    and the warp copies the tile out (the rows are
//                    contiguous): coalesced stores, whatever the mask
#pragma once

#include "cuda_rows_select_tile.cuh"
#include "cuda_rows_wire_warp.cuh"

namespace dct::gpu::rows {

// Measured on an H200 (bench/results/2026-11-29-device-h200): a thread per
// row packs and unpacks faster than a warp per row up to D = 192; at 256
// the warp's coalesced row reads catch up (pack of 2^26 entries: 150 us
// against 125).
constexpr size_t kLaneWireMax = 192;
constexpr int kTileWords = static_cast<int>((kLaneWireMax + 31) / 32);

// The expand's tile: 32 rows of D values of `bytes` each, within the 48 KB
// a block gets without opting in (fp64 rows past 192 entries take a warp).
inline size_t expandTileBytes(size_t D, size_t bytes) { return 32 * D * bytes; }
inline bool expandTileFits(size_t D, size_t bytes) { return expandTileBytes(D, bytes) <= 48 * 1024; }

// Sets bit j of the row's words w (an unrolled select: no register index).
__device__ __forceinline__ void setBit(uint32_t (&w)[kTileWords], uint32_t j) {
  DCT_UNROLL
  for (int q = 0; q < kTileWords; q++) w[q] |= j / 32 == static_cast<uint32_t>(q) ? 1u << (j % 32) : 0u;
}

// Masked rows of D <= kLaneWireMax -> the wire (cuda_rows.cu's layouts);
// launch gridFor(R) blocks of kThreads.
template <typename T, typename W>
__global__ void __launch_bounds__(kThreads) packLaneRows(RowWireArgs a) {
  const uint32_t D = static_cast<uint32_t>(a.rowLength), words = (D + 31) / 32, bytes = (D + 7) / 8;
  const T* in = static_cast<const T*>(a.rows);
  W* values = static_cast<W*>(a.values);
  DCT_GRID_STRIDE(r, a.rowCount) {
    const uint32_t* mask = a.mask + r * words;
    const T* row = in + r * D;
    uint8_t* bitmap = a.maskFormat == 0 ? static_cast<uint8_t*>(a.wireMask) + r * bytes : nullptr;
    size_t m = a.offsets[r] - a.base;
    for (uint32_t q = 0; q < words; q++) {
      const uint32_t word = mask[q];
      if (bitmap)  // the words' bytes, little-endian (the CPU twin's memcpy)
        for (uint32_t b = 4 * q; b < 4 * q + 4 && b < bytes; b++)
          bitmap[b] = static_cast<uint8_t>(word >> (8 * (b % 4)));
      for (uint32_t bits = word; bits != 0; bits &= bits - 1) {
        const uint32_t j = 32 * q + __ffs(bits) - 1;
        if (j >= D) break;  // ascending: the rest are past the row too
        if (a.maskFormat > 0) writeWidth(a.wireMask, m, a.maskFormat, j);
        values[m++] = wireValueOf<W>(row[j]);
      }
    }
    if (a.wireCounts)
      writeWidth(a.wireCounts, r, a.countBytes, static_cast<uint32_t>(a.offsets[r + 1] - a.offsets[r]));
  }
}

// Wire mask -> a.mask, rows of D <= kLaneWireMax; launch gridFor(R) blocks
// of kThreads.
__global__ void __launch_bounds__(kThreads) decodeLaneRows(RowWireArgs a, unsigned long long* malformed) {
  const uint32_t D = static_cast<uint32_t>(a.rowLength), W = (D + 31) / 32, bytes = (D + 7) / 8;
  unsigned long long bad = 0;
  DCT_GRID_STRIDE(r, a.rowCount) {
    uint32_t w[kTileWords] = {};
    const uint64_t count = a.offsets[r + 1] - a.offsets[r];
    bool wrong = false;
    if (a.maskFormat == 0) {
      const uint8_t* in = static_cast<const uint8_t*>(a.wireMask) + r * bytes;
      uint32_t bits = 0;
      for (uint32_t b = 0; b < bytes; b++) {
        const uint32_t byte = in[b];
        DCT_UNROLL
        for (int q = 0; q < kTileWords; q++)
          w[q] |= b / 4 == static_cast<uint32_t>(q) ? byte << (8 * (b % 4)) : 0u;
        bits += __popc(byte);
      }
      wrong = (D % 8 != 0 && (in[D / 8] >> (D % 8)) != 0) || bits != count;
    } else {
      // More than D entries cannot be strictly ascending below D.
      wrong = count > D;
      const size_t at = a.offsets[r] - a.base;
      uint64_t last = 0;
      for (uint32_t m = 0; !wrong && m < count; m++) {
        const uint64_t j = readWidth(a.wireMask, at + m, a.maskFormat);
        wrong = j >= D || (m > 0 && j <= last);
        if (!wrong) setBit(w, static_cast<uint32_t>(j));
        last = j;
      }
    }
    uint32_t* words = a.mask + r * W;
    DCT_UNROLL
    for (int q = 0; q < kTileWords; q++)
      if (static_cast<uint32_t>(q) < W) words[q] = w[q];
    bad += wrong;
  }
  addBlockCount(bad, malformed);
}

// Dense rows from the values and a.mask (not null), rows of D <= kLaneWireMax;
// launch tileGrid(R) blocks of 32 threads and expandTileBytes(D, sizeof(T))
// bytes of dynamic shared memory.
template <typename T, typename W>
__global__ void __launch_bounds__(32) expandTileRows(RowWireArgs a) {
  extern __shared__ __align__(16) unsigned char tileMemory[];
  T* tile = reinterpret_cast<T*>(tileMemory);
  const uint32_t D = static_cast<uint32_t>(a.rowLength), words = (D + 31) / 32;
  const unsigned lane = threadIdx.x;
  T* out = static_cast<T*>(a.rows);
  const W* values = static_cast<const W*>(a.values);
  for (size_t r0 = static_cast<size_t>(blockIdx.x) * 32; r0 < a.rowCount; r0 += static_cast<size_t>(gridDim.x) * 32) {
    const uint32_t n = static_cast<uint32_t>(a.rowCount - r0 < 32 ? a.rowCount - r0 : 32) * D;
    for (uint32_t e = lane; e < n; e += 32) tile[e] = T{};  // all-zero bits: +0 in every type
    __syncwarp();
    if (lane * D < n) {
      const size_t r = r0 + lane;
      const uint32_t* mask = a.mask + r * words;
      const W* in = values + (a.offsets[r] - a.base);
      T* row = tile + lane * D;
      for (uint32_t q = 0; q < words; q++)
        for (uint32_t word = mask[q]; word != 0; word &= word - 1) {
          const uint32_t j = 32 * q + __ffs(word) - 1;
          if (j < D) row[j] = wireValueOf<T>(in[0]);  // a bit past the row: the last word's, no value after it
          in++;
        }
    }
    __syncwarp();
    T* dst = out + r0 * D;
    for (uint32_t e = lane; e < n; e += 32) dst[e] = tile[e];
    __syncwarp();  // the next tile's zeros wait for these reads
  }
}

}  // namespace dct::gpu::rows
