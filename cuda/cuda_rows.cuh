// Shared by the CUDA twin's DCT-MP row kernels for rows longer than
// kWarpRowMax (cuda_rows_select.cu, cuda_rows.cu; shorter rows run a warp
// or a thread per row, cuda_rows_warp.cuh): one block per row, looping
// over the row in tiles of THREADS columns (thread t at column tile + t),
// so any row length works. Grids loop over rows.
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "cuda_device.cuh"
#include "kernels/row_wire.h"

namespace dct::gpu::rows {

// 256-thread blocks (a 256-bin radix histogram is one bin per thread):
// fn.template operator()<256>(). Rows of up to kWarpRowMax entries never
// come here.
template <typename Fn>
dctResult_t dispatchBlock(size_t, Fn&& fn) {
  return fn.template operator()<256>();
}

// One block per row, up to this many blocks (each loops over its rows).
constexpr size_t kMaxRowBlocks = size_t(1) << 20;
inline unsigned rowGrid(size_t rows) {
  return static_cast<unsigned>(rows < kMaxRowBlocks ? (rows ? rows : 1) : kMaxRowBlocks);
}

#define DCT_ROW_LOOP(r, R) for (size_t r = blockIdx.x; r < (R); r += gridDim.x)

__device__ __forceinline__ bool maskBit(const uint32_t* words, size_t j) {
  return (words[j / 32] >> (j % 32)) & 1u;
}

template <int THREADS>
using RowScan = cub::BlockScan<uint32_t, THREADS>;
template <int THREADS>
using RowSum = cub::BlockReduce<unsigned long long, THREADS>;

// Walks one row in column order: flag(j) (called for j < D only) marks the
// columns of interest; visit(j, flagged, rank) runs on every thread of every
// tile (j may be >= D there, so warp ballots are allowed), rank being the
// number of flagged columns before j in the row. Returns the flagged total.
// Every thread of the block must call it; it ends synchronized.
template <int THREADS, typename Flag, typename Visit>
__device__ __forceinline__ size_t scanRow(typename RowScan<THREADS>::TempStorage& storage, size_t D, Flag flag,
                                          Visit visit) {
  size_t carry = 0;
  for (size_t tile = 0; tile < D; tile += THREADS) {
    const size_t j = tile + threadIdx.x;
    const uint32_t f = j < D && flag(j);
    uint32_t rank = 0, total = 0;
    RowScan<THREADS>(storage).ExclusiveSum(f, rank, total);
    visit(j, f != 0, carry + rank);
    carry += total;
    __syncthreads();  // storage reused by the next tile
  }
  return carry;
}

// Adds each thread's `mine` to *counter, one atomic per block. Every thread
// must call it (it synchronizes).
template <int THREADS>
__device__ __forceinline__ void addRowCount(typename RowSum<THREADS>::TempStorage& storage, unsigned long long mine,
                                            unsigned long long* counter) {
  const unsigned long long total = RowSum<THREADS>(storage).Sum(mine);
  if (threadIdx.x == 0 && total) atomicAdd(counter, total);
  __syncthreads();
}

}  // namespace dct::gpu::rows
