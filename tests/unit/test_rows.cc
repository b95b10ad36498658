// DCT-MP row kernels of the CPU twin against the plain references: per-row
// top-K and threshold selection (every body: plain, SSE2, AVX2), offsets,
// every wire mask format there and back, values in a narrower wire type,
// and malformed wire masks rejected with nothing written.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>

#include "../common/half_reference.h"
#include "../common/row_reference.h"
#include "base/half_types.h"
#include "kernels/cpu_row_select.h"
#include "kernels/kernels.h"
#include "kernels/row_keys.h"
#include "cpu_twin.h"
#include "reference.h"

using namespace dct;
using namespace dct::test;

namespace {

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

namespace {

// Row-select bodies against the references, each body this CPU runs: rows
// built from bit patterns, so that every dtype gets the same edge cases.
template <typename T>
T fromBits(uint64_t bits) {
  T x;
  const RowKey<T> b = static_cast<RowKey<T>>(bits);
  std::memcpy(&x, &b, sizeof(T));
  return x;
}
template <typename T>
T fromFloat(float f) {
  if constexpr (std::is_same_v<T, Half>) return Half{dcttest::refFloatToHalf(f)};
  else if constexpr (std::is_same_v<T, BFloat16>) return BFloat16{dcttest::refFloatToBf16(f)};
  else return static_cast<T>(f);
}
// x as the reference ranks it (fp16/bf16 widened by the independent conversions).
template <typename T>
auto refValue(T x) {
  if constexpr (std::is_same_v<T, Half>) return dcttest::refHalfToFloat(x.bits);
  else if constexpr (std::is_same_v<T, BFloat16>) return dcttest::refBf16ToFloat(x.bits);
  else return x;
}

// Row kinds by r % 11: random magnitudes; ties on a few levels (+-0, 1, 2,
// the smallest subnormal, the largest finite); all zeros; k-1, k and k+1
// non-finite; k non-finite and largest-finite ties; k-1 non-finite and
// largest-finite ties; ties among the three smallest magnitudes and three
// next to 1; two thirds non-finite; one magnitude throughout. Non-finite:
// +-Inf and NaNs of several payloads, both signs.
template <typename T>
std::vector<T> edgeRows(size_t R, size_t d, size_t k, uint64_t seed) {
  using Key = RowKey<T>;
  const Key inf = kInfKey<T>, sign = Key(1) << (8 * sizeof(T) - 1), maxFinite = inf - 1;
  const Key nonFinite[] = {inf, Key(inf | sign), Key(inf + 1), Key(sign - 1), Key(inf + (sign - inf) / 2),
                           Key(~Key(0))};
  const Key one = rowKey(fromFloat<T>(1.0f)), two = rowKey(fromFloat<T>(2.0f));
  const Key levels[] = {0, one, two, 1, maxFinite};
  std::mt19937_64 rng(seed);
  auto withSign = [&](Key key) { return fromBits<T>(rng() % 2 ? key | sign : key); };
  auto plant = [&](T* row, size_t count, Key key) {  // count entries of key at distinct random columns
    for (size_t placed = 0; placed < std::min(count, d);) {
      const size_t j = rng() % d;
      if (rowKey(row[j]) == key) continue;
      row[j] = key == inf ? fromBits<T>(nonFinite[rng() % 6]) : withSign(key);
      placed++;
    }
  };
  std::vector<T> v(R * d);
  for (size_t r = 0; r < R; r++) {
    T* row = &v[r * d];
    const size_t kind = r % 11;
    for (size_t j = 0; j < d; j++) {
      Key key = static_cast<Key>(rng() % maxFinite);
      if (kind == 1 || kind == 8) key = levels[rng() % (kind == 1 ? 5 : 2)] + (kind == 8 ? rng() % 3 : 0);
      if (kind == 2) key = 0;
      if (kind == 10) key = two;
      row[j] = withSign(key);
      if (kind == 9 && rng() % 3) row[j] = fromBits<T>(nonFinite[rng() % 6]);
    }
    const size_t kk = std::max<size_t>(k, 2);  // threshold rows (k == 0) as if k were 2
    if (kind >= 3 && kind <= 5) plant(row, kk + kind - 4, inf);
    if (kind == 6 || kind == 7) {
      plant(row, 3, maxFinite);
      plant(row, kind == 6 ? kk : kk - 1, inf);
    }
  }
  return v;
}

template <typename T>
void checkBodies(Twin& t, size_t R, size_t d, size_t k, double tau, uint64_t seed) {
  CAPTURE(sizeof(T));
  CAPTURE(R);
  CAPTURE(d);
  CAPTURE(k);
  CAPTURE(tau);
  const std::vector<T> rows = edgeRows<T>(R, d, k, seed);
  const size_t words = maskWords(d);
  std::vector<uint32_t> mask(R * words, 0), counts(R, 0);
  size_t nonFinite = 0;
  for (size_t r = 0; r < R; r++) {
    std::vector<decltype(refValue(T{}))> x(d);
    for (size_t j = 0; j < d; j++) x[j] = refValue(rows[r * d + j]);
    const auto keep = k ? referenceTopK(x.data(), d, k) : referenceThreshold(x.data(), d, tau);
    for (size_t j = 0; j < d; j++) {
      if (!keep[j]) continue;
      mask[r * words + j / 32] |= 1u << (j % 32);
      counts[r]++;
      nonFinite += !std::isfinite(x[j]);
    }
  }
  for (RowBody body : {RowBody::kScalar, RowBody::kSse2, RowBody::kAvx2}) {
    CAPTURE(int(body));
    std::vector<uint32_t> gotMask(R * words + 1, 0xdeadbeef), gotCounts(R + 1, 0xdeadbeef);
    RowSelectArgs sel{rows.data(), R, d, Value<T>::type, k, tau, gotMask.data(), gotCounts.data()};
    const dctResult_t res = cpuRowSelectWith(t.ctx, &sel, body);
    if (res == dctNotSupported && body != bestRowBody()) continue;  // this CPU lacks it
    REQUIRE(res == dctSuccess);
    REQUIRE(gotMask.back() == 0xdeadbeef);  // nothing past the last row
    REQUIRE(gotCounts.back() == 0xdeadbeef);
    gotMask.pop_back();
    gotCounts.pop_back();
    REQUIRE(gotMask == mask);
    REQUIRE(gotCounts == counts);
    REQUIRE(sel.nonFinite == nonFinite);
  }
}

template <typename T>
void checkEveryShape(uint64_t& seed) {
  Twin t;
  for (size_t d : {1, 2, 3, 7, 8, 9, 31, 32, 33, 63, 64, 65, 129, 257, 1000})
    for (size_t R : {0, 1, 5, 7, 9, 33}) {
      std::vector<size_t> ks = {1, 2, 3, 4, size_t(std::ceil(0.05 * d)), 8, 13, 16, 31, 32, 33, 48, 64, 65,
                                d - 1, d, d + 3};
      std::sort(ks.begin(), ks.end());
      ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
      for (size_t k : ks)
        if (k >= 1 && k <= d + 3) checkBodies<T>(t, R, d, k, 0, seed++);
      const double inf = std::numeric_limits<double>::infinity();
      for (double tau : {1.0, 0.0, -1.0, 2.0 / 3.0, std::nan(""), inf, 1e-300}) checkBodies<T>(t, R, d, 0, tau, seed++);
    }
}

}  // namespace

TEST_CASE("every row-select body keeps what the references keep: edge rows, odd shapes, all four dtypes") {
#if defined(__x86_64__)
  REQUIRE(bestRowBody() != RowBody::kScalar);
#endif
  if (bestRowBody() != RowBody::kAvx2) MESSAGE("no AVX2 on this CPU: its bodies not tested");
  uint64_t seed = 1100;
  checkEveryShape<float>(seed);
  checkEveryShape<double>(seed);
  checkEveryShape<Half>(seed);
  checkEveryShape<BFloat16>(seed);
}

TEST_CASE("row selection splits rows between workers anywhere, lanes or not") {
  Twin t;
  for (size_t d : {7, 64, 65})
    for (size_t k : {size_t(0), size_t(1), size_t(4), d / 2, size_t(40)}) {
      checkBodies<float>(t, 1001, d, k, 1.0, 1200 + d + k);
      checkBodies<Half>(t, 1001, d, k, 1.0, 1300 + d + k);
      checkBodies<double>(t, 1001, d, k, 1.0, 1400 + d + k);
    }
}

TEST_CASE("fp16 and bf16 thresholds: every bit pattern against fp32 taus, representable or not") {
  Twin t;
  const double inf = std::numeric_limits<double>::infinity();
  const double taus[] = {0.0, -0.0, -1.0, 1.0, 2.0 / 3.0, 0.1, 65504, 65519, 65520, 1e-8, 5.96e-8, 6e-8, 1e30,
                         3.4e38, std::nan(""), inf, -inf};
  auto check = [&]<typename T>() {
    std::vector<T> rows(65536);
    for (size_t i = 0; i < rows.size(); i++) rows[i] = T{static_cast<uint16_t>(i)};
    for (double tau : taus) {
      CAPTURE(tau);
      for (RowBody body : {RowBody::kScalar, RowBody::kSse2, RowBody::kAvx2}) {
        CAPTURE(int(body));
        std::vector<uint32_t> mask(256 * maskWords(256)), counts(256);
        RowSelectArgs sel{rows.data(), 256, 256, Value<T>::type, 0, tau, mask.data(), counts.data()};
        const dctResult_t res = cpuRowSelectWith(t.ctx, &sel, body);
        if (res == dctNotSupported && body != bestRowBody()) continue;
        REQUIRE(res == dctSuccess);
        size_t nonFinite = 0;
        for (size_t i = 0; i < rows.size(); i++) {
          const float x = refValue(rows[i]);
          const bool keep = !(std::fabs(x) < static_cast<float>(tau));  // fp16/bf16 compare in fp32
          REQUIRE((mask[i / 32] >> (i % 32) & 1u) == keep);
          nonFinite += keep && !std::isfinite(x);
        }
        REQUIRE(sel.nonFinite == nonFinite);
      }
    }
  };
  check.template operator()<Half>();
  check.template operator()<BFloat16>();
}
