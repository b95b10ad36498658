// fp16/bf16: the conversions (src/base/half_types.h) against an
// independent reference (tests/common/half_reference.h), and the CPU twin's
// mixed-type kernels (add, convert, select, scatter-add) against plain loops
// written with that reference.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../common/half_reference.h"
#include "base/dtype.h"
#include "base/half_types.h"
#include "kernels/kernels.h"
#include "reference.h"

using namespace dct;
using namespace dcttest;

namespace {

// Reference loads and rounding stores, by dctDataType_t, on raw elements.
double refLoad(dctDataType_t t, const void* p, size_t i) {
  switch (t) {
    case dctFloat64: return static_cast<const double*>(p)[i];
    case dctFloat16: return refHalfToFloat(static_cast<const uint16_t*>(p)[i]);
    case dctBFloat16: return refBf16ToFloat(static_cast<const uint16_t*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

// Rounds w (already in the arithmetic type) to t's bits; halves via fp32.
void refStore(dctDataType_t t, double w, void* p, size_t i) {
  switch (t) {
    case dctFloat64: static_cast<double*>(p)[i] = w; break;
    case dctFloat16: static_cast<uint16_t*>(p)[i] = refFloatToHalf(static_cast<float>(w)); break;
    case dctBFloat16: static_cast<uint16_t*>(p)[i] = refFloatToBf16(static_cast<float>(w)); break;
    default: static_cast<float*>(p)[i] = static_cast<float>(w);
  }
}

double refMaxFinite(dctDataType_t t) {
  switch (t) {
    case dctFloat64: return std::numeric_limits<double>::max();
    case dctFloat16: return 65504.0;
    case dctBFloat16: return refBf16ToFloat(0x7f7f);
    default: return std::numeric_limits<float>::max();
  }
}

// Normal values (with zeros, NaN, Inf, a huge and a tiny one) as type t.
std::vector<char> randomOf(dctDataType_t t, size_t n, uint64_t seed) {
  auto v = dct::test::randomVector<double>(n, seed);
  if (n > 5) v[n / 2] = 1.0e6, v[n / 3] = 3.0e-7;  // overflows fp16; subnormal in fp16
  std::vector<char> out(n * dtypeSize(t));
  for (size_t i = 0; i < n; i++) refStore(t, v[i], out.data(), i);
  return out;
}

bool sameElement(dctDataType_t t, const void* a, const void* b, size_t i) {
  const size_t s = dtypeSize(t);
  return std::memcmp(static_cast<const char*>(a) + i * s, static_cast<const char*>(b) + i * s, s) == 0;
}

constexpr dctDataType_t kTypes[] = {dctFloat32, dctFloat64, dctFloat16, dctBFloat16};

struct Ctx {
  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  Ctx() { REQUIRE(ops.createContext(&ctx) == dctSuccess); }
  ~Ctx() { ops.destroyContext(ctx); }
};

// Floats that probe every rounding case: all half values and the midpoints
// between neighbours (+-1 ulp), then random bit patterns of every exponent.
std::vector<float> probeFloats(bool bf16) {
  std::vector<float> f;
  for (uint32_t b = 0; b < 0x10000; b++) {
    const float lo = bf16 ? refBf16ToFloat(uint16_t(b)) : refHalfToFloat(uint16_t(b));
    const float hi = bf16 ? refBf16ToFloat(uint16_t(b + 1)) : refHalfToFloat(uint16_t(b + 1));
    f.push_back(lo);
    if (!std::isfinite(lo) || !std::isfinite(hi) || std::signbit(lo) != std::signbit(hi)) continue;
    const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);
    f.insert(f.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), std::nextafter(mid, -INFINITY)});
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; i++) {
    uint32_t bits = rng();
    float x;
    std::memcpy(&x, &bits, sizeof(x));
    f.push_back(x);
  }
  f.insert(f.end(), {65504.0f, 65519.996f, 65520.0f, -65520.0f, 5.9604645e-8f, 2.9802322e-8f, 2.9802326e-8f,
                     std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(), -0.0f});
  return f;
}

}  // namespace

