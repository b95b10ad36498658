// The link probe under mpirun (transport/link_probe.h): every comm of two or
// more ranks times its dense allreduce when it is made, every rank holds
// the same timings bit for bit (auto plans from them), the leaders' comm of
// a hierarchy is timed too, and one rank times nothing.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstring>
#include <vector>

#include "mpi_util.h"
#include "transport/comm.h"

using namespace dcttest;

namespace {

// Whether every rank of `comm` (an MPI comm over the same ranks as the
// dctComm) holds this rank's timing, bit for bit.
bool sameEverywhere(const dct::LinkTiming& mine, MPI_Comm comm) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  std::vector<dct::LinkTiming> all(size);
  MPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all.data(), sizeof(mine), MPI_BYTE, comm);
  for (const dct::LinkTiming& t : all)
    if (std::memcmp(&t, &mine, sizeof(t)) != 0) return false;
  return true;
}

// Timed: both sizes, on more than one rank. (Whether the times are usable,
// large above small, is up to the machine: two mpiruns share 2 cores here.)
bool timed(const dct::LinkTiming& t) { return t.smallBytes < t.largeBytes && t.smallUs > 0 && t.largeUs > 0; }

}  // namespace

TEST_CASE("a new comm times its dense allreduce, the same on every rank") {
  World w;
  const dct::LinkTiming& t = w.comm->link;
  CHECK(timed(t) == (w.size > 1));
  CHECK(sameEverywhere(t, MPI_COMM_WORLD));
}

TEST_CASE("a hierarchy's leaders time their own links") {
  World w(2);  // nodes of two ranks
  const dctComm_t leaders = w.comm->leaders;
  const int nodes = (w.size + 1) / 2;
  MPI_Comm leaderComm = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, leaders ? 0 : MPI_UNDEFINED, w.rank, &leaderComm);
  if (leaders) {
    CHECK(leaders->size == nodes);
    CHECK(timed(leaders->link) == (nodes > 1));
    CHECK(sameEverywhere(leaders->link, leaderComm));
    MPI_Comm_free(&leaderComm);
  }
  CHECK(timed(w.comm->link) == (w.size > 1));
}
