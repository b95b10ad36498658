// CUDA twin of the DCT-MP per-row selection (RowSelectArgs): each row's
// bitmap and count.
//
//   entry    rowSelect: type and row-length dispatch, the non-finite count
//            back to the host
//   kernel   selectLaneRows (rows up to kLaneRowMax entries): one thread
//            per row, cuda_rows_select_lane.cuh
//   kernel   selectTileRows (fp32 top-K, rows up to kTileRowMax entries,
//            k up to kTileTopMax): one thread per row over a shared tile,
//            cuda_rows_select_tile.cuh
//   kernel   selectWarpRows (rows up to kWarpRowMax entries): one warp per
//            row, cuda_rows_select_warp.cuh
//   kernel   selectRows (longer rows): one block per row
//              findCut  radix select of the k-th largest key (row_keys.h,
//                       the CPU twin's keys) over 8-bit digits, high to low:
//                       a shared 256-bin histogram of the keys matching the
//                       prefix found so far, then a block scan of the bins
//                       from the top picks the digit holding the k-th key;
//                       it stops once every key under the prefix is kept
//              markRow  keys above the cut are kept, ties at the cut in
//                       ascending column order (a block scan ranks them),
//                       one warp ballot per mask word
//
// The rules are the CPU twin's (cpu_rows.cc): top-K keeps the non-finite
// entries alone when there are at least k of them, else the k largest keys
// (the cut's ties lowest column first); threshold keeps !(|x| < tau), x and
// tau in T's accumulation type (fp32 for the halves).
// The k-th largest key is a value, so the kept set is the CPU twin's bit for
// bit, whatever order the block reads the row in.
#include <cstdint>
#include <type_traits>

#include "cuda_rows.cuh"
#include "cuda_rows_select_lane.cuh"
#include "cuda_rows_select_tile.cuh"
#include "cuda_rows_select_warp.cuh"
#include "cuda_values.cuh"
#include "kernels/row_keys.h"

namespace dct::gpu {
namespace {

using rows::RowScan;
using rows::RowSum;

// Keys whose high bits (key & known) are above prefix are kept, and `ties`
// of those whose high bits equal it, lowest column first. known is a run of
// high bits, so comparing masked keys compares the keys' leading digits.
template <typename K>
struct Cut {
  K prefix, known;
  size_t ties;
};

template <typename T, int THREADS>
struct SelectShared {
  union {
    typename RowScan<THREADS>::TempStorage scan;
    typename RowSum<THREADS>::TempStorage sum;
  } tmp;
  uint32_t hist[256];
  uint32_t digit, above;
  bool exact;  // every key under the new prefix is kept: no lower digit needed
  unsigned long long nonFinite;
};

// The k-th largest key of the row (1 <= k < D) and how many of its ties are
// kept, or the Inf key and all its ties when the row has at least k
// non-finite entries. Stops early once the keys under the prefix found so
// far are exactly the ones still wanted.
template <typename T, int THREADS>
__device__ Cut<RowKey<T>> findCut(const T* __restrict__ row, size_t D, size_t k, SelectShared<T, THREADS>& sh) {
  using K = RowKey<T>;
  constexpr int kPerThread = 256 / THREADS;
  constexpr int kTop = 8 * sizeof(K) - 8;
  K prefix = 0, known = 0;  // digits found so far, and their bits
  size_t want = k;          // keys still to take at or below the prefix
  for (int shift = kTop; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += THREADS) sh.hist[i] = 0;
    __syncthreads();
    unsigned long long nonFinite = 0;
    for (size_t j = threadIdx.x; j < D; j += THREADS) {
      const K key = rowKey(row[j]);
      if (shift == kTop) nonFinite += key == kInfKey<T>;
      if ((key & known) == prefix) atomicAdd(&sh.hist[(key >> shift) & 255u], 1u);
    }
    if (shift == kTop) {
      const unsigned long long nf = RowSum<THREADS>(sh.tmp.sum).Sum(nonFinite);
      if (threadIdx.x == 0) sh.nonFinite = nf;
    }
    __syncthreads();
    if (shift == kTop && sh.nonFinite >= k) return {kInfKey<T>, K(~K(0)), SIZE_MAX};  // uniform across the block
    // Bins from the top: thread t holds bins 255 - t*kPerThread - i.
    uint32_t count[kPerThread], atOrAbove[kPerThread];
    for (int i = 0; i < kPerThread; i++) count[i] = sh.hist[255 - (threadIdx.x * kPerThread + i)];
    RowScan<THREADS>(sh.tmp.scan).InclusiveSum(count, atOrAbove);
    for (int i = 0; i < kPerThread; i++) {
      if (atOrAbove[i] >= want && atOrAbove[i] - count[i] < want) {  // exactly one bin
        sh.digit = 255 - (threadIdx.x * kPerThread + i);
        sh.above = atOrAbove[i] - count[i];
        sh.exact = atOrAbove[i] == want;
      }
    }
    __syncthreads();
    prefix |= K(sh.digit) << shift;
    known |= K(255) << shift;
    want -= sh.above;
    const bool exact = sh.exact;
    __syncthreads();  // sh.digit / sh.tmp are rewritten by the next digit
    if (exact) break;
  }
  return {prefix, known, want};
}

// Writes the row's mask words and returns its kept count (on thread 0).
template <typename T, int THREADS>
__device__ uint32_t markRow(const T* __restrict__ row, size_t D, bool threshold, AccOf<T> tau, Cut<RowKey<T>> cut,
                            uint32_t* __restrict__ words, SelectShared<T, THREADS>& sh,
                            unsigned long long& nonFinite) {
  unsigned long long kept = 0;
  size_t tiesTaken = 0;
  for (size_t tile = 0; tile < D; tile += THREADS) {
    const size_t j = tile + threadIdx.x;
    const bool in = j < D;
    const T x = in ? row[j] : T{};
    bool keep;
    if (threshold) {
      keep = in && taken(loadValue(x), tau);
    } else {
      const RowKey<T> key = rowKey(x) & cut.known;
      const uint32_t tie = in && key == cut.prefix;
      uint32_t rank = 0, ties = 0;
      RowScan<THREADS>(sh.tmp.scan).ExclusiveSum(tie, rank, ties);
      __syncthreads();
      keep = in && (key > cut.prefix || (tie && tiesTaken + rank < cut.ties));
      tiesTaken += ties;
    }
    const uint32_t word = __ballot_sync(0xffffffffu, keep);
    if (threadIdx.x % 32 == 0 && in) words[j / 32] = word;  // lane 0 holds the word's first column
    kept += keep;
    nonFinite += keep && !finiteValue(x);
  }
  const unsigned long long total = RowSum<THREADS>(sh.tmp.sum).Sum(kept);
  return static_cast<uint32_t>(total);
}

// k = min(k, D); threshold when the caller's k is 0.
template <typename T, int THREADS>
__global__ void __launch_bounds__(THREADS)
    selectRows(const T* __restrict__ in, size_t R, size_t D, size_t k, bool threshold, AccOf<T> tau,
               uint32_t* __restrict__ mask, uint32_t* __restrict__ counts, unsigned long long* nonFiniteOut) {
  __shared__ SelectShared<T, THREADS> sh;
  unsigned long long nonFinite = 0;
  const size_t W = dct::maskWords(D);
  DCT_ROW_LOOP(r, R) {
    const T* row = in + r * D;
    Cut<RowKey<T>> cut{0, 0, SIZE_MAX};  // every entry (k >= D)
    if (!threshold && k < D) cut = findCut<T, THREADS>(row, D, k, sh);
    const uint32_t kept = markRow<T, THREADS>(row, D, threshold, tau, cut, mask + r * W, sh, nonFinite);
    if (threadIdx.x == 0) counts[r] = kept;
    __syncthreads();
  }
  rows::addRowCount<THREADS>(sh.tmp.sum, nonFinite, nonFiniteOut);
}

}  // namespace

