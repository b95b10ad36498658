// Fused EF + select + compact (CPU twin) against the plain reference, with
// plain and streamed stores at every alignment, and its vector bodies one by
// one; its scratch shrinks after a spike.
#include <doctest/doctest.h>

#include "kernels/cpu_context.h"
#include "kernels/cpu_select_simd.h"
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

namespace {

// As the compressor runs it: the old residual read from one buffer, the new
// one written to another, `skew` elements past a 64-byte boundary (so the
// streamed path's scalar head runs at every length).
template <typename T>
void checkOutOfPlace(size_t n, size_t skew, bool stream, bool withGrad) {
  CAPTURE(n);
  CAPTURE(skew);
  CAPTURE(stream);
  CAPTURE(withGrad);
  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  REQUIRE(ops.createContext(&ctx) == dctSuccess);
  auto grad = randomVector<T>(n, 31 + skew);
  auto old = randomVector<T>(n, 41 + skew);
  auto ref = referenceSelect<T, uint32_t>(withGrad ? grad.data() : nullptr, old, T(1.5), n);
  const size_t lane = 64 / sizeof(T);
  std::vector<T> storage(n + 3 * lane, T(-9));  // a guard lane on either side
  T* out = storage.data() + lane - reinterpret_cast<uintptr_t>(storage.data()) % 64 / sizeof(T) + skew;
  std::vector<uint32_t> idx(n + 1);
  std::vector<T> val(n + 1);
  SelectArgs args{withGrad ? grad.data() : nullptr, out, n, sizeof(T) == 8 ? dctFloat64 : dctFloat32, 4, 1.5, n,
                  idx.data(), val.data()};
  args.residualIn = old.data();
  args.stream = stream;
  REQUIRE(ops.selectCompact(ctx, &args, nullptr) == dctSuccess);
  ops.destroyContext(ctx);
  REQUIRE(args.nnz == ref.indices.size());
  for (size_t j = 0; j < args.nnz; j++) {
    REQUIRE(idx[j] == ref.indices[j]);
    REQUIRE(sameBits(val[j], ref.values[j]));
  }
  for (size_t i = 0; i < n; i++) REQUIRE(sameBits(out[i], ref.residual[i]));
  CHECK(sameBits(out[-1], T(-9)));  // nothing written around the residual
  CHECK(sameBits(out[n], T(-9)));
}

// One vector body on [0, n) of the reference's input, appending to m = 0.
template <typename Body>
void checkBody(const char* name, Body&& body, size_t n) {
  CAPTURE(name);
  CAPTURE(n);
  auto grad = randomVector<float>(n, 51), residual = randomVector<float>(n, 52);
  auto ref = referenceSelect<float, uint32_t>(grad.data(), residual, 1.25f, n);
  std::vector<uint32_t> idx(n);
  std::vector<float> val(n);
  size_t done = 0;
  const size_t m = body(grad.data(), residual.data(), residual.data(), n, idx.data(), val.data(), done);
  REQUIRE(done <= n);
  REQUIRE(n - done < 16);  // the bodies leave at most one step's tail
  size_t hits = 0;
  while (hits < ref.indices.size() && ref.indices[hits] < done) hits++;
  REQUIRE(m == hits);
  for (size_t j = 0; j < m; j++) {
    REQUIRE(idx[j] == ref.indices[j]);
    REQUIRE(sameBits(val[j], ref.values[j]));
  }
  for (size_t i = 0; i < done; i++) REQUIRE(sameBits(residual[i], ref.residual[i]));
}

}  // namespace

TEST_CASE("select out of place, plain and streamed, at every alignment") {
  for (size_t n : {size_t(0), size_t(1), size_t(3), size_t(17), size_t(33), size_t(4099), size_t(100003)})
    for (size_t skew = 0; skew < 9; skew++)
      for (bool stream : {false, true}) {
        checkOutOfPlace<float>(n, skew, stream, skew % 2 == 0);
        checkOutOfPlace<double>(n, skew, stream, skew % 2 == 1);
      }
}

#if DCT_SELECT_SIMD
TEST_CASE("the SSE2 and AVX2 bodies select as the reference does (NaN and Inf taken)") {
  for (size_t n : {size_t(0), size_t(7), size_t(8), size_t(15), size_t(16), size_t(1000003)}) {
    checkBody("sse2", [](const float* g, const float* in, float* r, size_t n, uint32_t* idx, float* val, size_t& done) {
      return selectSse2<uint32_t, true, false>(g, in, r, 0, n, 1.25f, idx, val, 0, done);
    }, n);
    if (!cpuHasAvx2()) continue;
    checkBody("avx2", [](const float* g, const float* in, float* r, size_t n, uint32_t* idx, float* val, size_t& done) {
      return selectAvx2<uint32_t, true, false>(g, in, r, 0, n, 1.25f, idx, val, 0, done);
    }, n);
  }
}
#endif

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
