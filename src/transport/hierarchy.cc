#include "transport/hierarchy.h"

#include <vector>

#include "base/debug.h"
#include "transport/comm.h"

namespace dct {
namespace {

void destroyComm(dctComm_t& comm) {
  if (comm == nullptr) return;
  comm->transport->destroy(comm);
  comm->magic = 0;
  delete comm;
  comm = nullptr;
}

// The two splits; each rank takes part in both whatever the first did.
dctResult_t splitByNode(dctComm_t comm, int localSize) {
  const Transport* t = comm->transport;
  if (t->split == nullptr || (localSize == 0 && t->nodeColor == nullptr))
    return fail(comm, dctNotSupported, "DCT_HIERARCHY: the %s transport cannot split comms%s", t->name,
                t->split ? " by node (set DCT_LOCAL_SIZE)" : "");
  // A rank that cannot name its node still takes part in both splits
  // (with no node: MPI_UNDEFINED) and reports the failure after them.
  int color = localSize ? comm->rank / localSize : 0;
  dctResult_t res = localSize ? dctSuccess : t->nodeColor(comm, &color);
  if (res != dctSuccess) color = -1;
  const dctResult_t first = t->split(comm, color, &comm->node);
  if (res == dctSuccess) res = first;
  if (comm->node) comm->node->settings = comm->settings;
  const bool leader = comm->node != nullptr && comm->node->rank == 0;
  const dctResult_t second = t->split(comm, leader ? 0 : -1, &comm->leaders);
  if (res == dctSuccess) res = second;
  if (comm->leaders) comm->leaders->settings = comm->settings;
  if (res == dctSuccess && (comm->node == nullptr || leader != (comm->leaders != nullptr)))
    res = fail(comm, dctInternalError, "DCT_HIERARCHY: the node split left this rank without a node");
  for (dctComm_t made : {comm->node, comm->leaders})
    if (res == dctSuccess && made) res = reserveHeaderRoom(made);
  DCT_INFO("rank %d: node of %d ranks, %s", comm->rank, comm->node ? comm->node->size : 0,
           leader ? "its leader" : "not its leader");
  return res;
}

}  // namespace

dctResult_t buildHierarchy(dctComm_t comm) {
  // DCT_HIERARCHY and DCT_LOCAL_SIZE are agreed settings (settleComm).
  if (!comm->settings.hierarchy) return dctSuccess;
  dctResult_t res = voteOnSetup(comm, splitByNode(comm, comm->settings.localSize),
                                "DCT_HIERARCHY: another rank failed to split the comm by node");
  if (res != dctSuccess) destroyHierarchy(comm);
  return res;
}

void destroyHierarchy(dctComm_t comm) {
  destroyComm(comm->leaders);
  destroyComm(comm->node);
}

}  // namespace dct
