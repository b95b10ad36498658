// Bulk fp16 <-> fp32 conversions: F16C (8 lanes) where the CPU has it, else
// the scalar functions of half_types.h, with identical bits either way
// (round to nearest even; NaN: one canonical quiet NaN, sign kept).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dct {

void halfToFloatBulk(const uint16_t* src, float* dst, size_t n);
void floatToHalfBulk(const float* src, uint16_t* dst, size_t n);
// dst[i] = half(half(a[i]) + half(b[i])), the sum formed in fp32.
void halfSumBulk(const uint16_t* a, const uint16_t* b, uint16_t* dst, size_t n);

}  // namespace dct
