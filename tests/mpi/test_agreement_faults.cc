// The agreement of the dense and pipelined steps under mpirun: one rank
// rejects its arguments (so the others see a problem in the headers and
// vote) while another rank's header gather fails in the transport (so it
// cannot trust what it received). Every rank must run the same collectives:
// all return an error, none waits, and the next call works.
#include <doctest/doctest.h>
#include <mpi.h>

#include <vector>

#include "fault_util.h"
#include "mpi_util.h"
#include "transport/comm.h"
#include "transport/fault_injection.h"

using namespace dcttest;

namespace {

constexpr size_t kCount = 4099;

void badArgumentsAndFailedGather(const Settings& s) {
  const ScopedEnv chunking("DCT_CHUNK_ELEMENTS", s.chunkElems);  // before the comm: settings may be read there
  World w;
  if (w.size < 2) return;  // needs a rank with bad arguments and another one
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  dctConfig_t cfg = explicitConfig(s);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, kCount, dctFloat32, &cfg, &c) == dctSuccess);
  std::vector<float> send(kCount, 1.0f), recv(kCount, 0.0f);
  const int bad = w.size - 1;  // passes a NULL recvbuf
  // The failing rank's first few operations in turn: its prepare, its header
  // gather, whatever follows.
  for (uint64_t n = 0; n < 4; n++) {
    CAPTURE(n);
    dct::armFault(w.comm, n, 0);
    const dctResult_t res = dctSparseAllreduce(send.data(), w.rank == bad ? nullptr : recv.data(), kCount, dctFloat32,
                                               dctSum, c, w.comm, nullptr);
    dct::disarmFault(w.comm);
    CHECK(res != dctSuccess);
    CHECK(allRanksAgree(res != dctSuccess));
    // In step again: a clean call succeeds everywhere.
    REQUIRE(dctSparseAllreduce(send.data(), recv.data(), kCount, dctFloat32, dctSum, c, w.comm, nullptr) ==
            dctSuccess);
    if (s.algorithm == dctAlgoDense) CHECK(recv[0] == static_cast<float>(w.size));
  }
  dctCompressorDestroy(c);
}

}  // namespace

TEST_CASE("dense step: bad arguments on one rank and a failed header gather on another fail every rank") {
  Settings s;
  s.algorithm = dctAlgoDense;
  s.density = 1.0;
  badArgumentsAndFailedGather(s);
}

TEST_CASE("pipelined step: bad arguments on one rank and a failed header gather on another fail every rank") {
  Settings s;
  s.algorithm = dctAlgoAllgather;
  s.density = 0.5;
  s.chunkElems = 1000;
  badArgumentsAndFailedGather(s);
}
