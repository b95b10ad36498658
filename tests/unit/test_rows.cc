// DCT-MP row kernels of the CPU twin against the plain references: per-row
// top-K and threshold selection, offsets, every wire mask format there and
// back, values in a narrower wire type, and malformed wire masks rejected
// with nothing written.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

#include "../common/half_reference.h"
#include "../common/row_reference.h"
#include "base/half_types.h"
#include "kernels/kernels.h"
#include "reference.h"

using namespace dct;
using namespace dct::test;

namespace {

struct Twin {
  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  Twin() { REQUIRE(ops.createContext(&ctx) == dctSuccess); }
  ~Twin() { ops.destroyContext(ctx); }
};

// Rows with heavy ties (a few magnitudes, -0 and +0), or random normals with
// NaN/Inf, and every fifth row mostly non-finite.
template <typename T>
std::vector<T> testRows(size_t rows, size_t d, bool ties, uint64_t seed) {
  std::vector<T> v = randomVector<T>(rows * d, seed);
  std::mt19937_64 rng(seed + 7);
  const T levels[] = {T(0), T(-0.0), T(1), T(-1), T(2), T(-2)};
  for (size_t i = 0; i < v.size(); i++) {
    if (ties) v[i] = levels[rng() % 6];
    if ((i / d) % 5 == 4 && rng() % 3 == 0) v[i] = rng() % 2 ? std::numeric_limits<T>::quiet_NaN()
                                                              : -std::numeric_limits<T>::infinity();
  }
  return v;
}

bool bit(const std::vector<uint32_t>& mask, size_t r, size_t d, size_t j) {
  return mask[r * maskWords(d) + j / 32] >> (j % 32) & 1u;
}

std::vector<int> formatsFor(size_t d) {
  std::vector<int> f = {0, 4};
  if (d <= 256) f.push_back(1);
  if (d <= 65536) f.push_back(2);
  return f;
}

template <typename T>
void roundTrip(Twin& t, const std::vector<T>& rows, size_t R, size_t d, const std::vector<uint32_t>& mask,
               const std::vector<uint32_t>& counts, int format) {
  CAPTURE(format);
  const dctDataType_t dtype = sizeof(T) == 8 ? dctFloat64 : dctFloat32;
  std::vector<uint64_t> offsets(R + 1);
  RowOffsetsArgs off{counts.data(), 4, 0, R, offsets.data()};
  REQUIRE(t.ops.rowOffsets(t.ctx, &off, nullptr) == dctSuccess);
  const uint64_t E = off.total;
  std::vector<uint8_t> wireMask(format == 0 ? R * ((d + 7) / 8) + 1 : E * format + 1);
  std::vector<uint16_t> wireCounts(R);
  std::vector<T> values(E + 1);
  RowWireArgs pack{const_cast<T*>(rows.data()), R, d, dtype, const_cast<uint32_t*>(mask.data()), offsets.data(), 0,
                   format, wireMask.data(), wireCounts.data(), 2, values.data()};
  REQUIRE(t.ops.rowPack(t.ctx, &pack, nullptr) == dctSuccess);
  // The counts as sent give the same offsets back.
  std::vector<uint64_t> again(R + 1);
  RowOffsetsArgs off2{wireCounts.data(), 2, 0, R, again.data()};
  REQUIRE(t.ops.rowOffsets(t.ctx, &off2, nullptr) == dctSuccess);
  REQUIRE(again == offsets);

  std::vector<T> out(R * d, T(7));
  std::vector<uint32_t> decoded(R * maskWords(d), 0xdeadbeef);
  RowWireArgs unpack{out.data(), R, d, dtype, decoded.data(), offsets.data(), 0, format, wireMask.data(), nullptr, 0,
                     values.data()};
  REQUIRE(t.ops.rowUnpack(t.ctx, &unpack, nullptr) == dctSuccess);
  REQUIRE(decoded == mask);
  for (size_t r = 0; r < R; r++)
    for (size_t j = 0; j < d; j++) REQUIRE(sameBits(out[r * d + j], bit(mask, r, d, j) ? rows[r * d + j] : T(0)));
}

template <typename T>
void checkSelection(size_t R, size_t d, size_t k, bool ties, uint64_t seed) {
  CAPTURE(R);
  CAPTURE(d);
  CAPTURE(k);
  CAPTURE(ties);
  Twin t;
  const auto rows = testRows<T>(R, d, ties, seed);
  std::vector<uint32_t> mask(R * maskWords(d) + 1), counts(R + 1);
  RowSelectArgs sel{rows.data(), R, d, sizeof(T) == 8 ? dctFloat64 : dctFloat32, k, 0.5, mask.data(), counts.data()};
  REQUIRE(t.ops.rowSelect(t.ctx, &sel, nullptr) == dctSuccess);
  size_t nonFinite = 0;
  for (size_t r = 0; r < R; r++) {
    const auto keep = k ? referenceTopK(&rows[r * d], d, k) : referenceThreshold(&rows[r * d], d, 0.5);
    size_t kept = 0;
    for (size_t j = 0; j < d; j++) {
      REQUIRE(bit(mask, r, d, j) == keep[j]);
      kept += keep[j];
      nonFinite += keep[j] && !std::isfinite(rows[r * d + j]);
    }
    REQUIRE(counts[r] == kept);
    for (size_t j = d; j < maskWords(d) * 32; j++) REQUIRE(!bit(mask, r, d, j));
  }
  REQUIRE(sel.nonFinite == nonFinite);
  mask.pop_back();
  counts.pop_back();
  for (int format : formatsFor(d)) roundTrip(t, rows, R, d, mask, counts, format);
}

}  // namespace

