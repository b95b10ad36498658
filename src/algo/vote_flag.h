// A vote (agree.h) that also tells every rank whether any rank raised a
// flag, in the same collective: for a fact one rank may have learned alone,
// such as a status word in a block only it received (a garbled transfer),
// on which every rank must act alike.
#pragma once

#include "dct/dct.h"

namespace dct {

// As vote(); on dctSuccess, anyFlag is the same on every rank: whether some
// rank passed flag = true.
dctResult_t voteWithFlag(dctComm_t comm, dctResult_t mine, bool flag, bool& anyFlag, void* stream, const char* fn,
                         const char* phase);

}  // namespace dct