dctResult_t rowSelect(KernelContext* ctx, RowSelectArgs* args, void* stream) {
  RowSelectArgs& a = *args;
  a.nonFinite = 0;
  CudaContext* c = cudaCtx(ctx);
  cudaStream_t s = cudaStreamOf(stream);
  return dispatchAnyValue(a.dtype, [&]<typename T>() -> dctResult_t {
    if (a.rowCount == 0) return dctSuccess;
    if (a.rowLength > UINT32_MAX) return dctNotSupported;  // counts and histograms are 32-bit
    const size_t k = a.k < a.rowLength ? a.k : a.rowLength;
    const AccOf<T> tau = static_cast<AccOf<T>>(a.tau);  // rounded as on the CPU
    CUDACHECK(resetCounters(c, s));
    if (a.rowLength <= rows::kLaneRowMax) {
      DCTCHECK(rows::dispatchLaneRow(a.rowLength, [&]<int N>() -> dctResult_t {
        rows::selectLaneRows<T, N><<<gridFor(a.rowCount), kThreads, 0, s>>>(
            static_cast<const T*>(a.rows), a.rowCount, a.rowLength, a.k == 0 ? 0 : k, tau, a.mask, a.counts,
            &c->device->nonFinite);
        CUDACHECK_LAUNCH();
        return dctSuccess;
      }));
    } else if (std::is_same_v<T, float> && a.rowLength <= rows::kTileRowMax && a.k != 0 && k < a.rowLength &&
               k <= rows::kTileTopMax) {
      DCTCHECK(rows::dispatchTileTop(k, [&]<int KMAX>() -> dctResult_t {
        rows::selectTileRows<KMAX><<<rows::tileGrid(a.rowCount), 32, rows::tileBytes(a.rowLength), s>>>(
            static_cast<const float*>(a.rows), a.rowCount, static_cast<uint32_t>(a.rowLength),
            static_cast<uint32_t>(k), a.mask, a.counts, &c->device->nonFinite);
        CUDACHECK_LAUNCH();
        return dctSuccess;
      }));
    } else if (a.rowLength <= rows::kWarpRowMax) {
      DCTCHECK(rows::dispatchItems(a.rowLength, [&]<int ITEMS>() -> dctResult_t {
        rows::selectWarpRows<T, ITEMS><<<rows::warpRowGrid(a.rowCount), rows::kRowWarpThreads, 0, s>>>(
            static_cast<const T*>(a.rows), a.rowCount, a.rowLength, a.k == 0 ? 0 : k, tau, a.mask, a.counts,
            &c->device->nonFinite);
        CUDACHECK_LAUNCH();
        return dctSuccess;
      }));
    } else {
      DCTCHECK(rows::dispatchBlock(a.rowLength, [&]<int THREADS>() -> dctResult_t {
        selectRows<T, THREADS><<<rows::rowGrid(a.rowCount), THREADS, 0, s>>>(
            static_cast<const T*>(a.rows), a.rowCount, a.rowLength, k, a.k == 0, tau, a.mask, a.counts,
            &c->device->nonFinite);
        CUDACHECK_LAUNCH();
        return dctSuccess;
      }));
    }
    CUDACHECK(fetchCounters(c, s));
    a.nonFinite = static_cast<size_t>(c->host->nonFinite);
    return dctSuccess;
  });
}

}  // namespace dct::gpu
