// The one-pass select and compaction kernel (cuda_select.cu's header
// comment), shared by selectCompact and the fixed-capacity step's
// streamSelect (cuda_stream_step.cu), which differ only in where the
// residuals, tau and counts are (the plan).
#pragma once

#include <cub/agent/single_pass_scan_operators.cuh>
#include <cub/block/block_load.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/block/block_store.cuh>
#include <cuda/std/functional>

#include "cuda_device.cuh"
#include "cuda_values.cuh"
#include "kernels/rounding_residual.h"

namespace dct::gpu {
// Kernels with internal linkage: each .cu that includes this file gets its own.
namespace {

constexpr int kItems = 16;  // entries per thread in a tile
constexpr size_t kTile = static_cast<size_t>(kThreads) * kItems;

using TileState = cub::ScanTileState<unsigned long long>;
using TilePrefix = cub::TilePrefixCallbackOp<unsigned long long, ::cuda::std::plus<>, TileState>;

__global__ void initTiles(TileState state, int tiles) { state.InitializeStatus(tiles); }

// Where a select's residuals, tau and counts are. CallTiles: the op's
// arguments (selectCompact). The fixed-capacity step's (cuda_stream_step.cu)
// reads them from device memory, so its launches are the same every step.
template <typename T>
struct CallTiles {
  const T* input;
  T* output;
  T threshold;
  Counters* counters;
  __device__ bool skip() const { return false; }
  __device__ const T* in() const { return input; }
  __device__ T* out() const { return output; }
  __device__ T tau() const { return threshold; }
  __device__ void setSelected(unsigned long long total) const { counters->selected = static_cast<int64_t>(total); }
  __device__ unsigned long long* nonFinite() const { return &counters->nonFinite; }
};

// Tile blockIdx.x: acc = in + T(grad) (in may be the residual: the tile is
// loaded before it is stored), its taken entries to slots prefix, prefix +
// 1, ... in index order (the tile is held blocked: thread j has entries j
// kItems ..), its residual stored back. The last tile's inclusive prefix is
// the count taken. A plan that says skip (the same for every block) makes
// the whole launch do nothing.
template <typename T, typename G, typename V, typename I, typename Plan>
__global__ void __launch_bounds__(kThreads)
    selectTiles(const G* grad, Plan plan, size_t n, TileState state, size_t slots, I* __restrict__ indices,
                V* __restrict__ values, AccOf<V> limit) {
  if (plan.skip()) return;
  const T* in = plan.in();
  T* residual = plan.out();
  const T tau = plan.tau();
  using LoadT = cub::BlockLoad<T, kThreads, kItems, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using LoadG = cub::BlockLoad<G, kThreads, kItems, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using Store = cub::BlockStore<T, kThreads, kItems, cub::BLOCK_STORE_WARP_TRANSPOSE>;
  using Scan = cub::BlockScan<unsigned long long, kThreads>;
  __shared__ union {
    typename LoadT::TempStorage loadT;
    typename LoadG::TempStorage loadG;
    typename Store::TempStorage store;
    struct {
      typename Scan::TempStorage scan;
      typename TilePrefix::TempStorage prefix;
    } scan;
  } temp;
  const int tile = static_cast<int>(blockIdx.x);
  const size_t first = static_cast<size_t>(tile) * kTile, mine = first + threadIdx.x * kItems;
  const int valid = static_cast<int>(n - first < kTile ? n - first : kTile);
  T acc[kItems];
  LoadT(temp.loadT).Load(in + first, acc, valid, T(0));
  if (grad) {  // block-uniform
    G g[kItems];
    __syncthreads();  // the load's temp is reused
    LoadG(temp.loadG).Load(grad + first, g, valid);
    for (int k = 0; k < kItems; k++)
      if (mine + k < n) acc[k] = hostAdd(acc[k], widenValue<T>(g[k]));
  }
  bool take[kItems];
  unsigned long long count = 0;
  for (int k = 0; k < kItems; k++) count += take[k] = mine + k < n && taken(acc[k], tau);
  __syncthreads();  // the loads' temp becomes the scan's
  unsigned long long slot = 0, total = 0;
  if (tile == 0) {
    Scan(temp.scan.scan).ExclusiveSum(count, slot, total);
    if (threadIdx.x == 0) state.SetInclusive(0, total);
  } else {
    TilePrefix prefix(state, temp.scan.prefix, ::cuda::std::plus<>{}, tile);
    Scan(temp.scan.scan).ExclusiveSum(count, slot, prefix);
    if (threadIdx.x == 0) total = prefix.GetInclusivePrefix();  // thread 0 wrote it in the callback
  }
  if (threadIdx.x == 0 && tile == static_cast<int>(gridDim.x) - 1) plan.setSelected(total);
  unsigned long long nonFinite = 0;
  for (int k = 0; k < kItems && slot < slots; k++) {
    if (!take[k]) continue;
    const V v = saturateValue<V>(acc[k], limit);
    indices[slot] = static_cast<I>(mine + k);
    values[slot] = v;
    nonFinite += !finite(acc[k]);
    acc[k] = roundingResidual(acc[k], v);
    slot++;
  }
  __syncthreads();  // the scan's temp becomes the store's
  Store(temp.store).Store(residual + first, acc, valid);
  addBlockCount(nonFinite, plan.nonFinite());
}

}  // namespace

// Tiles of n entries, and whether CUB's tile state (sized and indexed in
// ints, 16 bytes a tile) can hold them: false only far past any GPU's
// memory (n > 5e11), refused rather than wrapped.
inline size_t tileCount(size_t n) { return (n + kTile - 1) / kTile; }
inline bool tilesFit(size_t tiles) { return tiles <= static_cast<size_t>(INT32_MAX / 16 - 64); }

}  // namespace dct::gpu
