// doctest under mpirun: every rank runs the same cases in the same order;
// the process fails if any rank failed. Ranks > 0 report failures only.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include "run_doctest.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return runDoctestOnAllRanks(argc, argv, rank);
}
