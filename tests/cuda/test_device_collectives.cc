// Collectives on device buffers: a 1-rank NCCL communicator, and MPI with
// device buffers (staged through pinned host memory, singleton MPI). Each
// must give, bit for bit, what the same steps give on host buffers; mixing
// host and device buffers is refused.
#include <cuda_runtime.h>
#include <mpi.h>

#include <vector>

#include "cuda_util.h"
#include "dct/dct_mpi.h"
#include "dct/dct_nccl.h"

namespace {

constexpr size_t kCount = 100003;

std::vector<float> gradient(int step) { return dct::test::randomVector<float>(kCount, 900 + step); }

// Runs `steps` sparse allreduce steps on host buffers over `hostComm` and on
// device buffers over `devComm`; every step's results must match.
void compareHostAndDevice(dctComm_t hostComm, dctComm_t devComm, dctAlgorithm_t algo) {
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  cfg.algorithm = algo;
  cfg.thresholdInterval = 3;
  dctCompressor_t hostC = nullptr, devC = nullptr;
  REQUIRE(dctCompressorCreate(hostComm, kCount, dctFloat32, &cfg, &hostC) == dctSuccess);
  REQUIRE(dctCompressorCreate(devComm, kCount, dctFloat32, &cfg, &devC) == dctSuccess);
  float *dIn = nullptr, *dOut = nullptr;
  REQUIRE(cudaMalloc(&dIn, kCount * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMalloc(&dOut, kCount * sizeof(float)) == cudaSuccess);
  std::vector<float> hostOut(kCount), devOut(kCount);
  for (int step = 0; step < 6; step++) {
    CAPTURE(step);
    auto g = gradient(step);
    REQUIRE(cudaMemcpy(dIn, g.data(), kCount * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(dctSparseAllreduce(g.data(), hostOut.data(), kCount, dctFloat32, dctSum, hostC, hostComm, nullptr) == dctSuccess);
    REQUIRE(dctSparseAllreduce(dIn, dOut, kCount, dctFloat32, dctSum, devC, devComm, nullptr) == dctSuccess);
    REQUIRE(cudaMemcpy(devOut.data(), dOut, kCount * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    for (size_t i = 0; i < kCount; i++) REQUIRE(dct::test::sameValue(hostOut[i], devOut[i]));
  }
  // Host send buffer with a device receive buffer: refused before any work.
  auto g = gradient(0);
  CHECK(dctSparseAllreduce(g.data(), dOut, kCount, dctFloat32, dctSum, devC, devComm, nullptr) == dctInvalidArgument);
  cudaFree(dIn);
  cudaFree(dOut);
  dctCompressorDestroy(hostC);
  dctCompressorDestroy(devC);
}

struct MpiSingleton {
  MpiSingleton() {
    int ready = 0;
    MPI_Initialized(&ready);
    if (!ready) MPI_Init(nullptr, nullptr);
  }
  ~MpiSingleton() {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
  }
};

// MPI may be initialised once per process: both cases share it.
void ensureMpi() { static MpiSingleton mpi; }

}  // namespace

TEST_CASE("1-rank NCCL communicator matches the host path") {
  ensureMpi();
  ncclComm_t nccl = nullptr;
  int device = 0;
  REQUIRE(ncclCommInitAll(&nccl, 1, &device) == ncclSuccess);
  dctComm_t devComm = nullptr, hostComm = nullptr;
  REQUIRE(dctCommInitNccl(nccl, &devComm) == dctSuccess);
  REQUIRE(dctCommInitMpi(MPI_COMM_WORLD, &hostComm) == dctSuccess);
  compareHostAndDevice(hostComm, devComm, dctAlgoAllgather);
  compareHostAndDevice(hostComm, devComm, dctAlgoDense);
  dctCommDestroy(devComm);
  dctCommDestroy(hostComm);
  ncclCommDestroy(nccl);
}

TEST_CASE("MPI with device buffers (staged) matches the host path") {
  ensureMpi();
  dctComm_t comm = nullptr;
  REQUIRE(dctCommInitMpi(MPI_COMM_WORLD, &comm) == dctSuccess);
  compareHostAndDevice(comm, comm, dctAlgoAllgather);
  compareHostAndDevice(comm, comm, dctAlgoDense);
  dctCommDestroy(comm);
}
