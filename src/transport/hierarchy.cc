#include "transport/hierarchy.h"

#include <vector>

#include "base/debug.h"
#include "base/env.h"
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

// What this rank was asked for: {hierarchy on, local size (0: by node)},
// or an error for a malformed value.
dctResult_t requested(dctComm_t comm, int32_t wanted[2]) {
  const EnvValue<long long> on = envInteger("DCT_HIERARCHY"), local = envInteger("DCT_LOCAL_SIZE");
  if (on.status == EnvStatus::Invalid || (on.valid() && on.value != 0 && on.value != 1))
    return fail(comm, dctInvalidArgument, "DCT_HIERARCHY='%s': want 0 or 1", on.text);
  if (local.status == EnvStatus::Invalid || (local.valid() && (local.value < 1 || local.value > 1 << 30)))
    return fail(comm, dctInvalidArgument, "DCT_LOCAL_SIZE='%s': want a positive rank count", local.text);
  wanted[0] = on.valid() ? static_cast<int32_t>(on.value) : 0;
  wanted[1] = wanted[0] && local.valid() ? static_cast<int32_t>(local.value) : 0;
  return dctSuccess;
}

// The same request on every rank, else an error naming a rank that differs.
dctResult_t sameEverywhere(dctComm_t comm, const int32_t mine[3], const std::vector<int32_t>& all) {
  if (mine[2] != dctSuccess) return static_cast<dctResult_t>(mine[2]);
  for (int r = 0; r < comm->size; r++) {
    const int32_t* theirs = &all[3 * r];
    if (theirs[2] != dctSuccess)
      return fail(comm, dctInvalidUsage, "rank %d has a malformed DCT_HIERARCHY or DCT_LOCAL_SIZE", r);
    if (theirs[0] != mine[0] || theirs[1] != mine[1])
      return fail(comm, dctInvalidUsage,
                  "ranks disagree on DCT_HIERARCHY/DCT_LOCAL_SIZE (rank %d: %d/%d, this rank %d: %d/%d)", r,
                  theirs[0], theirs[1], comm->rank, mine[0], mine[1]);
  }
  return dctSuccess;
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
  const bool leader = comm->node != nullptr && comm->node->rank == 0;
  const dctResult_t second = t->split(comm, leader ? 0 : -1, &comm->leaders);
  if (res == dctSuccess) res = second;
  if (res == dctSuccess && (comm->node == nullptr || leader != (comm->leaders != nullptr)))
    res = fail(comm, dctInternalError, "DCT_HIERARCHY: the node split left this rank without a node");
  DCT_INFO("rank %d: node of %d ranks, %s", comm->rank, comm->node ? comm->node->size : 0,
           leader ? "its leader" : "not its leader");
  return res;
}

}  // namespace

dctResult_t buildHierarchy(dctComm_t comm) {
  // {on, local size, error}: every rank learns what every rank read.
  int32_t mine[3] = {0, 0, 0};
  mine[2] = requested(comm, mine);
  std::vector<int32_t> all(3 * comm->size);
  dctResult_t res = comm->transport->allgather(comm, mine, all.data(), sizeof(mine), nullptr);
  if (res == dctSuccess) res = sameEverywhere(comm, mine, all);
  DCTCHECK(everyone(comm, res, "DCT_HIERARCHY: another rank failed to read DCT_HIERARCHY/DCT_LOCAL_SIZE"));
  if (!mine[0]) return dctSuccess;
  res = everyone(comm, splitByNode(comm, mine[1]), "DCT_HIERARCHY: another rank failed to split the comm by node");
  if (res != dctSuccess) destroyHierarchy(comm);
  return res;
}

void destroyHierarchy(dctComm_t comm) {
  destroyComm(comm->leaders);
  destroyComm(comm->node);
}

}  // namespace dct
