// mergePackedCoo (CPU twin) against its definition: the dense sum of the
// messages (mergePacked), averaged with the scale op, its entries kept by
// the select's rule !(|x| < tau). Malformed messages: test_packing.cc.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/half_types.h"
#include "kernels/kernels.h"
#include "cpu_twin.h"
#include "reference.h"

using namespace dct;
using namespace dct::test;

namespace {

template <typename T>
constexpr dctDataType_t typeOf() {
  if constexpr (std::is_same_v<T, double>) return dctFloat64;
  else if constexpr (std::is_same_v<T, Half>) return dctFloat16;
  else return dctFloat32;
}

template <typename V>
V toValue(float x) {
  if constexpr (std::is_same_v<V, Half>) return Half{floatToHalfBits(x)};
  else return static_cast<V>(x);
}

// Messages of mixed lengths (empty ones too). Even ranks draw normals with
// zeros, NaN and Inf; odd ranks draw from {-1.5, ..., 1.5} so that sums
// cancel to 0 and drop out. `ordered`: every rank sends half the indices,
// rank r the value {1, eps, -1}[r % 3] (eps half T's ulp of 1), whose sums
// depend on the order of the additions: (1 + eps) - 1 is 0, (-1 + eps) + 1
// is not.
template <typename T, typename V, typename I>
void checkUnion(size_t n, int ranks, double factor, uint64_t seed, uint64_t indexBase = 0, bool ordered = false) {
  CAPTURE(n);
  CAPTURE(indexBase);
  CAPTURE(ranks);
  CAPTURE(factor);
  Twin twin;
  std::vector<std::vector<uint8_t>> packed(ranks);
  std::vector<std::vector<V>> values(ranks);
  std::vector<PackedMessage> messages(ranks);
  size_t entries = 0;
  for (int r = 0; r < ranks; r++) {
    const size_t sizes[] = {0, 1, n / 1000, n / 100, n / 7, n / 2, n};  // n / 1000: windows of a few words
    const size_t nnz = ordered ? n / 2 : std::min(n, sizes[(seed + r) % 7]);
    const auto idx = randomIndices<I>(n, nnz, true, seed + 10 * r);
    const auto normal = randomVector<float>(nnz, seed + 10 * r + 1);
    const V probe[3] = {toValue<V>(1.0f), toValue<V>(static_cast<float>(std::numeric_limits<T>::epsilon() / 2)), toValue<V>(-1.0f)};
    values[r].resize(nnz);
    for (size_t j = 0; j < nnz; j++)
      values[r][j] = ordered ? probe[r % 3] : toValue<V>(r % 2 ? 0.5f * static_cast<float>(int(idx[j] % 7) - 3) : normal[j]);
    packed[r] = twin.pack(idx);
    messages[r] = PackedMessage{packed[r].data(), values[r].data(), nnz, packed[r].size()};
    entries += nnz;
  }
  const dctDataType_t acc = typeOf<T>(), wire = typeOf<V>();
  const int indexBytes = sizeof(I);
  std::vector<T> dense(n);
  MergeArgs merge{dense.data(), n, acc, wire, indexBytes, messages.data(), ranks};
  REQUIRE(twin.ops.mergePacked(twin.ctx, &merge, nullptr) == dctSuccess);
  if (factor != 1.0) REQUIRE(twin.ops.scale(twin.ctx, dense.data(), n, acc, factor, nullptr) == dctSuccess);
  const T tau = std::numeric_limits<T>::denorm_min();
  std::vector<I> outIdx(entries + 1, I(7));
  std::vector<T> outVal(entries + 1, T(7));
  MergeCooArgs coo{messages.data(), ranks, n, acc, wire, indexBytes, factor, double(tau),
                   outIdx.data(), outVal.data(), entries};
  coo.indexBase = indexBase;
  REQUIRE(twin.ops.mergePackedCoo(twin.ctx, &coo, nullptr) == dctSuccess);
  size_t j = 0, wrong = 0;
  for (size_t i = 0; i < n && j <= coo.nnz; i++) {
    if (std::fabs(dense[i]) < tau) continue;
    wrong += j == coo.nnz || outIdx[j] != i + indexBase || !sameBits(outVal[j], dense[i]);
    j++;
  }
  CHECK(wrong == 0);
  CHECK(j == coo.nnz);
  CHECK(outIdx[entries] == I(7));  // nothing past the capacity
  if (entries > 0) {  // a capacity short of the entries is refused
    coo.capacity = entries - 1;
    CHECK(twin.ops.mergePackedCoo(twin.ctx, &coo, nullptr) == dctInvalidArgument);
  }
}

}  // namespace

TEST_CASE("the union adds in rank order, stepped or in windows") {
  for (size_t n : {size_t(1001), size_t(300007)})
    for (int ranks : {3, 5}) {
      checkUnion<float, float, uint32_t>(n, ranks, 1.0, 70 + n + ranks, 0, true);
      checkUnion<double, double, uint64_t>(n, ranks, 1.0, 71 + n + ranks, 0, true);
    }
}

TEST_CASE("the union of packed messages equals selecting their dense sum") {
  for (size_t n : kOddSizes) {
    for (int ranks : {1, 2, 3, 4, 5}) {
      checkUnion<float, float, uint32_t>(n, ranks, 1.0, 90 + n + ranks);
      checkUnion<double, double, uint64_t>(n, ranks, 1.0 / ranks, 91 + n + ranks);
      checkUnion<float, Half, uint32_t>(n, ranks, 1.0 / 3, 92 + n + ranks);
    }
    // A range of a larger index space (split's ranges as COO): one message, indices offset.
    checkUnion<float, float, uint32_t>(n, 1, 0.5, 94 + n, 1000003);
    checkUnion<double, double, uint64_t>(n, 2, 1.0, 95 + n, uint64_t(1) << 40);
  }
  checkUnion<float, float, uint32_t>(4000037, 4, 0.25, 93);  // many chunks: several workers
  checkUnion<float, float, uint32_t>(1000003, 2, 1.0, 99);    // 1 entry and 0.1%: windows of a few words
  checkUnion<double, double, uint64_t>(4000037, 3, 1.0 / 3, 97);  // stepped, many chunks
  checkUnion<float, float, uint32_t>(4000037, 2, 1.0, 98);
}
