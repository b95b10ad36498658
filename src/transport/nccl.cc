// NCCL transport: device buffers, everything on the caller's stream.
// allgatherv and alltoallv are grouped ncclSend/ncclRecv; small host-side
// data (agreement headers, counts) is staged through a device scratch
// buffer, since NCCL only moves device memory.
#include <cuda_runtime.h>
#include <nccl.h>

#include <vector>

#include "transport/comm.h"
#include "base/debug.h"
#include "base/cuda_check.h"
#include "base/memory_space.h"
#include "dct/dct_nccl.h"

namespace dct {
namespace {

struct NcclState {
  ncclComm_t comm = nullptr;
  void* scratch = nullptr;  // device staging for host buffers
  size_t scratchBytes = 0;
};

NcclState* stateOf(dctComm_t comm) { return static_cast<NcclState*>(comm->transportState); }
cudaStream_t streamOf(void* stream) { return static_cast<cudaStream_t>(stream); }

dctResult_t ncclFail(dctComm_t comm, ncclResult_t res, const char* what) {
  const char* detail = comm ? ncclGetLastError(stateOf(comm)->comm) : "";
  return fail(comm, dctTransportError, "%s: %s (%s)", what, ncclGetErrorString(res), detail);
}

#define NCCLCHECK(comm, call)                                               \
  do {                                                                      \
    ncclResult_t nccl_res_ = (call);                                        \
    if (nccl_res_ != ncclSuccess) return ncclFail(comm, nccl_res_, #call);  \
  } while (0)

dctResult_t ensureScratch(dctComm_t comm, size_t bytes) {
  NcclState* s = stateOf(comm);
  if (bytes <= s->scratchBytes) return dctSuccess;
  if (s->scratch) CUDACHECK(cudaFree(s->scratch));
  s->scratch = nullptr;
  s->scratchBytes = 0;
  CUDACHECK(cudaMalloc(&s->scratch, bytes));
  s->scratchBytes = bytes;
  return dctSuccess;
}

// Grouped point-to-point exchange: send[r] bytes to every peer r, recv[r]
// from it; this rank's own block is a device-to-device copy.
dctResult_t exchange(dctComm_t comm, const char* send, const size_t* sendBytes,
                     const size_t* sendOffsets, char* recv, const size_t* recvBytes,
                     const size_t* recvOffsets, cudaStream_t stream) {
  NcclState* s = stateOf(comm);
  const int me = comm->rank;
  if (recvBytes[me])
    CUDACHECK(cudaMemcpyAsync(recv + recvOffsets[me], send + sendOffsets[me], recvBytes[me],
                                    cudaMemcpyDeviceToDevice, stream));
  NCCLCHECK(comm, ncclGroupStart());
  // A failed enqueue must still close the group, or the thread's later NCCL
  // calls (the user's too) would be swallowed into it.
  ncclResult_t res = ncclSuccess;
  const char* what = nullptr;
  for (int r = 0; r < comm->size && res == ncclSuccess; r++) {
    if (r == me) continue;
    if (sendBytes[r] && (res = ncclSend(send + sendOffsets[r], sendBytes[r], ncclUint8, r, s->comm, stream)))
      what = "ncclSend";
    else if (recvBytes[r] && (res = ncclRecv(recv + recvOffsets[r], recvBytes[r], ncclUint8, r, s->comm, stream)))
      what = "ncclRecv";
  }
  ncclResult_t ended = ncclGroupEnd();
  if (res != ncclSuccess) return ncclFail(comm, res, what);
  NCCLCHECK(comm, ended);
  return dctSuccess;
}

dctResult_t allgather(dctComm_t comm, const void* send, void* recv, size_t bytes, void* stream) {
  NcclState* s = stateOf(comm);
  cudaStream_t st = streamOf(stream);
  if (isDeviceMemory(recv)) {
    NCCLCHECK(comm, ncclAllGather(send, recv, bytes, ncclUint8, s->comm, st));
    return dctSuccess;
  }
  // Host data (headers, counts): stage, gather, copy back, wait.
  const size_t total = bytes * comm->size;
  DCTCHECK(ensureScratch(comm, total + bytes));
  char* dev = static_cast<char*>(s->scratch);
  CUDACHECK(cudaMemcpyAsync(dev + total, send, bytes, cudaMemcpyHostToDevice, st));
  NCCLCHECK(comm, ncclAllGather(dev + total, dev, bytes, ncclUint8, s->comm, st));
  CUDACHECK(cudaMemcpyAsync(recv, dev, total, cudaMemcpyDeviceToHost, st));
  CUDACHECK(cudaStreamSynchronize(st));
  return dctSuccess;
}

dctResult_t allgatherv(dctComm_t comm, const void* send, size_t sendBytes, void* recv,
                       const size_t* recvBytes, const size_t* recvOffsets, void* stream) {
  std::vector<size_t> sb(comm->size, sendBytes), so(comm->size, 0);
  return exchange(comm, static_cast<const char*>(send), sb.data(), so.data(),
                  static_cast<char*>(recv), recvBytes, recvOffsets, streamOf(stream));
}

dctResult_t allreduce(dctComm_t comm, const void* send, void* recv, size_t count,
                      dctDataType_t datatype, void* stream) {
  if (datatype != dctFloat32 && datatype != dctFloat64)
    return fail(comm, dctNotSupported, "NCCL allreduce: datatype %d", static_cast<int>(datatype));
  ncclDataType_t type = datatype == dctFloat64 ? ncclFloat64 : ncclFloat32;
  NCCLCHECK(comm, ncclAllReduce(send, recv, count, type, ncclSum, stateOf(comm)->comm, streamOf(stream)));
  return dctSuccess;
}

// Host values through the device scratch (NCCL moves device memory only).
dctResult_t vote(dctComm_t comm, int32_t mine, int32_t* worst, void* stream) {
  NcclState* s = stateOf(comm);
  cudaStream_t st = streamOf(stream);
  int32_t* dev = static_cast<int32_t*>(s->scratch);
  CUDACHECK(cudaMemcpyAsync(dev, &mine, sizeof(mine), cudaMemcpyHostToDevice, st));
  NCCLCHECK(comm, ncclAllReduce(dev, dev, 1, ncclInt32, ncclMax, s->comm, st));
  CUDACHECK(cudaMemcpyAsync(worst, dev, sizeof(*worst), cudaMemcpyDeviceToHost, st));
  CUDACHECK(cudaStreamSynchronize(st));
  return dctSuccess;
}

// Device buffers need no staging; host data (headers) goes through the
// scratch, grown here so that the ops allocate nothing.
dctResult_t prepare(dctComm_t comm, const void*, size_t bytes, void*) {
  return ensureScratch(comm, bytes);
}

void destroy(dctComm_t comm) {
  NcclState* s = stateOf(comm);
  if (s->scratch) cudaFree(s->scratch);
  delete s;
  comm->transportState = nullptr;
}

constexpr Transport kNcclTransport = {
    .name = "NCCL",
    .hostBuffers = false,
    .deviceBuffers = true,
    .prepare = prepare,
    .allgather = allgather,
    .allgatherv = allgatherv,
    .allreduce = allreduce,
    .vote = vote,
    .destroy = destroy,
};

}  // namespace
}  // namespace dct

using namespace dct;

extern "C" dctResult_t dctCommInitNccl(ncclComm_t ncclComm, dctComm_t* out) {
  if (out == nullptr) return fail(nullptr, dctInvalidArgument, "dctCommInitNccl: comm is NULL");
  *out = nullptr;
  if (ncclComm == nullptr) return fail(nullptr, dctInvalidArgument, "dctCommInitNccl: ncclComm is NULL");
  int rank = 0, size = 0;
  ncclResult_t res = ncclCommUserRank(ncclComm, &rank);
  if (res == ncclSuccess) res = ncclCommCount(ncclComm, &size);
  if (res != ncclSuccess)
    return fail(nullptr, dctTransportError, "dctCommInitNccl: %s", ncclGetErrorString(res));
  auto* comm = new (std::nothrow) dctComm();
  auto* state = new (std::nothrow) NcclState();
  if (comm == nullptr || state == nullptr) {
    delete comm;
    delete state;
    return fail(nullptr, dctOutOfMemory, "dctCommInitNccl: out of memory");
  }
  state->comm = ncclComm;
  comm->rank = rank;
  comm->size = size;
  comm->transport = &kNcclTransport;
  comm->transportState = state;
  // The vote must never need memory it cannot get: its scratch exists
  // before any step.
  if (dctResult_t r = ensureScratch(comm, 256); r != dctSuccess) {
    destroy(comm);
    delete comm;
    return r;
  }
  *out = comm;
  return dctSuccess;
}
