// Built outside the tree against a CPU build (links the internal archive to set the slot):
//   cd build-cpu/tests && c++ -O3 -DNDEBUG -std=c++20 -I../../include -I../generated -I../../src $(mpicc --showme:compile) \
//     ../../bench/results/2026-11-29-sparcml/floor_ab.cc -o floor_ab ../src/libdct_internal.a $(mpicc --showme:link) -ldl -lhwloc -lpthread
//   mpirun -np 4 --oversubscribe ./floor_ab 65536 0.01 200
// A/B inside one process: the allgatherv path (slot 0) against the slots
// (the comm's probe-priced slot, and a tight one: the largest message),
// interleaved call by call so that load drift hits all alike.
#include <mpi.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>
#include "algo/gather_slot.h"
#include "dct/dct_mpi.h"
#include "transport/comm.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  size_t count = std::strtoull(argv[1], nullptr, 10);
  double density = std::atof(argv[2]);
  int iters = std::atoi(argv[3]);
  MPI_Comm mpi = MPI_COMM_WORLD;
  int rank = 0, size = 1;
  MPI_Comm_rank(mpi, &rank);
  MPI_Comm_size(mpi, &size);
  dctComm_t comm = nullptr;
  if (dctCommInitMpi(mpi, &comm) != dctSuccess) std::abort();
  const size_t probeSlot = comm->gatherSlot;
  std::mt19937_64 rng(1000003ull + rank);
  std::geometric_distribution<uint64_t> gap(density);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<uint32_t> idx;
  std::vector<float> val;
  for (uint64_t i = gap(rng); i < count; i += 1 + gap(rng)) {
    idx.push_back(static_cast<uint32_t>(i));
    val.push_back(value(rng));
  }
  std::vector<float> dense(count);
  std::vector<uint32_t> outIdx(count);
  std::vector<float> outVal(count);
  size_t nnz = 0;
  dctSparseInputInfo_t info{};
  auto call = [&](bool coo) {
    return dctSparseInputAllreduce(idx.data(), val.data(), idx.size(), count, dctFloat32, dctSum, dctAlgoAllgather,
                                   coo ? nullptr : dense.data(), coo ? outIdx.data() : nullptr,
                                   coo ? outVal.data() : nullptr, coo ? count : 0, &nnz, &info, comm, nullptr);
  };
  dct::setGatherSlot(comm, 0);
  call(true);
  uint64_t mine = info.bytesSent, largest = 0;
  MPI_Allreduce(&mine, &largest, 1, MPI_UINT64_T, MPI_MAX, mpi);
  const size_t slots[3] = {0, probeSlot, (largest + largest / 32 + 64 + 7) / 8 * 8};
  std::vector<double> t[2][3];
  for (int i = 0; i < iters + 5; i++)
    for (int coo = 0; coo < 2; coo++)
      for (int m = 0; m < 3; m++) {
        dct::setGatherSlot(comm, slots[m]);
        MPI_Barrier(mpi);
        const double t0 = MPI_Wtime();
        if (call(coo) != dctSuccess) MPI_Abort(mpi, 1);
        double us = (MPI_Wtime() - t0) * 1e6, worst = 0;
        MPI_Allreduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, mpi);
        if (i >= 5) t[coo][m].push_back(worst);
      }
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  if (rank == 0)
    std::printf("ranks %d count %zu density %g largest %llu probe_slot %zu | coo: allgatherv %.1f probe_slot %.1f%s learned_slot %.1f | dense: allgatherv %.1f probe_slot %.1f%s learned_slot %.1f\n",
                size, count, density, (unsigned long long)largest, probeSlot, med(t[1][0]), med(t[1][1]),
                largest <= probeSlot ? "" : "(over)", med(t[1][2]), med(t[0][0]), med(t[0][1]),
                largest <= probeSlot ? "" : "(over)", med(t[0][2]));
  dctCommDestroy(comm);
  MPI_Finalize();
}
