// The MPI transport's size arithmetic, pure and header-only so that unit
// tests reach 2^31 - 1, 2^31, 2^32 and SIZE_MAX without such buffers
// (tests/unit/test_mpi_pieces.cc). Beyond MPI's int counts a block of `cap`
// bytes travels as piecesOf(cap) pieces of at most `limit` bytes (the
// count limit, at most INT_MAX), the j-th pieceLen(bytes, j) long at
// pieceAt(offset, j). Sizes that are agreed give the same pieces on every
// rank; a capacity gives the receiver the count without knowing what was
// sent (trailing pieces empty when the sender has less).
#pragma once

#include <climits>
#include <cstddef>

#include "base/checked_size.h"

namespace dct {

struct MpiPieces {
  size_t limit;  // 1 .. INT_MAX

  // ceil(cap / limit), without the wrap of (cap + limit - 1) near SIZE_MAX.
  size_t piecesOf(size_t cap) const { return cap / limit + (cap % limit != 0); }

  // Length of the j-th piece of a block of `bytes` (0 past its end): at
  // most limit, so always an int.
  int pieceLen(size_t bytes, size_t j) const {
    size_t at = 0;
    if (!checkedMul(j, limit, at) || at >= bytes) return 0;
    const size_t n = bytes - at < limit ? bytes - at : limit;
    return static_cast<int>(n);
  }

  // Byte offset of the j-th piece of a block at `offset`; false when it
  // cannot be expressed (no such buffer exists).
  bool pieceAt(size_t offset, size_t j, size_t& out) const { return checkedMulAdd(j, limit, offset, out); }
};

// MPI int displacements of n blocks relative to the lowest non-empty one
// (`base`), counts as ints: false when a block ends past base + `limit`
// (or past SIZE_MAX). Empty blocks get displacement 0.
inline bool intLayout(const size_t* bytes, const size_t* offsets, int n, size_t limit, size_t& base, int* counts,
                      int* displs) {
  bool any = false;
  base = 0;
  for (int i = 0; i < n; i++)
    if (bytes[i] && (!any || offsets[i] < base)) base = offsets[i], any = true;
  for (int i = 0; i < n; i++) {
    size_t end = 0;
    if (bytes[i] && (!checkedAdd(offsets[i], bytes[i], end) || end - base > limit)) return false;
    if (!toInt(bytes[i], counts[i]) || !toInt(bytes[i] ? offsets[i] - base : 0, displs[i])) return false;
  }
  return true;
}

}  // namespace dct
