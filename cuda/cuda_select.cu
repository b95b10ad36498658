// CUDA twin of the fused EF + threshold select + compaction (SelectArgs), in
// one pass over tiles of kTile entries:
//
//   entry    selectCompact: type dispatch, counters back to the host
//   dispatch compactSelected: the tiles' status words, one launch
//   kernels  initTiles (the status words), selectTiles: a block per tile
//            loads residual and gradient, forms acc, counts what it takes,
//            learns its first output slot from its predecessors (CUB's
//            decoupled look-back: cub::ScanTileState, TilePrefixCallbackOp),
//            writes the taken entries in ascending order (index, value) and
//            the whole tile's residual (acc, or its rounding error where
//            taken)
//
// Traffic is the EF pass's 12 bytes per fp32 entry and nothing more. The two
// passes before (acc stored and counted per tile, cub::DeviceScan of the
// counts, acc read again to compact) took 357 us of GPU time at 64M and 1%
// on an H200, 1.84x the 12-byte bound; the add alone ran at 89% of the copy
// rate (bench/results/2026-11-25-gpu-h200). This pass takes 304 us there,
// 1.50x the bound (bench/results/2026-11-26-gpu-h200). CUB's DeviceSelect does this
// in one pass too, but writes no side output (the residual). Slots past
// `capacity` are counted but not written, and their entries keep acc in the
// residual. A value is acc rounded to the value type (saturating), and the
// rounding error stays in the residual.
#include <cub/agent/single_pass_scan_operators.cuh>
#include <cub/block/block_load.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/block/block_store.cuh>
#include <cuda/std/functional>

#include "cuda_device.cuh"
#include "cuda_values.cuh"
#include "kernels/rounding_residual.h"
#include "kernels/select_types.h"

namespace dct::gpu {
namespace {

constexpr int kItems = 16;  // entries per thread in a tile
constexpr size_t kTile = static_cast<size_t>(kThreads) * kItems;

using TileState = cub::ScanTileState<unsigned long long>;
using TilePrefix = cub::TilePrefixCallbackOp<unsigned long long, ::cuda::std::plus<>, TileState>;

__global__ void initTiles(TileState state, int tiles) { state.InitializeStatus(tiles); }

// Tile blockIdx.x: acc = in + T(grad) (in may be the residual: the tile is
// loaded before it is stored), its taken entries to slots prefix, prefix +
// 1, ... in index order (the tile is held blocked: thread j has entries j
// kItems ..), its residual stored back. The last tile's inclusive prefix is
// the count taken.
template <typename T, typename G, typename V, typename I>
__global__ void __launch_bounds__(kThreads)
    selectTiles(const G* grad, const T* in, T* residual, size_t n, T tau, TileState state, size_t slots,
                I* __restrict__ indices, V* __restrict__ values, AccOf<V> limit, Counters* counters) {
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
  if (threadIdx.x == 0 && tile == static_cast<int>(gridDim.x) - 1) counters->selected = static_cast<int64_t>(total);
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
  addBlockCount(nonFinite, &counters->nonFinite);
}

template <typename T, typename V, typename I>
dctResult_t compactSelected(CudaContext* c, const SelectArgs& a, cudaStream_t s) {
  const size_t tiles = (a.n + kTile - 1) / kTile, slots = a.capacity < a.n ? a.capacity : a.n;
  // CUB's tile state is sized and indexed in ints (16 bytes a tile): far
  // past any GPU's memory (n > 5e11), but refused rather than wrapped.
  if (tiles > static_cast<size_t>(INT32_MAX / 16 - 64)) return dctNotSupported;
  const int grid = static_cast<int>(tiles);
  const T tau = static_cast<T>(a.tau);  // rounded to T, as on the CPU
  size_t bytes = 0;
  CUDACHECK(TileState::AllocationSize(grid, bytes));
  DCTCHECK(c->scratch.reserve(bytes));
  TileState state;
  CUDACHECK(state.Init(grid, c->scratch.ptr, bytes));
  CUDACHECK(resetCounters(c, s));
  initTiles<<<(grid + kThreads - 1) / kThreads, kThreads, 0, s>>>(state, grid);
  CUDACHECK_LAUNCH();
  DCTCHECK(withGradient<T>(c, a, s, [&]<typename G>(const G* grad, const T* in) -> dctResult_t {
    selectTiles<T, G, V, I><<<grid, kThreads, 0, s>>>(grad, in, static_cast<T*>(a.residual), a.n, tau, state, slots,
                                                      static_cast<I*>(a.outIndices), static_cast<V*>(a.outValues),
                                                      valueLimitOf<T, V>(a), c->device);
    CUDACHECK_LAUNCH();
    return dctSuccess;
  }));
  CUDACHECK(fetchCounters(c, s));
  return dctSuccess;
}

}  // namespace

dctResult_t selectCompact(KernelContext* ctx, SelectArgs* args, void* stream) {
  SelectArgs& a = *args;
  a.nnz = a.selected = a.nonFinite = 0;
  CudaContext* c = cudaCtx(ctx);
  cudaStream_t s = cudaStreamOf(stream);
  // The gradient's type is withGradient's (inside compactSelected).
  return dispatchSelect(a, [&]<typename T, typename, typename V, typename I>() -> dctResult_t {
    if (a.n == 0) return dctSuccess;
    DCTCHECK((compactSelected<T, V, I>(c, a, s)));
    a.selected = static_cast<size_t>(c->host->selected);
    a.nnz = a.selected < a.capacity ? a.selected : a.capacity;
    a.nonFinite = static_cast<size_t>(c->host->nonFinite);
    return dctSuccess;
  });
}

}  // namespace dct::gpu
