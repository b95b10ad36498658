// Ranking keys of the DCT-MP top-K selection, shared by both twins: the bits
// of |x| read as an unsigned integer (orders like |x| for non-negative
// floats), with NaN and +-Inf all given the bits of +Inf. Both twins rank by
// the same integers, so they keep the same entries bit for bit; -0 ties +0.
#pragma once

#include <cstdint>
#include <cstring>

#include "base/half_types.h"
#include "base/host_device.h"

namespace dct {

template <typename T> struct RowKeyOf;
template <> struct RowKeyOf<float> { using type = uint32_t; static constexpr uint32_t inf = 0x7f800000u; };
template <> struct RowKeyOf<double> { using type = uint64_t; static constexpr uint64_t inf = 0x7ff0000000000000ull; };
template <> struct RowKeyOf<Half> { using type = uint16_t; static constexpr uint16_t inf = kHalfInf; };
template <> struct RowKeyOf<BFloat16> { using type = uint16_t; static constexpr uint16_t inf = kBf16Inf; };
template <typename T> using RowKey = typename RowKeyOf<T>::type;

template <typename T>
inline constexpr RowKey<T> kInfKey = RowKeyOf<T>::inf;

template <typename T>
DCT_HOST_DEVICE RowKey<T> rowKey(T x) {
  RowKey<T> bits;
  std::memcpy(&bits, &x, sizeof(bits));
  bits &= ~(RowKey<T>(1) << (8 * sizeof(T) - 1));  // |x|
  return bits < kInfKey<T> ? bits : kInfKey<T>;    // NaN ranks as Inf
}

}  // namespace dct
