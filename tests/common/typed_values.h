// Values as bytes of a datatype and back to double, through the plain
// half/bf16 references: exact for every type where the value fits it.
#pragma once
#include <cstddef>
#include <cstdint>

#include "dct/dct.h"
#include "half_reference.h"

namespace dcttest {

inline size_t typeSize(dctDataType_t t) { return t == dctFloat64 ? 8 : t == dctFloat32 ? 4 : 2; }

inline void store(dctDataType_t t, void* at, double v) {
  if (t == dctFloat64) *static_cast<double*>(at) = v;
  else if (t == dctFloat32) *static_cast<float*>(at) = static_cast<float>(v);
  else if (t == dctFloat16) *static_cast<uint16_t*>(at) = refFloatToHalf(static_cast<float>(v));
  else *static_cast<uint16_t*>(at) = refFloatToBf16(static_cast<float>(v));
}

inline double load(dctDataType_t t, const void* at) {
  if (t == dctFloat64) return *static_cast<const double*>(at);
  if (t == dctFloat32) return *static_cast<const float*>(at);
  if (t == dctFloat16) return refHalfToFloat(*static_cast<const uint16_t*>(at));
  return refBf16ToFloat(*static_cast<const uint16_t*>(at));
}

}  // namespace dcttest
