// Collectives on device buffers at 2-4 ranks: MPI with staging, and NCCL
// when every rank has its own GPU. Each must give, bit for bit, what the MPI
// transport gives on host buffers (the dense algorithm over NCCL sums in
// NCCL's order: equal on every rank, close to MPI's). NCCL runs blocking and
// nonblocking, its allgatherv in both forms (padded allgather, grouped
// broadcasts); a call inside the caller's NCCL group, or on the wrong CUDA
// device on one rank, fails the step on every rank and the retry is exact.
// The sparse all-to-all (forward and backward) must match byte for byte; so
// must split and global top-k (the owners' tau, selection and residual).
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "device_ranks.h"
#include "reference.h"

using namespace devtest;

namespace {

constexpr size_t kCount = 100003;

std::vector<float> gradient(int step) {
  return dct::test::randomVector<float>(kCount, 900 + 31 * step + worldRank(), false);
}

struct Pair {
  dctCompressor_t host = nullptr, device = nullptr;
  Pair(dctComm_t hostComm, dctComm_t devComm, dctAlgorithm_t algo, double capacityFactor = 0) {
    dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
    cfg.algorithm = algo;
    cfg.thresholdInterval = 3;
    cfg.capacityFactor = capacityFactor;
    REQUIRE(dctCompressorCreate(hostComm, kCount, dctFloat32, &cfg, &host) == dctSuccess);
    REQUIRE(dctCompressorCreate(devComm, kCount, dctFloat32, &cfg, &device) == dctSuccess);
  }
  ~Pair() {
    dctCompressorDestroy(host);
    dctCompressorDestroy(device);
  }
};

// Six steps on host buffers over hostComm and on device buffers over devComm
// (a capacity factor: the fixed-capacity step, CPU twin against CUDA twin).
void compareAllreduce(dctComm_t hostComm, dctComm_t devComm, dctAlgorithm_t algo, bool exact,
                      double capacityFactor = 0) {
  CAPTURE(algo);
  CAPTURE(capacityFactor);
  Stream st;
  Pair p(hostComm, devComm, algo, capacityFactor);
  DeviceVec<float> dIn(kCount, st.s), dOut(kCount, st.s);
  std::vector<float> hostOut(kCount);
  for (int step = 0; step < 6; step++) {
    CAPTURE(step);
    const auto g = gradient(step);
    dIn.upload(g);
    REQUIRE(dctSparseAllreduce(g.data(), hostOut.data(), kCount, dctFloat32, dctSum, p.host, hostComm, nullptr) == dctSuccess);
    REQUIRE(dctSparseAllreduce(dIn.p, dOut.p, kCount, dctFloat32, dctSum, p.device, devComm, st.s) == dctSuccess);
    const auto devOut = dOut.download();
    CHECK(identicalOnAllRanks(devOut.data(), kCount * sizeof(float)));
    for (size_t i = 0; i < kCount; i++) {
      CAPTURE(i);
      if (exact) REQUIRE(std::memcmp(&devOut[i], &hostOut[i], sizeof(float)) == 0);
      else REQUIRE(std::fabs(devOut[i] - hostOut[i]) <= 1e-5f * (std::fabs(hostOut[i]) + 1.0f));
    }
  }
}

// dctSparseAllgather with rank r giving nnz[r] entries: device buffers over
// devComm against host buffers over hostComm, byte for byte.
void compareAllgather(dctComm_t hostComm, dctComm_t devComm, const std::vector<size_t>& nnz) {
  const int me = worldRank();
  const size_t mine = nnz[me];
  const auto val = dct::test::randomVector<float>(mine, 300 + me, false);
  const auto idx = dct::test::randomIndices<uint32_t>(kCount, mine, false, 400 + me);
  size_t total = 0;
  for (size_t k : nnz) total += k;
  std::vector<size_t> counts(nnz.size()), devCounts(nnz.size());
  size_t got = 0, devGot = 0;
  std::vector<float> hostVal(total);
  std::vector<uint32_t> hostIdx(total);
  REQUIRE(dctSparseAllgather(val.data(), idx.data(), mine, kCount, hostVal.data(), hostIdx.data(), total,
                             counts.data(), &got, dctFloat32, hostComm, nullptr) == dctSuccess);
  REQUIRE(got == total);
  Stream st;
  DeviceVec<float> dVal(mine, st.s), dRecvVal(total, st.s);
  DeviceVec<uint32_t> dIdx(mine, st.s), dRecvIdx(total, st.s);
  dVal.upload(val);
  dIdx.upload(idx);
  REQUIRE(dctSparseAllgather(dVal.p, dIdx.p, mine, kCount, nullptr, nullptr, 0, devCounts.data(), &devGot,
                             dctFloat32, devComm, st.s) == dctSuccess);  // query phase
  REQUIRE(devGot == total);
  REQUIRE(dctSparseAllgather(dVal.p, dIdx.p, mine, kCount, dRecvVal.p, dRecvIdx.p, total, devCounts.data(),
                             &devGot, dctFloat32, devComm, st.s) == dctSuccess);
  CHECK(devCounts == counts);
  const auto devVal = dRecvVal.download();
  const auto devIdx = dRecvIdx.download();
  REQUIRE(devIdx == hostIdx);
  if (total) REQUIRE(std::memcmp(devVal.data(), hostVal.data(), total * sizeof(float)) == 0);
}

// Equal sizes (NCCL: padded allgather), one large among small and some
// empty (NCCL: grouped broadcasts).
void allgatherShapes(dctComm_t hostComm, dctComm_t devComm) {
  const int P = worldSize();
  std::vector<size_t> equal(P, 1000), skewed(P, 10), holes(P);
  skewed[0] = 20000;
  for (int r = 0; r < P; r++) holes[r] = r % 2 ? 0 : 1000 + r;
  for (const auto& nnz : {equal, skewed, holes}) compareAllgather(hostComm, devComm, nnz);
}

// Sparse all-to-all forward and backward (top-K and threshold, uneven and
// empty splits, NaN/Inf rows, fp32 and bf16 wire values) on device buffers
// over devComm against host buffers over hostComm, byte for byte.
void compareAlltoall(dctComm_t hostComm, dctComm_t devComm) {
  const int P = worldSize(), me = worldRank();
  const size_t d = 129;
  std::vector<size_t> send(P), recv(P);
  size_t S = 0, R = 0;
  for (int q = 0; q < P; q++) {
    S += send[q] = (me + 2 * q) % 3 * 5;
    R += recv[q] = (q + 2 * me) % 3 * 5;
  }
  for (dctRowSelection_t sel : {dctRowTopK, dctRowThreshold})
    for (dctDataType_t wire : {dctFloat32, dctBFloat16}) {
      CAPTURE(sel);
      CAPTURE(wire);
      dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
      cfg.density = 0.05;
      cfg.rowSelection = sel;
      cfg.wireType = wire;
      cfg.thresholdInterval = 2;
      dctAlltoallPlan_t hostPlan = nullptr, devPlan = nullptr;
      REQUIRE(dctAlltoallPlanCreate(hostComm, send.data(), recv.data(), d, dctFloat32, &cfg, &hostPlan) == dctSuccess);
      REQUIRE(dctAlltoallPlanCreate(devComm, send.data(), recv.data(), d, dctFloat32, &cfg, &devPlan) == dctSuccess);
      Stream st;
      DeviceVec<float> dIn(S * d, st.s), dOut(R * d, st.s), dGrad(R * d, st.s), dBack(S * d, st.s);
      std::vector<float> out(R * d), back(S * d);
      for (int step = 0; step < 3; step++) {
        CAPTURE(step);
        const auto in = dct::test::randomVector<float>(S * d, 50 + 7 * step + 100 * me);
        const auto grad = dct::test::randomVector<float>(R * d, 60 + 7 * step + 100 * me, false);
        dIn.upload(in);
        dGrad.upload(grad);
        REQUIRE(dctSparseAlltoall(hostPlan, in.data(), out.data(), nullptr) == dctSuccess);
        REQUIRE(dctSparseAlltoallBackward(hostPlan, grad.data(), back.data(), nullptr) == dctSuccess);
        REQUIRE(dctSparseAlltoall(devPlan, dIn.p, dOut.p, st.s) == dctSuccess);
        REQUIRE(dctSparseAlltoallBackward(devPlan, dGrad.p, dBack.p, st.s) == dctSuccess);
        const auto devOut = dOut.download(), devBack = dBack.download();
        if (R) REQUIRE(std::memcmp(devOut.data(), out.data(), R * d * sizeof(float)) == 0);
        if (S) REQUIRE(std::memcmp(devBack.data(), back.data(), S * d * sizeof(float)) == 0);
      }
      dctAlltoallPlanDestroy(hostPlan);
      dctAlltoallPlanDestroy(devPlan);
    }
}

}  // namespace

