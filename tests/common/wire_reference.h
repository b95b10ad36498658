// A value as it leaves a narrower wire type (config.wireType), from the
// independent conversions of half_reference.h: rounded once (fp64 reaches
// the half types through fp32), widened back exactly. A wire as wide as T
// (fp64 for double rows, fp32 for float rows) leaves x as it is.
#pragma once

#include "dct/dct.h"
#include "half_reference.h"

namespace dcttest {

template <typename T>
T throughWire(T x, dctDataType_t wire) {
  const float f = static_cast<float>(x);
  switch (wire) {
    case dctFloat16: return static_cast<T>(refHalfToFloat(refFloatToHalf(f)));
    case dctBFloat16: return static_cast<T>(refBf16ToFloat(refFloatToBf16(f)));
    case dctFloat32: return static_cast<T>(f);
    default: return x;
  }
}

}  // namespace dcttest
