// The row selection for rows of up to kWarpRowMax entries: one warp per
// row (cuda_rows_warp.cuh), the row's keys in registers; top-K's cut and
// mask come from row_warp_select.h (the code the unit tests run on the
// host), threshold and whole rows are one ballot per mask word. The
// non-finite kept are summed per warp, one atomic per warp that saw any.
#pragma once

#include <cuda/std/type_traits>

#include "cuda_rows_warp.cuh"
#include "cuda_values.cuh"
#include "kernels/row_args.h"
#include "kernels/row_keys.h"
#include "kernels/row_warp_select.h"

namespace dct::gpu::rows {

// Shifted keys: 32-bit for every type but fp64 (the warp reductions' width).
template <typename T>
using ShiftedKey = ::cuda::std::conditional_t<sizeof(RowKey<T>) == 8, uint64_t, uint32_t>;

// k: min(k, D), 0 for threshold. k == D keeps whole rows.
template <typename T, int ITEMS>
__global__ void __launch_bounds__(kRowWarpThreads)
    selectWarpRows(const T* __restrict__ in, size_t R, size_t D, size_t k, AccOf<T> tau,
                   uint32_t* __restrict__ mask, uint32_t* __restrict__ counts, unsigned long long* nonFiniteOut) {
  using U = ShiftedKey<T>;
  const WarpLanes lanes;
  const unsigned lane = laneId();
  const size_t W = dct::maskWords(D);
  unsigned long long nonFinite = 0;  // lane 0's count of its rows
  DCT_WARP_STRIDE(r, R) {
    const T* row = in + r * D;
    uint32_t* words = mask + r * W;
    uint32_t kept = 0, nf = 0;
    if (k == 0 || k == D) {  // threshold, or whole rows: no cut
      DCT_UNROLL
      for (int i = 0; i < ITEMS; i++) {
        const size_t j = static_cast<size_t>(i) * 32 + lane;
        const bool valid = j < D;
        const T x = valid ? row[j] : T{};
        const bool keep = valid && (k != 0 || taken(loadValue(x), tau));
        const uint32_t word = __ballot_sync(kFullWarp, keep);
        nf += __popc(__ballot_sync(kFullWarp, keep && !finiteValue(x)));
        kept += __popc(word);
        if (lane == 0 && static_cast<size_t>(i) < W) words[i] = word;
      }
    } else {
      U s[ITEMS];
      DCT_UNROLL
      for (int i = 0; i < ITEMS; i++) {
        const size_t j = static_cast<size_t>(i) * 32 + lane;
        s[i] = j < D ? U(rowKey(row[j])) + 1 : U(0);
      }
      const WarpCut<U> cut = warpRowCut(s, static_cast<uint32_t>(k), U(kInfKey<T>), lanes);
      kept = warpMarkTopK(s, cut, static_cast<uint32_t>(k), W, words, lanes);
      nf = cut.nonFinite;  // every non-finite entry is kept (they rank first)
    }
    if (lane == 0) {
      counts[r] = kept;
      nonFinite += nf;
    }
  }
  if (lane == 0 && nonFinite) atomicAdd(nonFiniteOut, nonFinite);
}

}  // namespace dct::gpu::rows
