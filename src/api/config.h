// dctConfig_t resolution: user field if set, else the DCT_* variable the comm
// read at creation (base/settings.h), else default.
#pragma once

#include "base/settings.h"
#include "dct/dct.h"

namespace dct {

// The fixed-capacity mode's largest factor: past it the slots cost more
// than any selection a drift band lets through.
constexpr double kMaxCapacityFactor = 1024;

// Fills `out` with no undefined field left; on a bad field returns
// dctInvalidArgument with the reason in dctGetLastError(comm).
dctResult_t resolveConfig(dctComm_t comm, const ConfigEnv& env, const dctConfig_t* user, dctConfig_t* out);

// A compressor's resolved config against what its fixed-capacity mode
// (capacityFactor > 0, top-K) can serve: the sampled estimate and the
// allgather plan. Checked where compressors are made, not for plans, which
// ignore the field.
dctResult_t checkFixedCapacity(dctComm_t comm, const dctConfig_t& resolved);

}  // namespace dct
