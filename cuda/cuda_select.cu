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
#include "cuda_select_tiles.cuh"
#include "kernels/select_types.h"

namespace dct::gpu {
namespace {

template <typename T, typename V, typename I>
dctResult_t compactSelected(CudaContext* c, const SelectArgs& a, cudaStream_t s) {
  const size_t tiles = tileCount(a.n), slots = a.capacity < a.n ? a.capacity : a.n;
  // CUB's tile state is sized and indexed in ints (16 bytes a tile): far
  // past any GPU's memory (n > 5e11), but refused rather than wrapped.
  if (!tilesFit(tiles)) return dctNotSupported;
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
    const CallTiles<T> plan{in, static_cast<T*>(a.residual), tau, c->device};
    selectTiles<T, G, V, I><<<grid, kThreads, 0, s>>>(grad, plan, a.n, state, slots, static_cast<I*>(a.outIndices),
                                                      static_cast<V*>(a.outValues), valueLimitOf<T, V>(a));
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