TEST_CASE("half <-> float conversions match the reference on every case") {
  for (uint32_t b = 0; b < 0x10000; b++) {
    const float h = halfBitsToFloat(uint16_t(b)), r = refHalfToFloat(uint16_t(b));
    REQUIRE((std::isnan(h) ? std::isnan(r) : std::memcmp(&h, &r, 4) == 0));
    const float g = bf16BitsToFloat(uint16_t(b)), s = refBf16ToFloat(uint16_t(b));
    REQUIRE((std::isnan(g) ? std::isnan(s) : std::memcmp(&g, &s, 4) == 0));
  }
  for (float f : probeFloats(false)) {
    CAPTURE(f);
    REQUIRE(floatToHalfBits(f) == refFloatToHalf(f));
  }
  for (float f : probeFloats(true)) {
    CAPTURE(f);
    REQUIRE(floatToBf16Bits(f) == refFloatToBf16(f));
  }
  CHECK(floatToHalfBits(std::nanf("")) == 0x7e00);
  CHECK(floatToHalfBits(-std::nanf("")) == 0xfe00);
  CHECK(floatToBf16Bits(std::nanf("")) == 0x7fc0);
  CHECK(floatToHalfBits(65520.0f) == 0x7c00);  // overflow rounds to Inf
  CHECK(floatToHalfBits(2.9802322e-8f) == 0);  // 2^-25: the tie goes to the even zero
}

TEST_CASE("storeSaturated clamps finite values only") {
  CHECK(storeSaturated<Half>(1.0e6f).bits == 0x7bff);
  CHECK(storeSaturated<Half>(-1.0e6f).bits == 0xfbff);
  CHECK(storeSaturated<Half>(INFINITY).bits == 0x7c00);
  CHECK(storeSaturated<Half>(NAN).bits == 0x7e00);
  CHECK(storeSaturated<BFloat16>(std::numeric_limits<float>::max()).bits == 0x7f7f);
  CHECK(storeSaturated<float>(1.0e300) == std::numeric_limits<float>::max());
  CHECK(std::isinf(storeSaturated<float>(-INFINITY)));
}

TEST_CASE("convert: every type pair, with and without a factor") {
  Ctx c;
  for (dctDataType_t from : kTypes)
    for (dctDataType_t to : kTypes)
      for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(1000003)})
        for (double factor : {1.0, 1.0 / 3.0}) {
          CAPTURE(from);
          CAPTURE(to);
          CAPTURE(n);
          const auto src = randomOf(from, n, 11 + n);
          std::vector<char> dst(n * dtypeSize(to) + 1), ref(dst.size());
          const bool wide = from == dctFloat64 || to == dctFloat64;
          for (size_t i = 0; i < n; i++) {
            const double x = refLoad(from, src.data(), i);
            refStore(to, wide ? x * factor : static_cast<double>(static_cast<float>(x) * static_cast<float>(factor)),
                     ref.data(), i);
          }
          REQUIRE(c.ops.convert(c.ctx, dst.data(), to, src.data(), from, n, factor, nullptr) == dctSuccess);
          for (size_t i = 0; i < n; i++) REQUIRE(sameElement(to, dst.data(), ref.data(), i));
        }
}

TEST_CASE("add widens a half gradient exactly") {
  Ctx c;
  for (dctDataType_t g : {dctFloat16, dctBFloat16, dctFloat32})
    for (size_t n : dct::test::kOddSizes) {
      auto a = dct::test::randomVector<float>(n, 3);
      const auto b = randomOf(g, n, 4);
      std::vector<float> out(n), ref(n);
      for (size_t i = 0; i < n; i++) ref[i] = a[i] + static_cast<float>(refLoad(g, b.data(), i));
      REQUIRE(c.ops.add(c.ctx, out.data(), a.data(), b.data(), n, dctFloat32, g, nullptr) == dctSuccess);
      for (size_t i = 0; i < n; i++) REQUIRE(dct::test::sameBits(out[i], ref[i]));
    }
}

