// Helpers of the multi-rank device tests (mpi_cuda_main.cc has set each
// rank's device): device buffers on a rank's own stream, the NCCL
// communicator when every rank has a GPU of its own, cross-rank checks.
#pragma once

#include <cuda_runtime.h>
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstring>
#include <vector>

#include "dct/dct_mpi.h"
#if DCT_TEST_NCCL
#include "dct/dct_nccl.h"
#endif

namespace devtest {

#define CUDA_OK(call) REQUIRE((call) == cudaSuccess)

inline int worldRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int worldSize() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

inline bool allTrue(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

// True when every rank holds the same bytes.
inline bool identicalOnAllRanks(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 1469598103934665603ull, lo = 0, hi = 0;
  for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
  MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

// NCCL needs a GPU per rank: the node's ranks may not outnumber its GPUs.
inline bool gpuPerRank() {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, worldRank(), MPI_INFO_NULL, &node);
  int localSize = 1, devices = 0;
  MPI_Comm_size(node, &localSize);
  MPI_Comm_free(&node);
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  return allTrue(localSize <= devices);
}

// A device array whose transfers run on `stream` and wait for it.
template <typename T>
struct DeviceVec {
  T* p = nullptr;
  size_t n = 0;
  cudaStream_t stream;
  DeviceVec(size_t count, cudaStream_t s) : n(count), stream(s) {
    if (n) CUDA_OK(cudaMalloc(&p, n * sizeof(T)));
  }
  DeviceVec(const DeviceVec&) = delete;
  DeviceVec& operator=(const DeviceVec&) = delete;
  ~DeviceVec() {
    if (p) cudaFree(p);
  }
  void upload(const std::vector<T>& host) {
    REQUIRE(host.size() == n);
    if (n) CUDA_OK(cudaMemcpyAsync(p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
  }
  std::vector<T> download() const {
    std::vector<T> host(n);
    if (n) CUDA_OK(cudaMemcpyAsync(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    return host;
  }
};

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s); }
};

struct MpiComm {
  dctComm_t comm = nullptr;
  MpiComm() { REQUIRE(dctCommInitMpi(MPI_COMM_WORLD, &comm) == dctSuccess); }
  ~MpiComm() { dctCommDestroy(comm); }
};

#if DCT_TEST_NCCL
// One NCCL communicator over MPI_COMM_WORLD on each rank's current device;
// nonblocking (ncclConfig_t.blocking = 0) on request: dctCommInitNccl then
// waits for its initialisation.
struct NcclComm {
  ncclComm_t nccl = nullptr;
  dctComm_t comm = nullptr;
  bool nonblocking;
  explicit NcclComm(bool nonblocking_ = false) : nonblocking(nonblocking_) {
    ncclUniqueId id;
    ncclResult_t got = worldRank() == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    REQUIRE(allTrue(got == ncclSuccess));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = nonblocking ? 0 : 1;
    const ncclResult_t res = ncclCommInitRankConfig(&nccl, worldSize(), id, worldRank(), &config);
    REQUIRE((res == ncclSuccess || (nonblocking && res == ncclInProgress)));
    REQUIRE(dctCommInitNccl(nccl, &comm) == dctSuccess);
  }
  ~NcclComm() {
    dctCommDestroy(comm);
    ncclResult_t state = ncclCommFinalize(nccl);
    while (state == ncclInProgress)
      if (ncclCommGetAsyncError(nccl, &state) != ncclSuccess) break;
    ncclCommDestroy(nccl);
  }
};
#endif

}  // namespace devtest
