// Scatter-add (CPU twin, and dctScatterAdd on host buffers) against a plain
// loop, sorted and unsorted indices.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>

#include "dct/dct.h"
#include "kernels/kernels.h"
#include "kernels/select_args.h"
#include "reference.h"

using namespace dct;
using namespace dct::test;

namespace {

template <typename T, typename I>
void checkScatter(size_t n, size_t nnz, bool sortedUnique, uint64_t seed) {
  CAPTURE(n);
  CAPTURE(nnz);
  CAPTURE(sortedUnique);
  const auto idx = randomIndices<I>(n, nnz, sortedUnique, seed);
  auto val = randomVector<T>(nnz, seed + 1);
  auto dense = randomVector<T>(n, seed + 2);
  auto ref = dense;
  for (size_t j = 0; j < nnz; j++) ref[idx[j]] += val[j];

  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  REQUIRE(ops.createContext(&ctx) == dctSuccess);
  ScatterArgs args{dense.data(), n, sizeof(T) == 8 ? dctFloat64 : dctFloat32,
                   static_cast<int>(sizeof(I)), idx.data(), val.data(), nnz, sortedUnique};
  REQUIRE(ops.scatterAdd(ctx, &args, nullptr) == dctSuccess);
  ops.destroyContext(ctx);
  for (size_t i = 0; i < n; i++) REQUIRE(sameBits(dense[i], ref[i]));
}

}  // namespace

TEST_CASE("scatter-add matches reference") {
  for (size_t n : kOddSizes) {
    if (n == 0) continue;
    for (size_t nnz : {size_t(0), size_t(1), n / 2, n}) {
      checkScatter<float, uint32_t>(n, nnz, true, 31 + nnz);
      checkScatter<double, uint64_t>(n, nnz, true, 32 + nnz);
      checkScatter<float, uint32_t>(n, nnz, false, 33 + nnz);
      checkScatter<double, uint32_t>(n, nnz, false, 34 + nnz);
    }
  }
}

TEST_CASE("accumulate, zero and scale match plain loops") {
  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  REQUIRE(ops.createContext(&ctx) == dctSuccess);
  for (size_t n : kOddSizes) {
    auto r = randomVector<float>(n, 41), g = randomVector<float>(n, 42);
    auto ref = r;
    for (size_t i = 0; i < n; i++) ref[i] += g[i];
    REQUIRE(ops.accumulate(ctx, r.data(), g.data(), n, dctFloat32, nullptr) == dctSuccess);
    for (size_t i = 0; i < n; i++) REQUIRE(sameBits(r[i], ref[i]));
    for (size_t i = 0; i < n; i++) ref[i] *= 0.25f;
    REQUIRE(ops.scale(ctx, r.data(), n, dctFloat32, 0.25, nullptr) == dctSuccess);
    for (size_t i = 0; i < n; i++) REQUIRE(sameBits(r[i], ref[i]));
    REQUIRE(ops.zero(ctx, r.data(), n * sizeof(float), nullptr) == dctSuccess);
    for (size_t i = 0; i < n; i++) REQUIRE(sameBits(r[i], 0.0f));
  }
  ops.destroyContext(ctx);
}

// Past kStreamBytes zero streams its aligned middle: every offset and tail,
// nothing written around it.
TEST_CASE("zero past the streaming size clears exactly its bytes at any alignment") {
  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  REQUIRE(ops.createContext(&ctx) == dctSuccess);
  const size_t big = kStreamBytes + 4096;
  std::vector<unsigned char> buf(big + 128);
  for (size_t offset : {0, 1, 7, 31, 33})
    for (size_t tail : {0, 1, 31, 33}) {
      CAPTURE(offset);
      CAPTURE(tail);
      std::fill(buf.begin(), buf.end(), 0x5a);
      const size_t len = big + tail - 64;
      REQUIRE(ops.zero(ctx, buf.data() + offset, len, nullptr) == dctSuccess);
      size_t wrong = 0;
      for (size_t i = 0; i < buf.size(); i++) wrong += buf[i] != (i >= offset && i < offset + len ? 0 : 0x5a);
      CHECK(wrong == 0);
    }
  ops.destroyContext(ctx);
}

TEST_CASE("dctScatterAdd: ascending and repeated host indices, repeated calls") {
  const size_t n = 1000003;
  for (bool ascending : {true, false}) {
    for (size_t nnz : {size_t(1), size_t(1000), n / 2}) {
      CAPTURE(ascending);
      CAPTURE(nnz);
      const auto idx = randomIndices<uint32_t>(n, nnz, ascending, 71 + nnz);
      const auto val = randomVector<float>(nnz, 72 + nnz);
      auto dense = randomVector<float>(n, 73);
      auto ref = dense;
      for (int call = 0; call < 2; call++) {  // the second call reuses the shared context
        for (size_t j = 0; j < nnz; j++) ref[idx[j]] += val[j];
        REQUIRE(dctScatterAdd(dense.data(), n, idx.data(), val.data(), nnz, dctFloat32, nullptr) == dctSuccess);
        for (size_t i = 0; i < n; i++) REQUIRE(sameBits(dense[i], ref[i]));
      }
    }
  }
  std::vector<float> dense(4, 0.0f), val = {1.0f, 2.0f};
  std::vector<uint32_t> bad = {1, 4};
  CHECK(dctScatterAdd(dense.data(), 4, bad.data(), val.data(), 2, dctFloat32, nullptr) == dctInvalidArgument);
  CHECK(dense == std::vector<float>(4, 0.0f));
}
