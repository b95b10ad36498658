// Facts about the element types: size, name, and the type sums and
// residuals are kept in. Below kernels and transports, so the shims and
// transports need no kernel header for them.
#pragma once

#include <cstddef>

#include "dct/dct.h"

namespace dct {

inline size_t dtypeSize(dctDataType_t dtype) {
  switch (dtype) {
    case dctFloat64: return 8;
    case dctFloat16:
    case dctBFloat16: return 2;
    default: return 4;
  }
}

inline const char* dtypeName(dctDataType_t dtype) {
  switch (dtype) {
    case dctFloat32: return "fp32";
    case dctFloat64: return "fp64";
    case dctFloat16: return "fp16";
    case dctBFloat16: return "bf16";
    default: return "unknown";
  }
}

// The type a tensor's sums and error-feedback residual are kept in: fp32
// for the half types, else the tensor's own.
inline dctDataType_t accumulationType(dctDataType_t dtype) {
  return dtype == dctFloat16 || dtype == dctBFloat16 ? dctFloat32 : dtype;
}

// dctConfig_t.wireType left unset resolves to this: "the tensor's own type".
constexpr int kWireTypeOfTensor = -1;

// The type values of `dtype` travel in under config.wireType (resolved), or
// dctNumTypes when that type is wider than dtype (refused: it would only
// add bytes).
inline dctDataType_t wireTypeFor(int wireType, dctDataType_t dtype) {
  const auto wire = wireType == kWireTypeOfTensor ? dtype : static_cast<dctDataType_t>(wireType);
  return dtypeSize(wire) > dtypeSize(dtype) ? dctNumTypes : wire;
}

}  // namespace dct
