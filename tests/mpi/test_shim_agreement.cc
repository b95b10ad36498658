// The drop-in shims' wrap-or-pass-through decision under mpirun: the
// session the MPI shim uses, with PMPI_Allreduce as the layer below. Ranks
// whose policies differ, or a rank that cannot create its dctComm_t (an
// allocation failure before any collective), make every rank pass its calls
// through; none waits in a collective the others never enter.
#include <doctest/doctest.h>
#include <mpi.h>

#include <vector>

#include "dct/dct_mpi.h"
#include "preload/session.h"
#include "transport/fault_injection.h"

using namespace dct::preload;

namespace {

const Agreer kWorld = [](uint64_t* values, int n) {
  return PMPI_Allreduce(MPI_IN_PLACE, values, n, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS;
};

struct Ranks {
  int rank = 0, size = 1;
  Ranks() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  bool last() const { return rank == size - 1; }
};

CallFacts eligible(int size) {
  CallFacts f;
  f.commSize = size;
  f.bytes = 4 << 20;
  f.typeSupported = f.opSupported = true;
  return f;
}

constexpr uintptr_t kComm = 0x51;

}  // namespace

TEST_CASE("policies that differ on one rank: every rank passes every call through") {
  const Ranks w;
  Policy policy;
  if (w.last() && w.size > 1) policy.minBytes = 2 << 20;  // still below the call's 4 MiB
  Session s("test", policy, 4);
  const Verdict expected = w.size > 1 ? Verdict::Disagree : Verdict::Compress;
  CHECK(s.admit(kComm, eligible(w.size), kWorld) == expected);
  CHECK(s.admit(kComm, eligible(w.size), kWorld) == expected);
}

TEST_CASE("a rank that cannot create its comm: every rank passes through, then for good") {
  const Ranks w;
  Session s("test", Policy{}, 4);
  REQUIRE(s.admit(kComm, eligible(w.size), kWorld) == Verdict::Compress);
  if (w.last()) dct::armCommCreateFault();
  const size_t n = 1 << 20;
  std::vector<float> in(n, 1.0f), out(n, -1.0f);
  CompressCall call;
  call.comm = kComm;
  call.sendbuf = in.data();
  call.recvbuf = out.data();
  call.count = n;
  const CommOpener open = [](dctComm_t* comm) { return dctCommInitMpi(MPI_COMM_WORLD, comm); };
  CHECK(s.compress(call, open, kWorld) != dctSuccess);
  CHECK(out[0] == -1.0f);  // nothing written: the caller runs the layer below
  CHECK_FALSE(dct::commCreateFaultHit());  // the armed rank's create consumed it
  CHECK(s.admit(kComm, eligible(w.size), kWorld) == Verdict::Disagree);
  CHECK(s.compress(call, open, kWorld) != dctSuccess);
  CHECK(s.summary().fellBack == 1);
}

TEST_CASE("a comm whose create fails on one rank fails dctCommInitMpi on every rank") {
  const Ranks w;
  if (w.last()) dct::armCommCreateFault();
  dctComm_t comm = nullptr;
  const dctResult_t res = dctCommInitMpi(MPI_COMM_WORLD, &comm);
  CHECK(res == (w.last() ? dctTransportError : dctInvalidUsage));
  CHECK(comm == nullptr);
  REQUIRE(dctCommInitMpi(MPI_COMM_WORLD, &comm) == dctSuccess);  // and the next one works
  dctCommDestroy(comm);
}
