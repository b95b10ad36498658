// dctConfig_t resolution: user field if set, else the DCT_* variable the comm
// read at creation (base/settings.h), else default.
#pragma once

#include "base/settings.h"
#include "dct/dct.h"

namespace dct {

// Fills `out` with no undefined field left; on a bad field returns
// dctInvalidArgument with the reason in dctGetLastError(comm).
dctResult_t resolveConfig(dctComm_t comm, const ConfigEnv& env, const dctConfig_t* user, dctConfig_t* out);

}  // namespace dct