TEST_CASE("MPI with device buffers (staged) matches host buffers") {
  // The CUDA twin's split plans exchange pairwise; auto may halve the host
  // twin's at 4 ranks, summing in another order (docs/design.md, Run to run).
  setenv("DCT_SPLIT_EXCHANGE", "pairwise", 1);
  MpiComm mpi;
  unsetenv("DCT_SPLIT_EXCHANGE");
  for (dctAlgorithm_t algo : {dctAlgoAllgather, dctAlgoDense, dctAlgoSplit, dctAlgoGlobalTopk})
    compareAllreduce(mpi.comm, mpi.comm, algo, true);
  for (double c : {1.25, 2.0}) {
    compareAllreduce(mpi.comm, mpi.comm, dctAlgoAllgather, true, c);
    compareAllreduce(mpi.comm, mpi.comm, dctAlgoGlobalTopk, true, c);
  }
  allgatherShapes(mpi.comm, mpi.comm);
  compareAlltoall(mpi.comm, mpi.comm);
  // Global top-k returning what no owner selects to its senders (DCT_OWNER_RETURN: the masked scatter-add).
  setenv("DCT_SPLIT_EXCHANGE", "pairwise", 1);
  setenv("DCT_OWNER_RETURN", "1", 1);
  MpiComm returning;
  unsetenv("DCT_SPLIT_EXCHANGE");
  unsetenv("DCT_OWNER_RETURN");
  compareAllreduce(returning.comm, returning.comm, dctAlgoGlobalTopk, true);
}

