// The CUDA twin's top-K for short rows (cuda_rows_select_lane.cuh): one
// thread per row of D <= N <= 32 entries, the row's shifted keys in
// registers (row_warp_select.h: the CPU twin's keys plus one, 0 past D),
// the mask one word. Plain code, so the unit tests run it on the host
// against the CPU twin; the rules are row_select_scalar.h's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/host_device.h"
#include "kernels/row_warp_kth.h"

namespace dct {

// The row's mask word for its k largest keys (1 <= k < D), its kept count
// in *kept and its non-finite keys (all kept) in *nonFinite.
template <typename U, int N>
DCT_HOST_DEVICE uint32_t laneTopKWord(const U (&s)[N], uint32_t k, U infKey, uint32_t* kept, uint32_t* nonFinite) {
  const U inf = infKey + 1;
  const uint32_t nf = laneEqual(s, inf);
  U cut = inf - 1;  // at least k non-finite: they alone
  uint32_t above = nf;
  if (nf < k) {  // distinct maxima, largest first, until k keys are at or above one
    U bound = ~U(0);
    uint32_t taken = 0;
    for (;;) {
      U m = 0;
      DCT_UNROLL
      for (int j = 0; j < N; j++) m = s[j] < bound && s[j] > m ? s[j] : m;
      const uint32_t c = laneEqual(s, m);
      if (taken + c >= k || m == 0) {  // m == 0 (past every column): unreachable for k < D
        cut = m;
        above = taken;
        break;
      }
      taken += c;
      bound = m;
    }
  }
  uint32_t quota = above < k ? k - above : 0;  // ties of the cut kept, lowest column first
  uint32_t word = 0;
  DCT_UNROLL
  for (int j = 0; j < N; j++) {
    const bool tie = s[j] == cut && quota > 0;
    quota -= tie;
    word |= static_cast<uint32_t>(s[j] > cut || tie) << j;
  }
  *kept = popcount32(word);
  *nonFinite = nf;
  return word;
}

}  // namespace dct
