// The NCCL transport's size arithmetic (transport/nccl_sizes.h), CUDA-free:
// the allgatherv's form and the padded room at 2^31 - 1, 2^31, 2^32 and
// near SIZE_MAX, where a sum or product of agreed sizes used to wrap.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "transport/nccl_sizes.h"

using namespace dct::nccl;

namespace {
constexpr size_t k31m1 = (size_t{1} << 31) - 1, k31 = size_t{1} << 31, k32 = size_t{1} << 32;

GatherForm formOf(const std::vector<size_t>& bytes, size_t* slotOut = nullptr, size_t* sumOut = nullptr) {
  size_t slot = 0, sum = 0;
  const GatherForm f = gatherForm(bytes.data(), bytes.size(), slot, sum);
  if (slotOut) *slotOut = slot;
  if (sumOut) *sumOut = sum;
  return f;
}
}  // namespace

TEST_CASE("gatherForm: padded when close and small, broadcasts otherwise, as before") {
  size_t slot = 0, sum = 0;
  CHECK(formOf({0, 0, 0}) == GatherForm::Nothing);
  CHECK(formOf({100, 90, 101}, &slot, &sum) == GatherForm::Padded);
  CHECK(slot == 104);
  CHECK(sum == 291);
  CHECK(formOf({1000, 1, 1}) == GatherForm::Broadcasts);  // far apart
  CHECK(formOf({kPaddedCap / 2, kPaddedCap / 2}) == GatherForm::Padded);
  CHECK(formOf({kPaddedCap / 2 + 8, kPaddedCap / 2 + 8}) == GatherForm::Broadcasts);  // past the cap
}

TEST_CASE("gatherForm: sizes at the int edges and near SIZE_MAX never wrap into a wrong form") {
  size_t sum = 0;
  CHECK(formOf({k31m1, k31}, nullptr, &sum) == GatherForm::Broadcasts);
  CHECK(sum == k31m1 + k31);
  CHECK(formOf({k32, k32, k32}) == GatherForm::Broadcasts);
  // A sum that wraps to 0 read as "nothing to gather"; now no buffer holds it.
  CHECK(formOf({SIZE_MAX, 1}) == GatherForm::Unheld);
  CHECK(formOf({SIZE_MAX / 2 + 1, SIZE_MAX / 2 + 1}) == GatherForm::Unheld);
  // pad8(max) wrapped to 0 and passed the cap test.
  CHECK(formOf({SIZE_MAX - 3}) == GatherForm::Broadcasts);
  CHECK(formOf({SIZE_MAX}) == GatherForm::Broadcasts);
  // 2 P max and 3 sum wrapped and could compare either way.
  CHECK(formOf({SIZE_MAX / 3, SIZE_MAX / 3, SIZE_MAX / 3}) == GatherForm::Broadcasts);
  CHECK(formOf({SIZE_MAX / 4, 0, 0, 0}) == GatherForm::Broadcasts);
}

TEST_CASE("paddedRoom: 1.5 x bytes + 8 per rank, capped, no wrap near SIZE_MAX") {
  CHECK(paddedRoom(4, 0) == 32);
  CHECK(paddedRoom(4, 1000) == 1532);
  CHECK(paddedRoom(4, kPaddedCap / 2) == kPaddedCap / 2 * 3 / 2 + 32);
  CHECK(paddedRoom(4, kPaddedCap / 3 * 2 + 8) == kPaddedCap);
  CHECK(paddedRoom(1, k31m1) == kPaddedCap);
  CHECK(paddedRoom(1, k32) == kPaddedCap);
  CHECK(paddedRoom(1 << 30, 1) == kPaddedCap);
  // bytes + bytes / 2 wrapped to a small room here.
  CHECK(paddedRoom(2, SIZE_MAX) == kPaddedCap);
  CHECK(paddedRoom(2, SIZE_MAX / 3 * 2 + 2) == kPaddedCap);
}
