// The MPI transport's size arithmetic (transport/mpi_pieces.h) where a size
// is multiplied or cast into MPI's ints: 2^31 - 1, 2^31, 2^32 and near
// SIZE_MAX, without buffers of those sizes.
#include <doctest/doctest.h>

#include <climits>
#include <cstdint>
#include <vector>

#include "transport/mpi_pieces.h"

using namespace dct;

namespace {
constexpr size_t k31m1 = (size_t{1} << 31) - 1, k31 = size_t{1} << 31, k32 = size_t{1} << 32;
constexpr MpiPieces kInt{INT_MAX};
}  // namespace

TEST_CASE("piecesOf: ceil(cap / limit) at the int edges and near SIZE_MAX, never wrapping") {
  CHECK(kInt.piecesOf(0) == 0);
  CHECK(kInt.piecesOf(1) == 1);
  CHECK(kInt.piecesOf(k31m1) == 1);
  CHECK(kInt.piecesOf(k31) == 2);
  CHECK(kInt.piecesOf(k32) == 3);  // 2 x (2^31 - 1) + 2
  CHECK(kInt.piecesOf(2 * k31m1) == 2);
  // (cap + limit - 1) / limit wraps to a handful of pieces here.
  CHECK(kInt.piecesOf(SIZE_MAX) == SIZE_MAX / k31m1 + 1);
  CHECK(kInt.piecesOf(SIZE_MAX - 1) == SIZE_MAX / k31m1 + 1);
  constexpr MpiPieces one{1};
  CHECK(one.piecesOf(SIZE_MAX) == SIZE_MAX);
  constexpr MpiPieces seven{7};
  CHECK(seven.piecesOf(13) == 2);
  CHECK(seven.piecesOf(14) == 2);
  CHECK(seven.piecesOf(15) == 3);
}

TEST_CASE("pieceLen: every piece an int of at most the limit, the pieces summing to the block") {
  CHECK(kInt.pieceLen(k31m1, 0) == INT_MAX);
  CHECK(kInt.pieceLen(k31m1, 1) == 0);
  CHECK(kInt.pieceLen(k31, 0) == INT_MAX);
  CHECK(kInt.pieceLen(k31, 1) == 1);
  CHECK(kInt.pieceLen(k32, 1) == INT_MAX);
  CHECK(kInt.pieceLen(k32, 2) == 2);
  CHECK(kInt.pieceLen(k32, 3) == 0);
  const size_t last = kInt.piecesOf(SIZE_MAX) - 1;
  CHECK(kInt.pieceLen(SIZE_MAX, last) == static_cast<int>(SIZE_MAX % k31m1));
  CHECK(kInt.pieceLen(SIZE_MAX, last - 1) == INT_MAX);
  CHECK(kInt.pieceLen(SIZE_MAX, last + 1) == 0);
  // j x limit past SIZE_MAX: past the end, not a wrapped offset.
  CHECK(kInt.pieceLen(SIZE_MAX, SIZE_MAX) == 0);
  CHECK(kInt.pieceLen(SIZE_MAX, SIZE_MAX / k31m1 + 2) == 0);
  constexpr MpiPieces seven{7};
  size_t sum = 0;
  for (size_t j = 0; j < seven.piecesOf(100); j++) sum += static_cast<size_t>(seven.pieceLen(100, j));
  CHECK(sum == 100);
  CHECK(seven.pieceLen(60, 8) == 4);  // a sender with less than the capacity: trailing pieces short or empty
  CHECK(seven.pieceLen(60, 9) == 0);
}

