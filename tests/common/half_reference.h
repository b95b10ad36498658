// fp16 and bf16 conversions written apart from the library's (a shared bug
// would cancel out): fp16 through the compiler's _Float16 (IEEE
// round-to-nearest-even), bf16 by picking the nearer of the two bf16
// neighbours in double arithmetic, ties to the even one. Both with the
// library's documented NaN rule: one canonical quiet NaN, sign kept.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace dcttest {

inline uint16_t refFloatToHalf(float f) {
  if (std::isnan(f)) return std::signbit(f) ? 0xfe00 : 0x7e00;
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof(bits));
  return bits;
}

inline float refHalfToFloat(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, sizeof(h));
  return static_cast<float>(h);
}

inline float refBf16ToFloat(uint16_t bits) {
  const uint32_t x = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

inline uint16_t refFloatToBf16(float f) {
  if (std::isnan(f)) return std::signbit(f) ? 0xffc0 : 0x7fc0;
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint16_t down = static_cast<uint16_t>(x >> 16);  // truncation: toward zero
  if ((x & 0xffffu) == 0) return down;
  const uint16_t up = static_cast<uint16_t>(down + 1);  // away from zero (may reach Inf)
  const double lo = refBf16ToFloat(down), hi = refBf16ToFloat(up);
  const double dl = std::fabs(static_cast<double>(f) - lo), dh = std::fabs(hi - static_cast<double>(f));
  // Past the largest finite value, hi is Inf: the halfway point is where
  // the next (absent) binade step would be, 2^128 - 2^119 in magnitude.
  if (std::isinf(hi)) return std::fabs(static_cast<double>(f)) >= std::ldexp(511.0, 119) ? up : down;
  if (dl < dh) return down;
  if (dh < dl) return up;
  return (down & 1) ? up : down;
}

}  // namespace dcttest
