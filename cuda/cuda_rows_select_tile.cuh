// The top-K row selection for fp32 rows of 32 < D <= kTileRowMax entries
// and k <= kTileTopMax: one thread per row, top-K from row_thread_select.h
// (the code the unit tests run on the host). A warp takes tiles of 32
// consecutive rows: it copies the tile (contiguous in memory) into shared
// memory with coalesced asynchronous copies, then each lane runs its row
// from there, twice, without touching global memory again. The tile's row
// stride is odd, so the lanes reading one column hit 32 different banks.
// One warp per block: the tile is the block's whole shared memory, so the
// occupancy follows D alone.
#pragma once

#include <cuda_pipeline.h>

#include "cuda_rows_warp.cuh"
#include "kernels/row_keys.h"
#include "kernels/row_thread_select.h"

namespace dct::gpu::rows {

// Measured on an H200 (bench/results/2026-11-29-device-h200): at D = 64
// and 128 (k <= 8) the tile beats the warp per row, at 192 and 256 (k of
// 10 and 13: a 16-key list, and a tile of 33 KB that leaves six warps on a
// multiprocessor) it loses to it.
constexpr size_t kTileRowMax = 128;
constexpr size_t kTileTopMax = 8;

__host__ __device__ inline uint32_t tileStride(uint32_t D) { return D | 1u; }
inline size_t tileBytes(size_t D) { return 32 * size_t{tileStride(static_cast<uint32_t>(D))} * sizeof(float); }

// Blocks of one warp: enough for every tile, capped like warpRowGrid.
inline unsigned tileGrid(size_t rows) {
  const size_t tiles = (rows + 31) / 32;
  return static_cast<unsigned>(tiles < 1 ? 1 : tiles < kMaxBlocks * 8 ? tiles : kMaxBlocks * 8);
}

// fn.template operator()<KMAX>() with k <= KMAX <= kTileTopMax.
template <typename Fn>
dctResult_t dispatchTileTop(size_t k, Fn&& fn) {
  if (k <= 4) return fn.template operator()<4>();
  return fn.template operator()<8>();
}

// 1 <= k < D. Launch tileGrid(R) blocks of 32 threads, tileBytes(D) bytes
// of dynamic shared memory.
template <int KMAX>
__global__ void __launch_bounds__(32)
    selectTileRows(const float* __restrict__ in, size_t R, uint32_t D, uint32_t k, uint32_t* __restrict__ mask,
                   uint32_t* __restrict__ counts, unsigned long long* nonFiniteOut) {
  extern __shared__ float tile[];
  const uint32_t stride = tileStride(D), W = (D + 31) / 32;
  const unsigned lane = threadIdx.x;
  unsigned long long nonFinite = 0;
  for (size_t r0 = static_cast<size_t>(blockIdx.x) * 32; r0 < R; r0 += static_cast<size_t>(gridDim.x) * 32) {
    const uint32_t rows = R - r0 < 32 ? static_cast<uint32_t>(R - r0) : 32u;
    const float* src = in + r0 * D;
    // Element e of the tile lies at row e / D, column e % D; a lane's
    // elements are 32 apart and D > 32, so its column wraps at most once.
    uint32_t row = 0, col = lane;
    for (uint32_t e = lane; e < rows * D; e += 32) {
      __pipeline_memcpy_async(&tile[row * stride + col], &src[e], sizeof(float));
      col += 32;
      if (col >= D) col -= D, row++;
    }
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncwarp();
    if (lane < rows) {
      const float* mine = tile + lane * stride;
      const auto key = [&](uint32_t j) { return uint32_t(rowKey(mine[j])) + 1; };
      uint32_t nf = 0;
      counts[r0 + lane] = threadRowTopK<KMAX>(key, D, k, uint32_t(kInfKey<float>), mask + (r0 + lane) * W, &nf);
      nonFinite += nf;
    }
    __syncwarp();  // the next tile overwrites the rows
  }
  for (int o = 16; o > 0; o /= 2) nonFinite += __shfl_xor_sync(kFullWarp, nonFinite, o);
  if (lane == 0 && nonFinite) atomicAdd(nonFiniteOut, nonFinite);
}

}  // namespace dct::gpu::rows
