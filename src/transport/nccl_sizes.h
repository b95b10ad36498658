// The NCCL transport's size arithmetic, header-only and CUDA-free so that
// unit tests reach SIZE_MAX without a GPU (tests/unit/test_nccl_sizes.cc).
// NCCL counts are size_t: nothing here is cast to int, but products and
// sums of agreed sizes must not wrap (a wrapped sum once read as "nothing
// to gather").
#pragma once

#include <cstddef>

#include "base/checked_size.h"

namespace dct::nccl {

// The padded allgatherv's buffer never exceeds this: past it the messages
// are large enough for the broadcasts to be bandwidth-bound anyway, and
// prepare() calls sized for a dense allreduce reserve no more.
constexpr size_t kPaddedCap = size_t(64) << 20;

// Room the padded allgatherv needs for messages whose extent is `bytes`:
// 1.5 x bytes + 8 per rank, capped (bytes + bytes / 2 wraps near SIZE_MAX).
inline size_t paddedRoom(int ranks, size_t bytes) {
  if (bytes >= kPaddedCap) return kPaddedCap;
  const size_t room = bytes + bytes / 2 + 8 * static_cast<size_t>(ranks > 0 ? ranks : 0);
  return room < kPaddedCap ? room : kPaddedCap;
}

enum class GatherForm { Nothing, Padded, Broadcasts, Unheld };

// The allgatherv form for P agreed block sizes, the same on every rank:
// one padded ncclAllGather of P x `slot` bytes (slot: the largest block
// rounded up to 8) when P x max <= 1.5 x sum and that fits kPaddedCap,
// else one broadcast per block. Unheld: the sizes sum past SIZE_MAX (no
// buffer holds them). `sum`: the bytes of all blocks.
inline GatherForm gatherForm(const size_t* bytes, size_t P, size_t& slot, size_t& sum) {
  size_t max = 0, total = 0;
  for (size_t r = 0; r < P; r++) {
    if (!checkedAdd(total, bytes[r], total)) return GatherForm::Unheld;
    max = bytes[r] > max ? bytes[r] : max;
  }
  sum = total;
  if (total == 0) return GatherForm::Nothing;
  size_t padded = 0, lhs = 0, rhs = 0;
  if (max > kPaddedCap) return GatherForm::Broadcasts;  // rounds up without wrapping below
  slot = (max + 7) & ~size_t(7);
  if (checkedMul(P, slot, padded) && padded <= kPaddedCap && checkedMul(2 * P, max, lhs) && checkedMul(3, total, rhs) &&
      lhs <= rhs)
    return GatherForm::Padded;
  return GatherForm::Broadcasts;
}

}  // namespace dct::nccl
