// Collectives on device buffers: a 1-rank NCCL communicator (blocking and
// nonblocking), and MPI with device buffers (staged through pinned host
// memory, singleton MPI). Each must give, bit for bit, what the same steps
// give on host buffers; mixing host and device buffers is refused. A call
// on the wrong current device fails and changes nothing. (Calls inside the
// caller's NCCL group are tested at 2+ ranks, test_device_multirank.cc: at
// one rank NCCL runs collectives at once, even in a group.) The sparse
// all-to-all's forward and backward likewise.
#include <cuda_runtime.h>
#include <mpi.h>

#include <cstring>
#include <string>
#include <vector>

#include "cuda_util.h"
#include "dct/dct_mpi.h"
#include "dct/dct_nccl.h"
#include "base/half_types.h"

namespace {

constexpr size_t kCount = 100003;

std::vector<float> gradient(int step) { return dct::test::randomVector<float>(kCount, 900 + step); }

// Runs `steps` sparse allreduce steps on host buffers over `hostComm` and on
// device buffers over `devComm`; every step's results must match. A capacity
// factor turns on the fixed-capacity step (the CPU twin's against the CUDA
// twin's, stream-ordered on NCCL).
void compareHostAndDevice(dctComm_t hostComm, dctComm_t devComm, dctAlgorithm_t algo, double capacityFactor = 0) {
  CAPTURE(algo);
  CAPTURE(capacityFactor);
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  cfg.algorithm = algo;
  cfg.thresholdInterval = 3;
  cfg.capacityFactor = capacityFactor;
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
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // the upload has landed, whatever stream reads it
    REQUIRE(dctSparseAllreduce(g.data(), hostOut.data(), kCount, dctFloat32, dctSum, hostC, hostComm, nullptr) == dctSuccess);
    REQUIRE(dctSparseAllreduce(dIn, dOut, kCount, dctFloat32, dctSum, devC, devComm, nullptr) == dctSuccess);
    REQUIRE(cudaMemcpy(devOut.data(), dOut, kCount * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    for (size_t i = 0; i < kCount; i++) REQUIRE(dct::test::sameValue(hostOut[i], devOut[i]));
  }
  dctStats_t hostStats, devStats;
  REQUIRE(dctCompressorGetStats(hostC, &hostStats) == dctSuccess);
  REQUIRE(dctCompressorGetStats(devC, &devStats) == dctSuccess);
  CHECK(devStats.ownerKept == hostStats.ownerKept);  // global top-k's owner: the same entries
  CHECK(devStats.ownerResidualMass == doctest::Approx(hostStats.ownerResidualMass).epsilon(1e-9));
  // What each holds back (global top-k: the owner residual added in on the
  // device), bit for bit.
  std::vector<float> hostHeld(kCount), devHeld(kCount);
  REQUIRE(dctCompressorGetResidual(hostC, hostHeld.data(), nullptr) == dctSuccess);
  REQUIRE(dctCompressorGetResidual(devC, dIn, nullptr) == dctSuccess);
  REQUIRE(cudaMemcpy(devHeld.data(), dIn, kCount * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  for (size_t i = 0; i < kCount; i++) REQUIRE(dct::test::sameValue(hostHeld[i], devHeld[i]));
  // Host send buffer with a device receive buffer: refused before any work
  // (a fixed-capacity step still votes it, failing the comm for good:
  // test_nccl_fixed_capacity).
  auto g = gradient(0);
  if (capacityFactor == 0)
    CHECK(dctSparseAllreduce(g.data(), dOut, kCount, dctFloat32, dctSum, devC, devComm, nullptr) == dctInvalidArgument);
  cudaFree(dIn);
  cudaFree(dOut);
  dctCompressorDestroy(hostC);
  dctCompressorDestroy(devC);
}

// fp16/bf16 tensors (16-bit words here): `steps` steps on host buffers over
// hostComm and device buffers over devComm give the same bytes.
void compareHalfHostAndDevice(dctComm_t hostComm, dctComm_t devComm, dctAlgorithm_t algo, dctDataType_t dtype) {
  CAPTURE(dtype);
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  cfg.algorithm = algo;
  cfg.thresholdInterval = 3;
  dctCompressor_t hostC = nullptr, devC = nullptr;
  REQUIRE(dctCompressorCreate(hostComm, kCount, dtype, &cfg, &hostC) == dctSuccess);
  REQUIRE(dctCompressorCreate(devComm, kCount, dtype, &cfg, &devC) == dctSuccess);
  dct::test::DeviceArray<uint16_t> dIn(kCount), dOut(kCount);
  std::vector<uint16_t> in(kCount), hostOut(kCount);
  for (int step = 0; step < 6; step++) {
    CAPTURE(step);
    const auto g = gradient(step);
    for (size_t i = 0; i < kCount; i++)
      in[i] = dtype == dctFloat16 ? dct::Value<dct::Half>::store(g[i]).bits : dct::Value<dct::BFloat16>::store(g[i]).bits;
    dIn.upload(in);
    REQUIRE(dctSparseAllreduce(in.data(), hostOut.data(), kCount, dtype, dctSum, hostC, hostComm, nullptr) == dctSuccess);
    REQUIRE(dctSparseAllreduce(dIn.get(), dOut.get(), kCount, dtype, dctSum, devC, devComm, nullptr) == dctSuccess);
    const auto devOut = dOut.download();
    REQUIRE(std::memcmp(devOut.data(), hostOut.data(), kCount * sizeof(uint16_t)) == 0);
  }
  dctCompressorDestroy(hostC);
  dctCompressorDestroy(devC);
}

// The sparse all-to-all at one rank (all rows to itself): forward and
// backward on device buffers over devComm equal the host path byte for byte,
// values on an fp32 and an fp16 wire.
void compareAlltoall(dctComm_t hostComm, dctComm_t devComm) {
  const size_t d = 64, rows = 37;
  for (dctRowSelection_t sel : {dctRowTopK, dctRowThreshold})
    for (dctDataType_t wire : {dctFloat32, dctFloat16}) {
      CAPTURE(sel);
      CAPTURE(wire);
      dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
      cfg.density = 0.05;
      cfg.rowSelection = sel;
      cfg.wireType = wire;
      dctAlltoallPlan_t hostPlan = nullptr, devPlan = nullptr;
      REQUIRE(dctAlltoallPlanCreate(hostComm, &rows, &rows, d, dctFloat32, &cfg, &hostPlan) == dctSuccess);
      REQUIRE(dctAlltoallPlanCreate(devComm, &rows, &rows, d, dctFloat32, &cfg, &devPlan) == dctSuccess);
      const auto in = dct::test::randomVector<float>(rows * d, 71);
      const auto grad = dct::test::randomVector<float>(rows * d, 72);
      std::vector<float> out(rows * d), back(rows * d);
      dct::test::DeviceArray<float> dIn(in), dOut(rows * d), dGrad(grad), dBack(rows * d);
      REQUIRE(dctSparseAlltoall(hostPlan, in.data(), out.data(), nullptr) == dctSuccess);
      REQUIRE(dctSparseAlltoallBackward(hostPlan, grad.data(), back.data(), nullptr) == dctSuccess);
      REQUIRE(dctSparseAlltoall(devPlan, dIn.get(), dOut.get(), nullptr) == dctSuccess);
      REQUIRE(dctSparseAlltoallBackward(devPlan, dGrad.get(), dBack.get(), nullptr) == dctSuccess);
      const auto devOut = dOut.download(), devBack = dBack.download();
      REQUIRE(std::memcmp(devOut.data(), out.data(), out.size() * sizeof(float)) == 0);
      REQUIRE(std::memcmp(devBack.data(), back.data(), back.size() * sizeof(float)) == 0);
      // Host buffers on a plan whose state is on the device: refused.
      CHECK(dctSparseAlltoall(devPlan, in.data(), out.data(), nullptr) == dctInvalidArgument);
      dctAlltoallPlanDestroy(hostPlan);
      dctAlltoallPlanDestroy(devPlan);
    }
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
  for (double c : {1.0, 1.25, 3.0}) compareHostAndDevice(hostComm, devComm, dctAlgoAllgather, c);
  for (double c : {1.25, 2.0}) compareHostAndDevice(hostComm, devComm, dctAlgoGlobalTopk, c);
  compareAlltoall(hostComm, devComm);
  // fp16 and bf16 tensors, byte for byte (ncclFloat16 / ncclBfloat16 when dense).
  for (dctDataType_t dtype : {dctFloat16, dctBFloat16})
    for (dctAlgorithm_t algo : {dctAlgoAllgather, dctAlgoDense}) compareHalfHostAndDevice(hostComm, devComm, algo, dtype);
  dctCommDestroy(devComm);
  dctCommDestroy(hostComm);
  ncclCommDestroy(nccl);
}

TEST_CASE("MPI with device buffers (staged) matches the host path") {
  ensureMpi();
  dctComm_t comm = nullptr;
  REQUIRE(dctCommInitMpi(MPI_COMM_WORLD, &comm) == dctSuccess);
  for (dctAlgorithm_t algo : {dctAlgoAllgather, dctAlgoDense, dctAlgoSplit, dctAlgoGlobalTopk})
    compareHostAndDevice(comm, comm, algo);
  compareHostAndDevice(comm, comm, dctAlgoAllgather, 1.25);
  compareHostAndDevice(comm, comm, dctAlgoGlobalTopk, 1.25);
  compareAlltoall(comm, comm);
  dctCommDestroy(comm);
}

namespace {

// Steps host buffers over hostComm and device buffers over devComm through
// `steps`; `before` may disturb the device call of step 1 (which must then
// fail and change nothing: the retry is exact).
template <typename Disturb>
void retryAfter(dctComm_t hostComm, dctComm_t devComm, Disturb&& before, dctResult_t expected) {
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  cfg.algorithm = dctAlgoAllgather;
  dctCompressor_t hostC = nullptr, devC = nullptr;
  REQUIRE(dctCompressorCreate(hostComm, kCount, dctFloat32, &cfg, &hostC) == dctSuccess);
  REQUIRE(dctCompressorCreate(devComm, kCount, dctFloat32, &cfg, &devC) == dctSuccess);
  dct::test::DeviceArray<float> dIn(kCount), dOut(kCount);
  std::vector<float> hostOut(kCount);
  for (int step = 0; step < 3; step++) {
    CAPTURE(step);
    const auto g = gradient(step);
    dIn.upload(g);
    if (step == 1) CHECK(before([&] {
      return dctSparseAllreduce(dIn.get(), dOut.get(), kCount, dctFloat32, dctSum, devC, devComm, nullptr);
    }) == expected);
    REQUIRE(dctSparseAllreduce(g.data(), hostOut.data(), kCount, dctFloat32, dctSum, hostC, hostComm, nullptr) == dctSuccess);
    REQUIRE(dctSparseAllreduce(dIn.get(), dOut.get(), kCount, dctFloat32, dctSum, devC, devComm, nullptr) == dctSuccess);
    const auto devOut = dOut.download();
    for (size_t i = 0; i < kCount; i++) REQUIRE(dct::test::sameValue(hostOut[i], devOut[i]));
  }
  dctCompressorDestroy(hostC);
  dctCompressorDestroy(devC);
}

struct NcclOnDevice0 {
  ncclComm_t nccl = nullptr;
  dctComm_t dev = nullptr, host = nullptr;
  NcclOnDevice0() {
    ensureMpi();
    int device = 0;
    REQUIRE(cudaSetDevice(0) == cudaSuccess);
    REQUIRE(ncclCommInitAll(&nccl, 1, &device) == ncclSuccess);
    REQUIRE(dctCommInitNccl(nccl, &dev) == dctSuccess);
    REQUIRE(dctCommInitMpi(MPI_COMM_WORLD, &host) == dctSuccess);
  }
  ~NcclOnDevice0() {
    dctCommDestroy(dev);
    dctCommDestroy(host);
    ncclCommDestroy(nccl);
  }
};

}  // namespace

TEST_CASE("1-rank nonblocking NCCL communicator: ncclInProgress is waited for") {
  ensureMpi();
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t nccl = nullptr;
  const ncclResult_t init = ncclCommInitRankConfig(&nccl, 1, id, 0, &config);
  REQUIRE((init == ncclSuccess || init == ncclInProgress));
  dctComm_t devComm = nullptr, hostComm = nullptr;
  REQUIRE(dctCommInitNccl(nccl, &devComm) == dctSuccess);  // waits for the initialisation
  REQUIRE(dctCommInitMpi(MPI_COMM_WORLD, &hostComm) == dctSuccess);
  compareHostAndDevice(hostComm, devComm, dctAlgoAllgather);
  compareHostAndDevice(hostComm, devComm, dctAlgoDense);
  for (double c : {1.0, 1.25, 3.0}) compareHostAndDevice(hostComm, devComm, dctAlgoAllgather, c);
  for (double c : {1.25, 2.0}) compareHostAndDevice(hostComm, devComm, dctAlgoGlobalTopk, c);
  compareAlltoall(hostComm, devComm);
  dctCommDestroy(devComm);
  dctCommDestroy(hostComm);
  ncclResult_t state = ncclCommFinalize(nccl);
  while (state == ncclInProgress) REQUIRE(ncclCommGetAsyncError(nccl, &state) == ncclSuccess);
  CHECK(state == ncclSuccess);
  ncclCommDestroy(nccl);
}

TEST_CASE("a call on another device than the NCCL communicator's is refused; the retry is exact") {
  int devices = 0;
  REQUIRE(cudaGetDeviceCount(&devices) == cudaSuccess);
  if (devices < 2) {
    MESSAGE("skipped: needs two GPUs");
    return;
  }
  NcclOnDevice0 c;
  retryAfter(c.host, c.dev, [&](auto&& call) {
    REQUIRE(cudaSetDevice(1) == cudaSuccess);
    const dctResult_t res = call();
    REQUIRE(cudaSetDevice(0) == cudaSuccess);
    CHECK(std::string(dctGetLastError(c.dev)).find("device") != std::string::npos);
    return res;
  }, dctInvalidUsage);
}
