// Measures a new comm's links: its transport's dense allreduce timed at a
// small and a large size, so auto's cost model starts from this machine
// (shared memory, 1 Gbit/s TCP, ...) instead of one fixed guess.
#pragma once

#include "dct/dct.h"

namespace dct {

// Collective over comm; fills comm->link (and, under a hierarchy, the
// leaders' comm's) on every rank alike (left unmeasured on a single rank,
// and where a transport of device buffers only cannot allocate them). Fails
// every rank if the transport failed on any.
dctResult_t probeLinks(dctComm_t comm);

}  // namespace dct