TEST_CASE("row top-K and threshold selection match the sort-based reference, every wire format round-trips") {
  uint64_t seed = 500;
  for (size_t d : {1, 3, 7, 64, 129, 1000})
    for (size_t R : {0, 1, 5, 33})
      for (bool ties : {false, true}) {
        const size_t k5 = static_cast<size_t>(std::ceil(0.05 * d));
        for (size_t k : {size_t(1), k5, d, d + 3, size_t(0)}) {
          checkSelection<float>(R, d, k, ties, seed++);
          checkSelection<double>(R, d, k, ties, seed++);
        }
      }
}

TEST_CASE("whole rows travel as plain values") {
  Twin t;
  const size_t R = 5, d = 9;
  const auto rows = testRows<float>(R, d, false, 3);
  std::vector<uint64_t> offsets(R + 1);
  RowOffsetsArgs off{nullptr, 0, d, R, offsets.data()};
  REQUIRE(t.ops.rowOffsets(t.ctx, &off, nullptr) == dctSuccess);
  REQUIRE(off.total == R * d);
  std::vector<float> values(R * d), out(R * d, 3.0f);
  RowWireArgs a{const_cast<float*>(rows.data()), R, d, dctFloat32, nullptr, offsets.data(), 0, -1, nullptr, nullptr, 0,
                values.data()};
  REQUIRE(t.ops.rowPack(t.ctx, &a, nullptr) == dctSuccess);
  a.rows = out.data();
  REQUIRE(t.ops.rowUnpack(t.ctx, &a, nullptr) == dctSuccess);
  for (size_t i = 0; i < R * d; i++) REQUIRE(sameBits(out[i], rows[i]));
}

TEST_CASE("malformed wire masks are rejected and nothing is written") {
  Twin t;
  const size_t R = 2, d = 20;
  std::vector<uint64_t> offsets = {0, 2, 4};
  std::vector<float> values = {1, 2, 3, 4}, out(R * d, 9.0f);
  std::vector<uint32_t> mask(R * maskWords(d));
  auto unpack = [&](int format, void* wire) {
    RowWireArgs a{out.data(), R, d, dctFloat32, mask.data(), offsets.data(), 0, format, wire, nullptr, 0, values.data()};
    return t.ops.rowUnpack(t.ctx, &a, nullptr);
  };
  uint8_t good[] = {1, 5, 0, 19};
  REQUIRE(unpack(1, good) == dctSuccess);
  std::fill(out.begin(), out.end(), 9.0f);
  uint8_t descending[] = {1, 5, 7, 3}, repeated[] = {1, 1, 0, 2}, outside[] = {1, 5, 0, 20};
  for (uint8_t* wire : {descending, repeated, outside}) REQUIRE(unpack(1, wire) == dctInternalError);
  uint16_t wide[] = {1, 5, 2, 300};
  REQUIRE(unpack(2, wide) == dctInternalError);
  uint8_t bitmapCount[] = {0x03, 0, 0, 0x07, 0, 0}, bitmapTail[] = {0x03, 0, 0, 0x01, 0, 0x10};
  REQUIRE(unpack(0, bitmapCount) == dctInternalError);  // 3 bits for 2 entries
  REQUIRE(unpack(0, bitmapTail) == dctInternalError);   // column 20 of 20
  for (float x : out) REQUIRE(x == 9.0f);
}

