// CUDA twin of the fused EF + threshold select + compaction (SelectArgs), in
// tiles of kTile entries:
//
//   entry    selectCompact: type dispatch, counters back to the host
//   dispatch compactSelected: the two passes and the scan between them
//   kernels  accumulateCount (acc = residual + grad stored, taken entries
//            counted per tile), cub::DeviceScan of the counts (each tile's
//            first output slot), compactTiles (each tile's taken entries
//            written in ascending order: index, value, rounding residual)
//
// Traffic is the EF pass's 12 bytes per entry plus one more read of acc
// (4 for fp32), skipped for tiles with nothing taken. One pass less than
// before: cub::DeviceSelect::If over the indices (then FlaggedIf with acc as
// the flags) after the add op, and a finishing kernel for the values, took
// 477 us (434 us) at 64M and 1% on an H200, the select sweep alone 193 us
// (151 us) for a 268 MB read, a third of the copy rate. Slots past
// `capacity` are counted but not written, and their entries keep acc in the
// residual. A value is acc rounded to the value type (saturating), and the
// rounding error stays in the residual.
#include <cub/block/block_load.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include "cuda_device.cuh"
#include "cuda_values.cuh"

namespace dct::gpu {
namespace {

constexpr int kItems = 16;  // entries per thread in a tile
constexpr size_t kTile = static_cast<size_t>(kThreads) * kItems;

size_t tilesOf(size_t n) { return (n + kTile - 1) / kTile; }

// acc = in + T(grad) stored in the residual (in may be the residual: each
// entry is read before it is written), and counts[t] = taken entries of tile t.
template <typename T, typename G>
__global__ void accumulateCount(const G* grad, const T* in, T* residual, size_t n, T tau, size_t tiles,
                                uint64_t* __restrict__ counts) {
  using Reduce = cub::BlockReduce<int, kThreads>;
  __shared__ typename Reduce::TempStorage temp;
  for (size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const size_t end = (t + 1) * kTile < n ? (t + 1) * kTile : n;
    int mine = 0;
    for (size_t i = t * kTile + threadIdx.x; i < end; i += kThreads) {  // striped: coalesced
      T acc = in[i];
      if (grad) acc = hostAdd(acc, widenValue<T>(grad[i]));
      residual[i] = acc;
      mine += taken(acc, tau);
    }
    const int total = Reduce(temp).Sum(mine);
    if (threadIdx.x == 0) counts[t] = static_cast<uint64_t>(total);
    __syncthreads();  // temp is reused by the next tile
  }
}

// Tile t's taken entries go to slots offsets[t], offsets[t] + 1, ... in index
// order: the tile is loaded blocked (thread j holds entries j kItems ..), so a
// block-wide exclusive sum of each thread's count is its first slot.
template <typename T, typename V, typename I>
__global__ void compactTiles(T* __restrict__ residual, size_t n, T tau, const uint64_t* __restrict__ offsets,
                             size_t tiles, size_t slots, I* __restrict__ indices, V* __restrict__ values,
                             AccOf<V> limit, Counters* counters) {
  using Load = cub::BlockLoad<T, kThreads, kItems, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ union {
    typename Load::TempStorage load;
    typename Scan::TempStorage scan;
  } temp;
  if (blockIdx.x == 0 && threadIdx.x == 0) counters->selected = static_cast<int64_t>(offsets[tiles]);
  unsigned long long nonFinite = 0;
  for (size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    if (offsets[t + 1] == offsets[t] || offsets[t] >= slots) continue;  // nothing to write (block-uniform)
    const size_t first = t * kTile, mine = first + threadIdx.x * kItems;
    const int valid = static_cast<int>(n - first < kTile ? n - first : kTile);
    T acc[kItems];
    Load(temp.load).Load(residual + first, acc, valid, T(0));
    bool take[kItems];
    int count = 0;
    for (int k = 0; k < kItems; k++) count += take[k] = mine + k < n && taken(acc[k], tau);
    __syncthreads();  // the load's temp becomes the scan's
    int rank;
    Scan(temp.scan).ExclusiveSum(count, rank);
    __syncthreads();  // and the next tile's load
    uint64_t slot = offsets[t] + static_cast<uint64_t>(rank);
    for (int k = 0; k < kItems && slot < slots; k++) {
      if (!take[k]) continue;
      const V v = saturateValue<V>(acc[k], limit);
      const bool fin = finite(acc[k]);
      indices[slot] = static_cast<I>(mine + k);
      values[slot] = v;
      residual[mine + k] = fin ? hostSub(acc[k], widenValue<T>(v)) : T(0);
      nonFinite += !fin;
      slot++;
    }
  }
  addBlockCount(nonFinite, &counters->nonFinite);
}

template <typename T, typename V, typename I>
dctResult_t compactSelected(CudaContext* c, const SelectArgs& a, cudaStream_t s) {
  const size_t tiles = tilesOf(a.n), slots = a.capacity < a.n ? a.capacity : a.n;
  const unsigned blocks = gridFor(tiles * kThreads);  // a block per tile, up to gridFor's cap
  const T tau = static_cast<T>(a.tau);  // rounded to T, as on the CPU
  DCTCHECK(c->scratch.reserve(2 * (tiles + 1) * sizeof(uint64_t)));
  uint64_t* counts = c->scratch.as<uint64_t>();
  uint64_t* offsets = counts + tiles + 1;
  T* residual = static_cast<T*>(a.residual);

  CUDACHECK(resetCounters(c, s));
  CUDACHECK(cudaMemsetAsync(counts + tiles, 0, sizeof(uint64_t), s));  // offsets[tiles]: the total
  DCTCHECK(withGradient<T>(c, a, s, [&]<typename G>(const G* grad, const T* in) -> dctResult_t {
    accumulateCount<T, G><<<blocks, kThreads, 0, s>>>(grad, in, residual, a.n, tau, tiles, counts);
    CUDACHECK_LAUNCH();
    return dctSuccess;
  }));
  size_t bytes = 0;
  const auto items = static_cast<int64_t>(tiles + 1);
  CUDACHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, counts, offsets, items, s));
  DCTCHECK(c->temp.reserve(bytes));
  CUDACHECK(cub::DeviceScan::ExclusiveSum(c->temp.ptr, bytes, counts, offsets, items, s));
  compactTiles<T, V, I><<<blocks, kThreads, 0, s>>>(residual, a.n, tau, offsets, tiles, slots,
                                                     static_cast<I*>(a.outIndices), static_cast<V*>(a.outValues),
                                                     valueLimitOf<T, V>(a), c->device);
  CUDACHECK_LAUNCH();
  CUDACHECK(fetchCounters(c, s));
  return dctSuccess;
}

}  // namespace

dctResult_t selectCompact(KernelContext* ctx, SelectArgs* args, void* stream) {
  SelectArgs& a = *args;
  a.nnz = a.selected = a.nonFinite = 0;
  CudaContext* c = cudaCtx(ctx);
  cudaStream_t s = cudaStreamOf(stream);
  return dispatchTypes(a.dtype, a.indexBytes, [&]<typename T, typename I>() {
    return dispatchAnyValue(a.valueT(), [&]<typename V>() -> dctResult_t {
      if (!selectTypesTaken(a)) return dctNotSupported;
      if (a.n == 0) return dctSuccess;
      DCTCHECK((compactSelected<T, V, I>(c, a, s)));
      a.selected = static_cast<size_t>(c->host->selected);
      a.nnz = a.selected < a.capacity ? a.selected : a.capacity;
      a.nonFinite = static_cast<size_t>(c->host->nonFinite);
      return dctSuccess;
    });
  });
}

}  // namespace dct::gpu
