// Fused EF + select + compact (CPU twin) against the plain reference; its
// scratch shrinks after a spike.
#include <doctest/doctest.h>

#include "kernels/cpu_context.h"
#include "kernels/kernels.h"
#include "reference.h"

using namespace dct;
using namespace dct::test;

namespace {

template <typename T, typename I>
void checkSelect(size_t n, uint64_t seed, bool withGrad, double tau, size_t capacity) {
  CAPTURE(n);
  CAPTURE(seed);
  CAPTURE(withGrad);
  CAPTURE(capacity);
  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  REQUIRE(ops.createContext(&ctx) == dctSuccess);
  auto grad = randomVector<T>(n, seed);
  auto residual = randomVector<T>(n, seed + 1);
  auto ref = referenceSelect<T, I>(withGrad ? grad.data() : nullptr, residual, static_cast<T>(tau), capacity);

  std::vector<I> idx(capacity + 1, I(~0));
  std::vector<T> val(capacity + 1, T(-7));
  SelectArgs args{withGrad ? grad.data() : nullptr, residual.data(), n,
                  sizeof(T) == 8 ? dctFloat64 : dctFloat32, static_cast<int>(sizeof(I)),
                  tau, capacity, idx.data(), val.data()};
  REQUIRE(ops.selectCompact(ctx, &args, nullptr) == dctSuccess);
  ops.destroyContext(ctx);

  REQUIRE(args.nnz == ref.indices.size());
  CHECK(args.selected == ref.selected);
  size_t nonFinite = 0;
  for (size_t j = 0; j < args.nnz; j++) {
    REQUIRE(idx[j] == ref.indices[j]);
    REQUIRE(sameBits(val[j], ref.values[j]));
    nonFinite += !std::isfinite(ref.values[j]);
  }
  CHECK(args.nonFinite == nonFinite);
  CHECK(idx[args.nnz] == I(~0));  // nothing written past nnz
  for (size_t i = 0; i < n; i++) REQUIRE(sameBits(residual[i], ref.residual[i]));
}

}  // namespace

TEST_CASE("select matches reference on odd sizes, fp32/fp64, uint32/uint64 indices") {
  for (size_t n : kOddSizes) {
    checkSelect<float, uint32_t>(n, 11, true, 1.5, n);
    checkSelect<float, uint32_t>(n, 12, false, 2.0, n);
    checkSelect<double, uint32_t>(n, 13, true, 1.0, n);
    checkSelect<float, uint64_t>(n, 14, true, 2.5, n);
    checkSelect<double, uint64_t>(n, 15, false, 0.5, n);
  }
}

TEST_CASE("select past capacity keeps the rest in the residual") {
  for (size_t n : kOddSizes) {
    checkSelect<float, uint32_t>(n, 21, true, 1.0, n / 10);
    checkSelect<float, uint32_t>(n, 22, true, 1.0, 0);
    checkSelect<double, uint64_t>(n, 23, true, 0.25, n / 3 + 1);
  }
}

TEST_CASE("select with a tiny tau takes every nonzero, never exact zeros") {
  const size_t n = 4099;
  std::vector<float> residual(n, 0.0f), grad(n, 0.0f);
  for (size_t i = 0; i < n; i += 3) grad[i] = 1e-30f;
  std::vector<uint32_t> idx(n);
  std::vector<float> val(n);
  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  REQUIRE(ops.createContext(&ctx) == dctSuccess);
  SelectArgs args{grad.data(), residual.data(), n, dctFloat32, 4, 1e-45, n, idx.data(), val.data()};
  REQUIRE(ops.selectCompact(ctx, &args, nullptr) == dctSuccess);
  ops.destroyContext(ctx);
  CHECK(args.nnz == (n + 2) / 3);
  for (size_t j = 0; j < args.nnz; j++) CHECK(idx[j] == 3 * j);
}

TEST_CASE("dense select writes the same selection densely") {
  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  REQUIRE(ops.createContext(&ctx) == dctSuccess);
  for (size_t n : kOddSizes) {
    for (bool withGrad : {true, false}) {
      CAPTURE(n);
      auto grad = randomVector<float>(n, 71), residual = randomVector<float>(n, 72);
      auto ref = referenceSelect<float, uint32_t>(withGrad ? grad.data() : nullptr, residual, 1.2f, n);
      std::vector<float> out(n, -5.0f), expected(n, 0.0f);
      for (size_t j = 0; j < ref.indices.size(); j++) expected[ref.indices[j]] = ref.values[j];
      SelectArgs args{withGrad ? grad.data() : nullptr, residual.data(), n, dctFloat32, 4, 1.2, n,
                      nullptr, out.data()};
      REQUIRE(ops.selectDense(ctx, &args, nullptr) == dctSuccess);
      CHECK(args.selected == ref.selected);
      CHECK(args.nnz == ref.selected);
      for (size_t i = 0; i < n; i++) {
        REQUIRE(sameBits(out[i], expected[i]));
        REQUIRE(sameBits(residual[i], ref.residual[i]));
      }
    }
  }
  ops.destroyContext(ctx);
}

TEST_CASE("select scratch shrinks after a spike, and only then") {
  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  REQUIRE(ops.createContext(&ctx) == dctSuccess);
  const size_t n = 1 << 20;
  std::vector<uint32_t> idx(n);
  std::vector<float> val(n);
  auto select = [&](double tau) {
    auto residual = randomVector<float>(n, 91, false);
    SelectArgs args{nullptr, residual.data(), n, dctFloat32, 4, tau, n, idx.data(), val.data()};
    REQUIRE(ops.selectCompact(ctx, &args, nullptr) == dctSuccess);
    return args.nnz;
  };
  // A steady selection of ~30% keeps its scratch: no churn.
  REQUIRE(select(1.0) > n / 4);
  const size_t steady = selectScratchBytes(ctx);
  CHECK(steady >= n / 4 * 8);
  for (int i = 0; i < 6; i++) select(1.0);
  CHECK(selectScratchBytes(ctx) == steady);
  // A spike taking everything grows it; it stays while the spike is among
  // the last 4 calls, and goes once 4 calls needed next to nothing.
  REQUIRE(select(1e-30) > n * 9 / 10);
  const size_t spike = selectScratchBytes(ctx);
  CHECK(spike >= n * 8 * 9 / 10);
  for (int i = 0; i < 3; i++) {
    CHECK(select(10.0) == 0);
    CHECK(selectScratchBytes(ctx) == spike);
  }
  CHECK(select(10.0) == 0);
  CHECK(selectScratchBytes(ctx) == 0);
  // And it grows back when needed, with the same result.
  CHECK(select(1.0) > n / 4);
  CHECK(selectScratchBytes(ctx) > 0);
  ops.destroyContext(ctx);
}
