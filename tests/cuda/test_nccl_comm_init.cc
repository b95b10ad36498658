// dctCommInitNccl under mpirun, as dctCommInitMpi: bad arguments refused,
// and a new comm of two or more ranks times its dense allreduce (the link
// probe, on the communicator's device), the same timing on every rank.
#include <cstring>
#include <vector>

#include "device_ranks.h"
#include "transport/comm.h"

using namespace devtest;

namespace {

bool sameEverywhere(const dct::LinkTiming& mine) {
  std::vector<dct::LinkTiming> all(worldSize());
  MPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all.data(), sizeof(mine), MPI_BYTE, MPI_COMM_WORLD);
  for (const dct::LinkTiming& t : all)
    if (std::memcmp(&t, &mine, sizeof(t)) != 0) return false;
  return true;
}

}  // namespace

TEST_CASE("dctCommInitNccl refuses a NULL communicator or result") {
  dctComm_t comm = reinterpret_cast<dctComm_t>(1);
  CHECK(dctCommInitNccl(nullptr, &comm) == dctInvalidArgument);
  CHECK(comm == nullptr);
  CHECK(dctCommInitNccl(reinterpret_cast<ncclComm_t>(1), nullptr) == dctInvalidArgument);
}

TEST_CASE("a new NCCL comm times its dense allreduce, the same on every rank") {
  if (!gpuPerRank()) {
    MESSAGE("skipped: NCCL needs a GPU per rank");
    return;
  }
  for (bool nonblocking : {false, true}) {
    CAPTURE(nonblocking);
    NcclComm c(nonblocking);
    const dct::LinkTiming& t = c.comm->link;
    CHECK((t.smallBytes < t.largeBytes && t.smallUs > 0 && t.largeUs > 0) == (worldSize() > 1));
    CHECK(sameEverywhere(t));
  }
}