// acc = residual + grad (fp32); selected entries go out rounded to the wire
// type (finite values saturate), their rounding error stays behind.
TEST_CASE("select with half gradients and half wire values keeps every rounding error") {
  Ctx c;
  for (dctDataType_t g : {dctFloat32, dctFloat16, dctBFloat16})
    for (dctDataType_t v : {dctFloat32, dctFloat16, dctBFloat16})
      for (size_t n : {size_t(1), size_t(7), size_t(11), size_t(1000003)})
        for (bool dense : {false, true})
          for (double room : {1.0, 0.5}) {
            CAPTURE(g);
            CAPTURE(v);
            CAPTURE(n);
            CAPTURE(dense);
            CAPTURE(room);
            const auto grad = randomOf(g, n, 21 + n);
            const auto in = dct::test::randomVector<float>(n, 22 + n);
            const double tau = 1.5;
            std::vector<float> acc(n), residual(n), refResidual(n);
            size_t selected = 0;
            for (size_t i = 0; i < n; i++) {
              acc[i] = in[i] + static_cast<float>(refLoad(g, grad.data(), i));
              selected += !(std::fabs(acc[i]) < tau);
            }
            const size_t capacity = dense ? n : static_cast<size_t>(room * selected);
            std::vector<uint32_t> idx(n), refIdx;
            std::vector<char> val(n * dtypeSize(v)), refVal(n * dtypeSize(v));
            size_t written = 0;
            for (size_t i = 0; i < n; i++) {
              refResidual[i] = acc[i];
              const bool take = !(std::fabs(acc[i]) < tau);
              if (!take || (!dense && written == capacity)) {
                if (dense) refStore(v, 0.0, refVal.data(), i);
                continue;
              }
              const double clamped = std::isfinite(acc[i]) ? std::fmax(-refMaxFinite(v), std::fmin(refMaxFinite(v), acc[i])) : acc[i];
              const size_t at = dense ? i : written;
              refStore(v, clamped, refVal.data(), at);
              const float error = acc[i] - static_cast<float>(refLoad(v, refVal.data(), at));
              refResidual[i] = std::isnan(error) ? 0.0f : error;
              refIdx.push_back(static_cast<uint32_t>(i));
              written++;
            }
            SelectArgs args{grad.data(), residual.data(), n, dctFloat32, 4, tau, capacity, idx.data(), val.data()};
            args.residualIn = in.data();
            args.gradType = g;
            args.valueType = v;
            REQUIRE((dense ? c.ops.selectDense(c.ctx, &args, nullptr) : c.ops.selectCompact(c.ctx, &args, nullptr)) ==
                    dctSuccess);
            CHECK(args.selected == selected);
            REQUIRE(args.nnz == (dense ? selected : written));
            for (size_t j = 0; j < (dense ? n : written); j++) {
              if (!dense) REQUIRE(idx[j] == refIdx[j]);
              REQUIRE(sameElement(v, val.data(), refVal.data(), j));
            }
            for (size_t i = 0; i < n; i++) {
              REQUIRE((std::isnan(refResidual[i]) ? std::isnan(residual[i])
                                                  : dct::test::sameBits(residual[i], refResidual[i])));
              // Nothing lost: what went out plus what stayed is acc, exactly.
              if (std::isfinite(acc[i]) && std::fabs(acc[i]) < 1.0e30f && residual[i] != acc[i]) {
                const size_t at = dense ? i : static_cast<size_t>(std::lower_bound(refIdx.begin(), refIdx.end(), i) - refIdx.begin());
                REQUIRE(residual[i] + static_cast<float>(refLoad(v, val.data(), at)) == acc[i]);
              }
            }
          }
}

TEST_CASE("scatter-add of values no wider than the dense type, one rounding per add") {
  Ctx c;
  for (dctDataType_t d : kTypes)
    for (dctDataType_t v : kTypes)
      for (size_t n : {size_t(1), size_t(11), size_t(100003)})
        for (bool sorted : {true, false}) {
          CAPTURE(d);
          CAPTURE(v);
          CAPTURE(n);
          const size_t nnz = n / 2 + 1;
          const auto idx = dct::test::randomIndices<uint32_t>(n, sorted ? std::min(nnz, n) : nnz, sorted, 5 + n);
          const auto val = randomOf(v, idx.size(), 6 + n);
          auto dense = randomOf(d, n, 7 + n);
          auto ref = dense;
          for (size_t j = 0; j < idx.size(); j++) {
            const double sum = d == dctFloat64 ? refLoad(d, ref.data(), idx[j]) + refLoad(v, val.data(), j)
                                               : static_cast<double>(static_cast<float>(refLoad(d, ref.data(), idx[j])) +
                                                                     static_cast<float>(refLoad(v, val.data(), j)));
            refStore(d, sum, ref.data(), idx[j]);
          }
          ScatterArgs args{dense.data(), n, d, 4, idx.data(), val.data(), idx.size(), sorted};
          args.valueType = v;
          if (dtypeSize(v) > dtypeSize(d)) {  // never sent: refused, as by the CUDA twin
            CHECK(c.ops.scatterAdd(c.ctx, &args, nullptr) == dctNotSupported);
            continue;
          }
          REQUIRE(c.ops.scatterAdd(c.ctx, &args, nullptr) == dctSuccess);
          for (size_t i = 0; i < n; i++) REQUIRE(sameElement(d, dense.data(), ref.data(), i));
        }
}
