// Device buffers in a process whose libdct.so finds no CUDA component
// (DCT_COMPONENT_DIR is an empty folder): the driver recognises them, the
// call fails cleanly, naming libdct_cuda.so and the folder, and nothing
// reads them as host memory. So does dctCommInitNccl.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "dct/dct.h"
#if DCT_TEST_NCCL
#include "dct/dct_nccl.h"
#endif

namespace {

// One rank: every collective is a copy (host buffers only, as declared).
int gather(const void* send, void* recv, size_t bytes, void*, void*) {
  std::memmove(recv, send, bytes);
  return 0;
}
int gatherv(const void* send, size_t sendBytes, void* recv, const size_t*, const size_t* offsets, void*, void*) {
  std::memmove(static_cast<char*>(recv) + offsets[0], send, sendBytes);
  return 0;
}
int alltoallv(const void* send, const size_t* sendBytes, const size_t* sendOffsets, void* recv, const size_t*,
              const size_t* recvOffsets, void*, void*) {
  std::memmove(static_cast<char*>(recv) + recvOffsets[0], static_cast<const char*>(send) + sendOffsets[0],
               sendBytes[0]);
  return 0;
}
int sum(const void* send, void* recv, size_t count, dctDataType_t type, void*, void*) {
  std::memmove(recv, send, count * (type == dctFloat64 ? 8 : type == dctFloat32 ? 4 : 2));
  return 0;
}

void requireNamesComponent(const char* why) {
  INFO(why);
  CHECK(std::strstr(why, "libdct_cuda.so") != nullptr);
  const char* dir = std::getenv("DCT_COMPONENT_DIR");  // ctest sets it; so does bench/device/run.sh
  REQUIRE(dir != nullptr);
  CHECK(std::strstr(why, dir) != nullptr);
}

}  // namespace

TEST_CASE("device buffers without the CUDA component fail cleanly") {
  constexpr size_t n = 1 << 16;
  float* dev = nullptr;
  REQUIRE(cudaMalloc(&dev, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemset(dev, 0, n * sizeof(float)) == cudaSuccess);
  dctCallbacks_t cb = DCT_CALLBACKS_INITIALIZER;
  cb.rank = 0;
  cb.nranks = 1;
  cb.allgather = gather;
  cb.allgatherv = gatherv;
  cb.alltoallv = alltoallv;
  cb.allreduceSum = sum;
  dctComm_t comm = nullptr;
  REQUIRE(dctCommInitCallbacks(&cb, &comm) == dctSuccess);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(comm, n, dctFloat32, nullptr, &c) == dctSuccess);
  for (int attempt = 0; attempt < 2; attempt++) {  // the same answer again
    CHECK(dctSparseAllreduce(dev, dev, n, dctFloat32, dctSum, c, comm, nullptr) != dctSuccess);
    requireNamesComponent(dctGetLastError(comm));
  }
  // Host buffers still work on the same comm.
  std::string host(n * sizeof(float), '\0');
  dctCompressor_t h = nullptr;
  REQUIRE(dctCompressorCreate(comm, n, dctFloat32, nullptr, &h) == dctSuccess);
  CHECK(dctSparseAllreduce(host.data(), host.data(), n, dctFloat32, dctSum, h, comm, nullptr) == dctSuccess);
  dctCompressorDestroy(h);
  dctCompressorDestroy(c);
  dctCommDestroy(comm);
  cudaFree(dev);
}

#if DCT_TEST_NCCL
TEST_CASE("dctCommInitNccl without the CUDA component fails cleanly") {
  dctComm_t comm = nullptr;
  // Never looked at: the component is missing first.
  CHECK(dctCommInitNccl(reinterpret_cast<ncclComm_t>(0x1), &comm) == dctNotSupported);
  CHECK(comm == nullptr);
  requireNamesComponent(dctGetLastError(nullptr));
}
#endif
