// Inputs and the comparison rule of the half-precision twin tests
// (test_cuda_half*.cc): values of every kind each of the four types can
// hold, and a bitwise comparison that lets fp32/fp64 NaN payloads differ
// (x86 keeps an operand's, the GPU makes its own) but never a NaN's sign:
// that sign is all a half NaN keeps, so both twins must agree on it.
#pragma once

#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "cuda_util.h"
#include "base/half_types.h"

namespace dct::test {

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// fn.template operator()<T>() for each of the four value types.
template <typename Fn>
void forEachType(Fn&& fn) {
  fn.template operator()<float>();
  fn.template operator()<double>();
  fn.template operator()<Half>();
  fn.template operator()<BFloat16>();
}

template <typename T>
double asDouble(T x) {
  return static_cast<double>(Value<T>::load(x));
}
template <typename T>
T fromDouble(double d) {
  if constexpr (std::is_same_v<T, double>) return d;
  else return Value<T>::store(static_cast<float>(d));  // overflow: Inf
}
template <typename T>
bool isNan(T x) {
  return std::isnan(asDouble(x));
}
template <typename T>
T withSignBit(T x) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &x, sizeof(T));
  bytes[sizeof(T) - 1] |= 0x80;  // little-endian: the sign is the top bit of the last byte
  std::memcpy(&x, bytes, sizeof(T));
  return x;
}

enum class NaNs { any, negative, none };

// Normals over a wide range of exponents, zeros of both signs, values that
// overflow the half types, subnormals of every type, +-Inf and NaN. `wild`
// adds raw bit patterns (NaN payloads, signalling NaNs, the extremes of T);
// `nans` keeps NaNs of both signs, makes them all negative (for sums where
// two NaNs may meet: which one x86 returns is the compiler's choice, so only
// equal signs give a defined result), or replaces them with 1.
template <typename T>
std::vector<T> mixedValues(size_t n, uint64_t seed, NaNs nans = NaNs::any, bool wild = true) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<T> v(n);
  for (auto& x : v) {
    const int p = static_cast<int>(rng() % 100);
    const double sign = rng() % 2 ? -1.0 : 1.0;
    if (p < 55) x = fromDouble<T>(normal(rng));
    else if (p < 67) x = fromDouble<T>(normal(rng) * std::ldexp(1.0, static_cast<int>(rng() % 60) - 30));
    else if (p < 72) x = fromDouble<T>(sign * 0.0);
    else if (p < 77) x = fromDouble<T>(sign * (6.0e4 + 5.0e4 * std::fabs(normal(rng))));  // past fp16's max
    else if (p < 80) x = fromDouble<T>(sign * 3.3990e38 * (1.0 + 1e-4 * (rng() % 8)));    // past bf16's, fp32's
    else if (p < 85) x = fromDouble<T>(sign * std::ldexp(1.0 + (rng() % 1024) / 1024.0, -static_cast<int>(rng() % 20) - 14));
    else if (p < 88) x = fromDouble<T>(sign * std::ldexp(1.0 + (rng() % 1024) / 1024.0, -static_cast<int>(rng() % 24) - 126));
    else if (p < 92 && wild) {
      const uint64_t bits = rng();
      std::memcpy(&x, &bits, sizeof(T));
    } else if (p < 96) x = fromDouble<T>(sign * HUGE_VAL);
    else x = fromDouble<T>(sign < 0 ? -NAN : NAN);
    if (!isNan(x)) continue;
    if (nans == NaNs::none) x = fromDouble<T>(1.0);
    else if (nans == NaNs::negative) x = withSignBit(x);
  }
  if (!wild)  // no value past fp32's range either
    for (auto& x : v)
      if (std::fabs(asDouble(x)) > 1e37 && !std::isinf(asDouble(x))) x = fromDouble<T>(1e37);
  return v;
}

// Bit for bit, except that two fp32/fp64 NaNs of the same sign match.
template <typename T>
bool sameResult(T gpu, T cpu) {
  if constexpr (!kIsHalf<T>) {
    if (std::isnan(gpu) && std::isnan(cpu)) return std::signbit(gpu) == std::signbit(cpu);
  }
  return std::memcmp(&gpu, &cpu, sizeof(T)) == 0;
}

template <typename T>
void requireSameResults(const std::vector<T>& gpu, const std::vector<T>& cpu, size_t count) {
  REQUIRE(gpu.size() >= count);
  REQUIRE(cpu.size() >= count);
  for (size_t i = 0; i < count; i++) {
    CAPTURE(i);
    CAPTURE(asDouble(cpu[i]));
    CAPTURE(asDouble(gpu[i]));
    REQUIRE(sameResult(gpu[i], cpu[i]));
  }
}

}  // namespace dct::test
