// fp16 and bf16 as 16-bit storage types, with the conversions both twins
// use. Every float -> half rounding is IEEE round-to-nearest-even, overflow
// goes to Inf, and every NaN becomes one canonical quiet NaN (sign kept): so
// the CPU twin (this code, or F16C where present) and the CUDA twin
// (__float2half_rn / __float2bfloat16_rn plus the same NaN rule) write the
// same bits. Half -> float is exact (a NaN keeps its payload, quieted). fp64 reaches the half types through
// fp32 (a double rounding, documented in dct.h).
#pragma once

#include <cstdint>
#include <cstring>

#include "dct/dct.h"
#include "base/host_device.h"

namespace dct {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

constexpr uint16_t kHalfNaN = 0x7e00, kHalfInf = 0x7c00, kHalfMax = 0x7bff;
constexpr uint16_t kBf16NaN = 0x7fc0, kBf16Inf = 0x7f80, kBf16Max = 0x7f7f;

DCT_HOST_DEVICE uint32_t floatBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  return x;
}
DCT_HOST_DEVICE float bitsFloat(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

// Rounds the low `shift` bits off `m`, to nearest, ties to even.
DCT_HOST_DEVICE uint32_t roundShift(uint32_t m, int shift) {
  const uint32_t kept = m >> shift, rest = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
  return kept + (rest > halfway || (rest == halfway && (kept & 1u)) ? 1u : 0u);
}

DCT_HOST_DEVICE uint16_t floatToHalfBits(float f) {
  const uint32_t x = floatBits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | kHalfNaN);
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | kHalfInf);  // >= 65520 rounds up to Inf
  if (ax >= 0x38800000u) {  // normal half: rebias 127 -> 15, round 13 mantissa bits off
    return static_cast<uint16_t>(sign | roundShift(ax - (112u << 23), 13));
  }
  if (ax <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25: ties to the even zero
  // Subnormal half: value / 2^-24, rounded (a carry lands on the smallest normal).
  const int exponent = static_cast<int>(ax >> 23);
  const uint32_t mantissa = (ax & 0x7fffffu) | 0x800000u;
  return static_cast<uint16_t>(sign | roundShift(mantissa, 126 - exponent));
}

DCT_HOST_DEVICE float halfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 31) return bitsFloat(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));  // NaN: quieted, as F16C does
  if (e != 0) return bitsFloat(sign | ((e + 112u) << 23) | (m << 13));
  const float subnormal = static_cast<float>(m) * 5.9604644775390625e-8f;  // m * 2^-24, exact
  return sign ? -subnormal : subnormal;
}

DCT_HOST_DEVICE uint16_t floatToBf16Bits(float f) {
  const uint32_t x = floatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>(((x >> 16) & 0x8000u) | kBf16NaN);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);  // overflow carries into Inf
}

DCT_HOST_DEVICE float bf16BitsToFloat(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  return bitsFloat((x & 0x7fffffffu) > 0x7f800000u ? x | 0x400000u : x);  // NaN: quieted
}

// Value<T>: the arithmetic type T is accumulated in (Acc), exact loads,
// rounding stores, and the largest finite T.
template <typename T> struct Value;
template <> struct Value<float> {
  using Acc = float;
  static constexpr dctDataType_t type = dctFloat32;
  DCT_HOST_DEVICE static float load(float x) { return x; }
  DCT_HOST_DEVICE static float store(float a) { return a; }
  DCT_HOST_DEVICE static float max() { return 3.40282346638528859812e+38f; }
};
template <> struct Value<double> {
  using Acc = double;
  static constexpr dctDataType_t type = dctFloat64;
  DCT_HOST_DEVICE static double load(double x) { return x; }
  DCT_HOST_DEVICE static double store(double a) { return a; }
  DCT_HOST_DEVICE static double max() { return 1.79769313486231570815e+308; }
};
template <> struct Value<Half> {
  using Acc = float;
  static constexpr dctDataType_t type = dctFloat16;
  DCT_HOST_DEVICE static float load(Half x) { return halfBitsToFloat(x.bits); }
  DCT_HOST_DEVICE static Half store(float a) { return Half{floatToHalfBits(a)}; }
  DCT_HOST_DEVICE static float max() { return 65504.0f; }
};
template <> struct Value<BFloat16> {
  using Acc = float;
  static constexpr dctDataType_t type = dctBFloat16;
  DCT_HOST_DEVICE static float load(BFloat16 x) { return bf16BitsToFloat(x.bits); }
  DCT_HOST_DEVICE static BFloat16 store(float a) { return BFloat16{floatToBf16Bits(a)}; }
  DCT_HOST_DEVICE static float max() { return 3.38953138925153547590e+38f; }
};

// The largest finite value of a dctDataType_t.
inline double maxFinite(dctDataType_t t) {
  switch (t) {
    case dctFloat64: return Value<double>::max();
    case dctFloat16: return Value<Half>::max();
    case dctBFloat16: return Value<BFloat16>::max();
    default: return Value<float>::max();
  }
}

// From -> To with one rounding (fp64 -> half: through fp32).
template <typename To, typename From>
DCT_HOST_DEVICE To convertValue(From x) {
  return Value<To>::store(static_cast<typename Value<To>::Acc>(Value<From>::load(x)));
}

// a rounded to T, a finite value clamped to +-limit first (default: the
// largest finite T, so it never overflows to Inf): what a compressor sends,
// the excess staying in its residual. `limit` must be a T value.
template <typename T, typename A>
DCT_HOST_DEVICE T storeSaturated(A a, typename Value<T>::Acc limit = Value<T>::max()) {
  using Acc = typename Value<T>::Acc;
  Acc v = static_cast<Acc>(a);
  if (a - a == A(0)) v = v > limit ? limit : (v < -limit ? -limit : v);  // finite a only: NaN and Inf pass through
  return Value<T>::store(v);
}

}  // namespace dct