TEST_CASE("pieceAt: offset + j x limit, refused where it does not fit size_t") {
  size_t at = 5;
  CHECK(kInt.pieceAt(0, 1, at));
  CHECK(at == k31m1);
  CHECK(kInt.pieceAt(k32, 2, at));
  CHECK(at == k32 + 2 * k31m1);
  CHECK(kInt.pieceAt(SIZE_MAX - k31m1, 1, at));
  CHECK(at == SIZE_MAX);
  at = 5;
  CHECK_FALSE(kInt.pieceAt(SIZE_MAX - k31m1 + 1, 1, at));
  CHECK(at == 5);
  CHECK_FALSE(kInt.pieceAt(0, SIZE_MAX / k31m1 + 1, at));
  CHECK_FALSE(kInt.pieceAt(SIZE_MAX, 1, at));
}

TEST_CASE("checkedExtent: the furthest block end, or false where offset + bytes wraps") {
  size_t end = 7;
  const size_t bytes[] = {k31, 0, 3}, offsets[] = {k32, SIZE_MAX, 10};
  CHECK(checkedExtent(bytes, offsets, 3, end));  // an empty block's offset is never used
  CHECK(end == k32 + k31);
  const size_t full[] = {1}, atMax[] = {SIZE_MAX - 1};
  CHECK(checkedExtent(full, atMax, 1, end));
  CHECK(end == SIZE_MAX);
  const size_t wrapping[] = {2};
  end = 7;
  CHECK_FALSE(checkedExtent(wrapping, atMax, 1, end));
  CHECK(end == 7);
  const size_t huge[] = {SIZE_MAX}, one[] = {1};
  CHECK_FALSE(checkedExtent(huge, one, 1, end));
  CHECK(checkedExtent(huge, offsets + 1, 0, end));
  CHECK(end == 0);
}

TEST_CASE("intLayout: int counts and displacements from the first block, or false past the limit") {
  std::vector<int> counts(3), displs(3);
  size_t base = 1;
  {  // offsets past 2^31 and 2^32 whose blocks lie close together: rebased, they fit
    const size_t bytes[] = {16, 0, 8}, offsets[] = {k32 + 100, 3, k32 + 4};
    CHECK(intLayout(bytes, offsets, 3, INT_MAX, base, counts.data(), displs.data()));
    CHECK(base == k32 + 4);
    CHECK(counts == std::vector<int>{16, 0, 8});
    CHECK(displs == std::vector<int>{96, 0, 0});
  }
  {  // the spread reaches exactly 2^31 - 1: fits; one byte more does not
    const size_t bytes[] = {1, 1, 0}, offsets[] = {k31, k31 + k31m1 - 1, 0};
    CHECK(intLayout(bytes, offsets, 3, INT_MAX, base, counts.data(), displs.data()));
    CHECK(base == k31);
    CHECK(displs[1] == INT_MAX - 1);
    const size_t further[] = {k31, k31 + k31m1, 0};
    CHECK_FALSE(intLayout(bytes, further, 3, INT_MAX, base, counts.data(), displs.data()));
  }
  {  // a count of 2^31, or a block past SIZE_MAX
    const size_t bytes[] = {k31, 0, 0}, offsets[] = {0, 0, 0};
    CHECK_FALSE(intLayout(bytes, offsets, 3, INT_MAX, base, counts.data(), displs.data()));
    const size_t wraps[] = {2, 0, 0}, atMax[] = {SIZE_MAX - 1, 0, 0};
    CHECK_FALSE(intLayout(wraps, atMax, 3, INT_MAX, base, counts.data(), displs.data()));
  }
  {  // a lowered limit: the same test against it
    const size_t bytes[] = {4, 4, 0}, offsets[] = {0, 60, 0};
    CHECK(intLayout(bytes, offsets, 3, 64, base, counts.data(), displs.data()));
    CHECK_FALSE(intLayout(bytes, offsets, 3, 63, base, counts.data(), displs.data()));
  }
  {  // nothing to move
    const size_t bytes[] = {0, 0, 0}, offsets[] = {SIZE_MAX, k32, 1};
    CHECK(intLayout(bytes, offsets, 3, INT_MAX, base, counts.data(), displs.data()));
    CHECK(base == 0);
    CHECK(displs == std::vector<int>{0, 0, 0});
  }
}
