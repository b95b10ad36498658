// Shared by the CUDA twin's warp-per-row DCT-MP kernels
// (cuda_rows_select_warp.cuh, cuda_rows_wire_warp.cuh): rows of up to
// kWarpRowMax entries run one warp per row, kRowWarps rows per block, the
// grid looping over rows; a warp reads its row in 32-column tiles (item i
// of lane l is column 32 i + l), so loads and mask words are coalesced.
// Every loop over rows and items is warp-uniform, so the full-warp
// intrinsics below always run with all 32 lanes.
#pragma once

#include <cub/warp/warp_scan.cuh>

#include "cuda_context.cuh"
#include "cuda_device.cuh"

namespace dct::gpu::rows {

// One mask word per lane: a row's bitmap is at most 32 words.
constexpr size_t kWarpRowMax = 1024;
constexpr int kRowWarps = 8;
constexpr int kRowWarpThreads = kRowWarps * 32;
constexpr unsigned kFullWarp = 0xffffffffu;

// Enough blocks for every row, capped like gridFor (each warp loops).
inline unsigned warpRowGrid(size_t rows) {
  const size_t blocks = (rows + kRowWarps - 1) / kRowWarps;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks < kMaxBlocks * 4 ? blocks : kMaxBlocks * 4);
}

// fn.template operator()<ITEMS>() with 32 * ITEMS >= D, ITEMS a power of
// two (at least 2: rows of up to 32 entries take a thread each).
template <typename Fn>
dctResult_t dispatchItems(size_t D, Fn&& fn) {
  if (D <= 64) return fn.template operator()<2>();
  if (D <= 128) return fn.template operator()<4>();
  if (D <= 256) return fn.template operator()<8>();
  if (D <= 512) return fn.template operator()<16>();
  return fn.template operator()<32>();
}

__device__ __forceinline__ unsigned laneId() { return threadIdx.x % 32; }

// The Lanes policy of row_warp_select.h on a full warp.
struct WarpLanes {
  __device__ __forceinline__ unsigned lane() const { return laneId(); }
  __device__ __forceinline__ uint32_t lanesBelow() const { return (1u << laneId()) - 1u; }
  __device__ __forceinline__ uint32_t ballot(bool p) const { return __ballot_sync(kFullWarp, p); }
  __device__ __forceinline__ uint32_t sum(uint32_t x) const {
#if __CUDA_ARCH__ >= 800
    return __reduce_add_sync(kFullWarp, x);
#else
    for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(kFullWarp, x, o);
    return x;
#endif
  }
  __device__ __forceinline__ uint32_t max(uint32_t x) const {
#if __CUDA_ARCH__ >= 800
    return __reduce_max_sync(kFullWarp, x);
#else
    for (int o = 16; o > 0; o /= 2) x = ::max(x, __shfl_xor_sync(kFullWarp, x, o));
    return x;
#endif
  }
  __device__ __forceinline__ uint64_t max(uint64_t x) const {
    for (int o = 16; o > 0; o /= 2) {
      const uint64_t y = __shfl_xor_sync(kFullWarp, x, o);
      x = y > x ? y : x;
    }
    return x;
  }
};

// Exclusive prefix of the popcounts of the lanes' mask words (lane l holds
// word l, zero past the row): where word l's first kept entry goes.
using WordScan = cub::WarpScan<uint32_t>;
__device__ __forceinline__ uint32_t keptBefore(typename WordScan::TempStorage& storage, uint32_t word) {
  uint32_t before = 0;
  WordScan(storage).ExclusiveSum(__popc(word), before);
  return before;
}

}  // namespace dct::gpu::rows
