// Node structure for hierarchical steps (DCT_HIERARCHY=1): a comm per
// shared-memory node, and one among the node leaders (each node's lowest
// rank). DCT_LOCAL_SIZE=L fakes nodes of L consecutive ranks, so a single
// machine can test and benchmark what spans several.
#pragma once

#include "dct/dct.h"

namespace dct {

// Collective over comm, at its creation (settleComm, after the settings
// are agreed): builds comm->node and comm->leaders when DCT_HIERARCHY asks
// for them. Fails on every rank alike.
dctResult_t buildHierarchy(dctComm_t comm);

// Frees what buildHierarchy made (the caller then frees comm).
void destroyHierarchy(dctComm_t comm);

}  // namespace dct
