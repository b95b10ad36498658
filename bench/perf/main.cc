// dct_perf entry point: MPI and libdct set-up around the harness. Errors are
// reported and turned into the exit status; nothing aborts.
#include <cstdio>

#include "harness.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Failed MPI calls return to us, so we can print and exit cleanly.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  dctbench::Options opt;
  int parsed = dctbench::parseOptions(argc, argv, opt, rank == 0);
  int rc = parsed < 0 ? 2 : 0;
  if (parsed == 0) {
    dctComm_t comm = nullptr;
    dctResult_t res = dctCommInitMpi(MPI_COMM_WORLD, &comm);
    if (!dctbench::allOk(res == dctSuccess, MPI_COMM_WORLD)) {
      if (res != dctSuccess) dctbench::reportDctFailure(nullptr, rank, "dctCommInitMpi", res);
      rc = 1;
    } else if (opt.collective == "alltoall") {
      rc = dctbench::runAlltoallBench(opt, comm, MPI_COMM_WORLD);  // plans go before comm
    } else {
      if (opt.collective == "onebit") opt.density = 1.0;  // every entry goes, as one bit
      auto pc = opt.collective == "allgather" ? dctbench::makeAllgatherCase(opt, comm, MPI_COMM_WORLD)
                : opt.collective == "coo"     ? dctbench::makeCooCase(opt, comm, MPI_COMM_WORLD)
                : opt.collective == "onebit"  ? dctbench::makeOnebitCase(opt, comm, MPI_COMM_WORLD)
                                              : dctbench::makeAllreduceCase(opt, comm, MPI_COMM_WORLD);
      rc = dctbench::runHarness(opt, *pc, MPI_COMM_WORLD);
      pc.reset();  // compressors go before their comm
    }
    if (comm) dctCommDestroy(comm);
  }
  MPI_Finalize();
  return rc;
}
