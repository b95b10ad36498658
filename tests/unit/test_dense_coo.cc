// denseCoo (CPU twin) against its definition: the scale op, then the
// select's rule !(|x| < tau) over the array (selectCompact with no
// gradient, its remainder discarded), the indices offset by indexBase.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "kernels/kernels.h"
#include "cpu_twin.h"
#include "reference.h"

using namespace dct;
using namespace dct::test;

namespace {

// Half of the elements zero, the rest as randomVector draws them (zeros,
// NaN, +-Inf among them), a -0 and the smallest denormal at fixed places.
template <typename T>
std::vector<T> sparseInput(size_t n, uint64_t seed) {
  auto v = randomVector<T>(n, seed);
  const auto pick = randomVector<float>(n, seed + 1, false);
  for (size_t i = 0; i < n; i++)
    if (pick[i] < 0) v[i] = T(0);
  if (n > 3) v[n / 3] = -T(0);
  if (n > 2) v[n / 2] = std::numeric_limits<T>::denorm_min();
  return v;
}

template <typename T, typename I>
void checkDenseCoo(size_t n, double factor, double tau, uint64_t base, uint64_t seed) {
  CAPTURE(n);
  CAPTURE(factor);
  CAPTURE(tau);
  CAPTURE(base);
  Twin twin;
  const dctDataType_t type = sizeof(T) == 8 ? dctFloat64 : dctFloat32;
  const auto in = sparseInput<T>(n, seed);
  // The definition, through the ops themselves.
  std::vector<T> scaled = in, remainder(n);
  if (factor != 1.0) REQUIRE(twin.ops.scale(twin.ctx, scaled.data(), n, type, factor, nullptr) == dctSuccess);
  std::vector<I> refIdx(n + 1);
  std::vector<T> refVal(n + 1);
  SelectArgs sel{nullptr, remainder.data(), n, type, static_cast<int>(sizeof(I)), tau, n, refIdx.data(), refVal.data()};
  sel.residualIn = scaled.data();
  REQUIRE(twin.ops.selectCompact(twin.ctx, &sel, nullptr) == dctSuccess);

  std::vector<I> idx(n + 1, I(7));
  std::vector<T> val(n + 1, T(7));
  DenseCooArgs args{in.data(), n, type, static_cast<int>(sizeof(I)), factor, tau, idx.data(), val.data(), sel.nnz};
  args.indexBase = base;
  REQUIRE(twin.ops.denseCoo(twin.ctx, &args, nullptr) == dctSuccess);
  REQUIRE(args.nnz == sel.nnz);
  size_t wrong = 0;
  for (size_t j = 0; j < args.nnz; j++)
    wrong += idx[j] != static_cast<I>(refIdx[j] + base) || !sameBits(val[j], refVal[j]);
  CHECK(wrong == 0);
  CHECK(idx[args.nnz] == I(7));  // nothing past the entries
  CHECK(sameBits(val[args.nnz], T(7)));
  if (sel.nnz > 0) {  // one entry short of room: refused
    args.capacity = sel.nnz - 1;
    CHECK(twin.ops.denseCoo(twin.ctx, &args, nullptr) == dctInvalidArgument);
  }
}

}  // namespace

TEST_CASE("denseCoo equals the scale op and a select of the array, bit for bit") {
  for (size_t n : kOddSizes) {
    checkDenseCoo<float, uint32_t>(n, 1.0, std::numeric_limits<float>::denorm_min(), 0, 10 + n);
    checkDenseCoo<double, uint64_t>(n, 1.0 / 3, std::numeric_limits<double>::denorm_min(), uint64_t(1) << 40, 11 + n);
    checkDenseCoo<float, uint32_t>(n, 1.0 / 7, 0.5, 1000003, 12 + n);  // a threshold past the zeros
    checkDenseCoo<double, uint32_t>(n, 1.0, 0.0, 5, 13 + n);           // tau 0: every element kept, zeros too
  }
  checkDenseCoo<float, uint32_t>(4000037, 0.25, std::numeric_limits<float>::denorm_min(), 0, 14);  // many chunks
  checkDenseCoo<double, uint64_t>(1000003, 1.0, 1.0, 77, 15);
}

TEST_CASE("denseCoo refuses index widths and types it does not write") {
  Twin twin;
  const float in[3] = {1, 0, 2};
  uint32_t idx[3];
  float val[3];
  DenseCooArgs args{in, 3, dctFloat32, 2, 1.0, 0.5, idx, val, 3};
  CHECK(twin.ops.denseCoo(twin.ctx, &args, nullptr) == dctInvalidArgument);
  args.indexBytes = 4;
  args.dtype = dctFloat16;
  CHECK(twin.ops.denseCoo(twin.ctx, &args, nullptr) == dctNotSupported);
  args.dtype = dctFloat32;
  REQUIRE(twin.ops.denseCoo(twin.ctx, &args, nullptr) == dctSuccess);
  CHECK(args.nnz == 2);
}
