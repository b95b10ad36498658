// The row selection for rows of up to kLaneRowMax entries: one thread per
// row (a warp would leave most lanes idle), the row's keys in registers,
// top-K from row_lane_select.h (the code the unit tests run on the host).
// No warp intrinsics: threads are independent until the block's final
// non-finite sum, which every thread reaches.
#pragma once

#include "cuda_device.cuh"
#include "cuda_rows_select_warp.cuh"
#include "kernels/row_lane_select.h"

namespace dct::gpu::rows {

constexpr size_t kLaneRowMax = 32;

// fn.template operator()<N>() with D <= N <= kLaneRowMax.
template <typename Fn>
dctResult_t dispatchLaneRow(size_t D, Fn&& fn) {
  if (D <= 4) return fn.template operator()<4>();
  if (D <= 8) return fn.template operator()<8>();
  if (D <= 16) return fn.template operator()<16>();
  return fn.template operator()<32>();
}

// k: min(k, D), 0 for threshold; k == D keeps whole rows. Launch kThreads
// threads per block.
template <typename T, int N>
__global__ void __launch_bounds__(kThreads)
    selectLaneRows(const T* __restrict__ in, size_t R, size_t D, size_t k, AccOf<T> tau,
                   uint32_t* __restrict__ mask, uint32_t* __restrict__ counts, unsigned long long* nonFiniteOut) {
  using U = ShiftedKey<T>;
  unsigned long long nonFinite = 0;
  DCT_GRID_STRIDE(r, R) {
    const T* row = in + r * D;
    uint32_t word = 0, kept = 0, nf = 0;
    if (k == 0 || k == D) {  // threshold, or whole rows
      DCT_UNROLL
      for (int j = 0; j < N; j++) {
        if (static_cast<size_t>(j) >= D) break;
        const T x = row[j];
        const bool keep = k != 0 || taken(loadValue(x), tau);
        word |= static_cast<uint32_t>(keep) << j;
        nf += keep && !finiteValue(x);
      }
      kept = __popc(word);
    } else {
      U s[N];
      DCT_UNROLL
      for (int j = 0; j < N; j++) s[j] = static_cast<size_t>(j) < D ? U(rowKey(row[j])) + 1 : U(0);
      word = laneTopKWord(s, static_cast<uint32_t>(k), U(kInfKey<T>), &kept, &nf);
    }
    if (D > 0) mask[r] = word;  // one word per row
    counts[r] = kept;
    nonFinite += nf;
  }
  addBlockCount(nonFinite, nonFiniteOut);
}

}  // namespace dct::gpu::rows
