// The checked size arithmetic (base/checked_size.h) at the edges where a
// size is multiplied or cast: 2^31 - 1, 2^31, 2^32 and near SIZE_MAX.
#include <doctest/doctest.h>

#include <climits>
#include <cstdint>

#include "base/checked_size.h"

using namespace dct;

namespace {
constexpr size_t k31m1 = (size_t{1} << 31) - 1, k31 = size_t{1} << 31, k32 = size_t{1} << 32;
}

TEST_CASE("checkedMul: exact products fit, one past SIZE_MAX fails and leaves out") {
  size_t out = 7;
  CHECK(checkedMul(k31m1, 2, out));
  CHECK(out == k32 - 2);
  CHECK(checkedMul(k32, k32 - 1, out));
  CHECK(out == SIZE_MAX - k32 + 1);
  out = 7;
  CHECK_FALSE(checkedMul(k32, k32, out));
  CHECK(out == 7);
  CHECK_FALSE(checkedMul(SIZE_MAX, 2, out));
  CHECK_FALSE(checkedMul(size_t{1} << 62, 4, out));  // a hashed id space in fp32: count * 4
  CHECK(checkedMul(SIZE_MAX, 1, out));
  CHECK(out == SIZE_MAX);
  CHECK(checkedMul(SIZE_MAX, 0, out));
  CHECK(out == 0);
  CHECK(checkedMul(SIZE_MAX / 8, 8, out));
  CHECK_FALSE(checkedMul(SIZE_MAX / 8 + 1, 8, out));
}

TEST_CASE("checkedAdd and checkedMulAdd at SIZE_MAX") {
  size_t out = 3;
  CHECK(checkedAdd(SIZE_MAX - 1, 1, out));
  CHECK(out == SIZE_MAX);
  out = 3;
  CHECK_FALSE(checkedAdd(SIZE_MAX, 1, out));
  CHECK(out == 3);
  CHECK(checkedMulAdd(k32 - 1, k32 + 1, 0, out));
  CHECK(out == SIZE_MAX);
  CHECK_FALSE(checkedMulAdd(k32 - 1, k32 + 1, 1, out));
  CHECK_FALSE(checkedMulAdd(k32, k32, 0, out));
}

TEST_CASE("checkedSum over per-rank sizes") {
  const uint64_t fits[] = {k31m1, k31, k32, 1};
  size_t out = 0;
  CHECK(checkedSum(fits, 4, out));
  CHECK(out == k31m1 + k31 + k32 + 1);
  const uint64_t wraps[] = {SIZE_MAX - 2, 2, 1};
  out = 5;
  CHECK_FALSE(checkedSum(wraps, 3, out));
  CHECK(out == 5);
  CHECK(checkedSum(wraps, 2, out));
  CHECK(out == SIZE_MAX);
  CHECK(checkedSum(wraps, 0, out));
  CHECK(out == 0);
}

TEST_CASE("toInt: MPI's int counts end at 2^31 - 1") {
  int out = -1;
  CHECK(toInt(k31m1, out));
  CHECK(out == INT_MAX);
  out = -1;
  CHECK_FALSE(toInt(k31, out));
  CHECK(out == -1);
  CHECK_FALSE(toInt(k32, out));
  CHECK_FALSE(toInt(SIZE_MAX, out));
  CHECK(toInt(0, out));
  CHECK(out == 0);
}

TEST_CASE("toSize: 64-bit sizes from a peer") {
  size_t out = 0;
  CHECK(toSize(UINT64_MAX, out) == (SIZE_MAX >= UINT64_MAX));
  CHECK(toSize(k32, out));
  CHECK(out == k32);
}
