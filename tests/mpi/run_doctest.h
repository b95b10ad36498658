// doctest under mpirun: every rank runs the same cases in the same order;
// the process fails if any rank failed. Ranks > 0 report failures only.
// Shared by tests/mpi and the multi-rank CUDA tests; MPI is initialised.
#pragma once

#include <doctest/doctest.h>
#include <mpi.h>

inline int runDoctestOnAllRanks(int argc, char** argv, int rank) {
  doctest::Context context(argc, argv);
  if (rank != 0) context.setOption("minimal", true);
  int failed = context.run() != 0 ? 1 : 0;
  int anyFailed = 0;
  MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return anyFailed;
}
