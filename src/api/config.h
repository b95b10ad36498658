// dctConfig_t resolution: user field if set, else DCT_* env var, else default.
#pragma once

#include "dct/dct.h"

namespace dct {

// Fills `out` with no undefined field left; on a bad field returns
// dctInvalidArgument with the reason in dctGetLastError(comm).
dctResult_t resolveConfig(dctComm_t comm, const dctConfig_t* user, dctConfig_t* out);

}  // namespace dct
