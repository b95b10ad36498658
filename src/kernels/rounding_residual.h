// The rounding-residual rule of the select ops (kernels.h, SelectArgs), one
// definition for both twins (cpu_select.cc, cuda/cuda_select*.cu): a taken
// entry sent as a narrower wire type leaves in the residual what the
// rounding (and any clamping, storeSaturated) lost, so nothing is lost over
// the steps. A NaN or Inf travels as it is and leaves nothing behind.
#pragma once

#include "base/half_types.h"
#include "base/host_device.h"

namespace dct {

// acc: the accumulator (T: fp32 or fp64); sent: acc as it went on the wire.
// For finite acc the subtraction is exact IEEE arithmetic on both twins
// (no NaN operand, nothing to contract into an FMA).
template <typename T, typename V>
DCT_HOST_DEVICE T roundingResidual(T acc, V sent) {
  const T error = acc - static_cast<T>(Value<V>::load(sent));
  return error == error ? error : T(0);  // NaN: acc was NaN or Inf
}

}  // namespace dct
