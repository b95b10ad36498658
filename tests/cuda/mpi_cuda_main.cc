// Main of the multi-rank device tests under mpirun. Every rank checks for a
// usable CUDA device; unless all have one, every rank reports "skipped" and
// exits with CTest's skip code 77 (mpirun then exits 77 too). Each rank
// takes the GPU of its node-local rank (modulo the GPUs there). The process
// fails if any rank failed; ranks > 0 report failures only.
#define DOCTEST_CONFIG_IMPLEMENT
#include <cuda_runtime.h>
#include <doctest/doctest.h>
#include <mpi.h>

#include "../mpi/run_doctest.h"

#include <cstdio>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int localRank = 0;
  MPI_Comm_rank(node, &localRank);
  MPI_Comm_free(&node);
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err == cudaSuccess && devices > 0) err = cudaSetDevice(localRank % devices);
  int usable = err == cudaSuccess && devices > 0 ? 1 : 0, allUsable = 0;
  MPI_Allreduce(&usable, &allUsable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!allUsable) {
    if (rank == 0)
      std::printf("skipped: no CUDA device (on rank 0: %s)\n",
                  err != cudaSuccess ? cudaGetErrorString(err) : devices == 0 ? "0 devices" : "usable");
    MPI_Finalize();
    return 77;
  }
  return runDoctestOnAllRanks(argc, argv, rank);
}