namespace {

// x as wire type w (a 16-bit or fp32 pattern), from the independent
// conversions of half_reference.h; fp64 reaches the half types through fp32.
template <typename T>
uint64_t refWireBits(T x, dctDataType_t w) {
  const float f = static_cast<float>(x);
  if (w == dctFloat16) return dcttest::refFloatToHalf(f);
  if (w == dctBFloat16) return dcttest::refFloatToBf16(f);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}
double refWiden(uint64_t bits, dctDataType_t w) {
  if (w == dctFloat16) return dcttest::refHalfToFloat(static_cast<uint16_t>(bits));
  if (w == dctBFloat16) return dcttest::refBf16ToFloat(static_cast<uint16_t>(bits));
  float f;
  const uint32_t b = static_cast<uint32_t>(bits);
  std::memcpy(&f, &b, 4);
  return f;
}
uint64_t readBits(const std::vector<uint8_t>& v, size_t i, size_t width) {
  uint64_t bits = 0;
  std::memcpy(&bits, v.data() + i * width, width);
  return bits;
}
// NaN matches NaN of the same sign (x86 narrows fp64 NaN payloads its own way).
bool sameValue(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) && std::signbit(a) == std::signbit(b);
  return sameBits(a, b);
}

template <typename T>
void checkWireType(dctDataType_t w, int format, uint64_t seed) {
  CAPTURE(w);
  CAPTURE(format);
  Twin t;
  const size_t R = 7, d = format == 1 ? 37 : 300, ws = dtypeSize(w);
  std::vector<T> rows = testRows<T>(R, d, false, seed);
  rows[3] = T(70000.0);   // past fp16's range: Inf on an fp16 wire
  rows[4] = T(-1.0e-9);   // below fp16's subnormals: -0
  rows[5] = T(65519.0);   // rounds down to 65504 in fp16
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> mask(R * maskWords(d), 0), counts(R, 0);
  for (size_t r = 0; r < R; r++)
    for (size_t j = 0; j < d; j++)
      if (format < 0 || j < 6 || rng() % 4 == 0) mask[r * maskWords(d) + j / 32] |= 1u << (j % 32), counts[r]++;
  std::vector<uint64_t> offsets(R + 1);
  RowOffsetsArgs off{counts.data(), 4, 0, R, offsets.data()};
  REQUIRE(t.ops.rowOffsets(t.ctx, &off, nullptr) == dctSuccess);
  const dctDataType_t dtype = sizeof(T) == 8 ? dctFloat64 : dctFloat32;
  std::vector<uint8_t> wireMask(R * d * 4 + 8), values(off.total * ws + 8);
  uint32_t* maskIn = format < 0 ? nullptr : mask.data();
  RowWireArgs a{rows.data(), R, d, dtype, maskIn, offsets.data(), 0, format, wireMask.data(), nullptr, 0,
                values.data(), w};
  REQUIRE(t.ops.rowPack(t.ctx, &a, nullptr) == dctSuccess);
  std::vector<T> out(R * d, T(5));
  std::vector<uint32_t> decoded(mask.size());
  a.rows = out.data();
  if (maskIn) a.mask = decoded.data();
  REQUIRE(t.ops.rowUnpack(t.ctx, &a, nullptr) == dctSuccess);
  size_t m = 0;
  for (size_t r = 0; r < R; r++)
    for (size_t j = 0; j < d; j++) {
      const T x = rows[r * d + j];
      if (!bit(mask, r, d, j)) {
        REQUIRE(sameBits(out[r * d + j], T(0)));
        continue;
      }
      const uint64_t expected = refWireBits(x, w), sent = readBits(values, m++, ws);
      if (w == dctFloat32) REQUIRE(sameValue(refWiden(sent, w), refWiden(expected, w)));
      else REQUIRE(sent == expected);
      REQUIRE(sameValue(static_cast<double>(out[r * d + j]), refWiden(expected, w)));
    }
  CHECK(std::isinf(static_cast<double>(out[3])) == (w == dctFloat16 && bit(mask, 0, d, 3)));
}

}  // namespace

TEST_CASE("values travel in a narrower wire type: rounded by the pack, widened exactly by the unpack") {
  uint64_t seed = 900;
  for (int format : {-1, 0, 1, 2}) {
    for (dctDataType_t w : {dctFloat16, dctBFloat16}) checkWireType<float>(w, format, seed++);
    for (dctDataType_t w : {dctFloat32, dctFloat16, dctBFloat16}) checkWireType<double>(w, format, seed++);
  }
  Twin t;  // a wire type wider than the rows is refused, nothing written
  std::vector<float> rows(4, 1.0f), values(4, 9.0f);
  std::vector<uint64_t> offsets = {0, 4};
  RowWireArgs wider{rows.data(), 1, 4, dctFloat32, nullptr, offsets.data(), 0, -1, nullptr, nullptr, 0,
                    values.data(), dctFloat64};
  REQUIRE(t.ops.rowPack(t.ctx, &wider, nullptr) == dctNotSupported);
  for (float x : values) REQUIRE(x == 9.0f);
}