#if DCT_TEST_NCCL
TEST_CASE("NCCL (a GPU per rank; blocking and nonblocking) matches MPI on host buffers") {
  if (!gpuPerRank()) {
    MESSAGE("NCCL cases skipped: fewer GPUs than ranks on a node");
    return;
  }
  MpiComm mpi;
  for (bool nonblocking : {false, true}) {
    CAPTURE(nonblocking);
    NcclComm nccl(nonblocking);
    for (dctAlgorithm_t algo : {dctAlgoAllgather, dctAlgoSplit, dctAlgoGlobalTopk})
      compareAllreduce(mpi.comm, nccl.comm, algo, true);
    compareAllreduce(mpi.comm, nccl.comm, dctAlgoAllgather, true, 1.25);
    compareAllreduce(mpi.comm, nccl.comm, dctAlgoGlobalTopk, true, 1.25);
    compareAllreduce(mpi.comm, nccl.comm, dctAlgoDense, false);
    allgatherShapes(mpi.comm, nccl.comm);
    compareAlltoall(mpi.comm, nccl.comm);
  }
}

TEST_CASE("NCCL: a call inside the caller's group fails on every rank; the retry outside is exact") {
  if (!gpuPerRank()) {
    MESSAGE("skipped: fewer GPUs than ranks on a node");
    return;
  }
  MpiComm mpi;
  NcclComm nccl;
  Stream st;
  Pair p(mpi.comm, nccl.comm, dctAlgoAllgather);
  DeviceVec<float> dIn(kCount, st.s), dOut(kCount, st.s);
  std::vector<float> hostOut(kCount);
  for (int step = 0; step < 3; step++) {
    CAPTURE(step);
    const auto g = gradient(step);
    dIn.upload(g);
    if (step == 1) {
      REQUIRE(ncclGroupStart() == ncclSuccess);
      const dctResult_t res = dctSparseAllreduce(dIn.p, dOut.p, kCount, dctFloat32, dctSum, p.device, nccl.comm, st.s);
      REQUIRE(ncclGroupEnd() == ncclSuccess);  // runs libdct's deferred gather and vote, harmlessly
      CUDA_OK(cudaStreamSynchronize(st.s));
      CHECK(res == dctInvalidUsage);
    }
    REQUIRE(dctSparseAllreduce(g.data(), hostOut.data(), kCount, dctFloat32, dctSum, p.host, mpi.comm, nullptr) == dctSuccess);
    REQUIRE(dctSparseAllreduce(dIn.p, dOut.p, kCount, dctFloat32, dctSum, p.device, nccl.comm, st.s) == dctSuccess);
    const auto devOut = dOut.download();
    REQUIRE(std::memcmp(devOut.data(), hostOut.data(), kCount * sizeof(float)) == 0);
  }
}

TEST_CASE("NCCL: a rank on the wrong device fails the step on every rank; the retry is exact") {
  int devices = 0;
  CUDA_OK(cudaGetDeviceCount(&devices));
  if (!gpuPerRank() || !allTrue(devices >= 2)) {
    MESSAGE("skipped: needs a GPU per rank and two GPUs per node");
    return;
  }
  MpiComm mpi;
  NcclComm nccl;
  Stream st;
  Pair p(mpi.comm, nccl.comm, dctAlgoAllgather);
  DeviceVec<float> dIn(kCount, st.s), dOut(kCount, st.s);
  std::vector<float> hostOut(kCount);
  int mine = -1;
  CUDA_OK(cudaGetDevice(&mine));
  const bool bad = worldRank() == worldSize() - 1;
  for (int step = 0; step < 3; step++) {
    CAPTURE(step);
    const auto g = gradient(step);
    dIn.upload(g);
    if (step == 1) {
      if (bad) CUDA_OK(cudaSetDevice((mine + 1) % devices));
      const dctResult_t res = dctSparseAllreduce(dIn.p, dOut.p, kCount, dctFloat32, dctSum, p.device, nccl.comm, st.s);
      CUDA_OK(cudaSetDevice(mine));
      CHECK(res != dctSuccess);
      if (bad) CHECK(res == dctInvalidUsage);
    }
    REQUIRE(dctSparseAllreduce(g.data(), hostOut.data(), kCount, dctFloat32, dctSum, p.host, mpi.comm, nullptr) == dctSuccess);
    REQUIRE(dctSparseAllreduce(dIn.p, dOut.p, kCount, dctFloat32, dctSum, p.device, nccl.comm, st.s) == dctSuccess);
    const auto devOut = dOut.download();
    REQUIRE(std::memcmp(devOut.data(), hostOut.data(), kCount * sizeof(float)) == 0);
  }
}
#endif
