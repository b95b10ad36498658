// NCCL transport: device buffers, everything on the caller's stream. Small
// host data (agreement headers, votes) is staged through a device buffer
// allocated at init, since NCCL only moves device memory.
//
// Semantics (README, "NCCL transport"):
//  * Nonblocking communicators (ncclConfig_t.blocking = 0) are supported by
//    waiting: every NCCL call that answers ncclInProgress is polled with
//    ncclCommGetAsyncError until it completes (nccl_state.h, settle()), and
//    dctCommInitNccl waits for a communicator still initialising. libdct
//    calls therefore block as with a blocking communicator; the same code
//    serves both modes, which matters because NCCL 2.28 has no query for a
//    communicator's blocking mode.
//  * The current CUDA device must be the communicator's (ncclCommCuDevice):
//    prepare(), which the algorithms run before each collective's agreement,
//    refuses a mismatch with dctInvalidUsage, so the step fails on every
//    rank; each op runs on the communicator's device meanwhile (DeviceGuard).
//  * Calls inside the caller's ncclGroupStart/ncclGroupEnd are unsupported:
//    NCCL defers every operation to the caller's ncclGroupEnd, but a libdct
//    collective needs its agreement headers on the host before it returns
//    (a stream synchronisation), so it would wait on - or read - data that
//    cannot exist yet. NCCL 2.28 exposes no group depth to test beforehand;
//    the host gathers and the vote notice afterwards that their data never
//    moved and return dctInvalidUsage, leaving their deferred operations
//    (into libdct's own staging buffer) to run at the caller's ncclGroupEnd.
//    A 1-rank communicator is not caught: NCCL runs its collectives at once
//    even inside a group, so such a call simply works.
//  * allgatherv: a padded ncclAllGather when sizes are close, else grouped
//    ncclBroadcasts (nccl_gather.cc).
//  * alltoallv: grouped ncclSend/ncclRecv, zero-byte peers skipped, the own
//    block a device-to-device copy on the stream.
#include <cuda_runtime.h>
#include <nccl.h>

#include <unistd.h>

#include <cstdint>
#include <new>
#include <thread>
#include <vector>

#include "base/memory_space.h"
#include "dct/dct_nccl.h"
#include "transport/nccl_state.h"

namespace dct::nccl {

ncclResult_t settle(ncclComm_t comm, ncclResult_t res) {
  while (res == ncclInProgress) {
    std::this_thread::yield();
    const ncclResult_t query = ncclCommGetAsyncError(comm, &res);
    if (query != ncclSuccess) return query;
  }
  return res;
}

dctResult_t ncclFail(dctComm_t comm, ncclResult_t res, const char* what) {
  const char* detail = comm ? ncclGetLastError(stateOf(comm)->comm) : "";
  return fail(comm, dctTransportError, "%s: %s (%s)", what, ncclGetErrorString(res), detail);
}

dctResult_t reservePadded(State* s, size_t bytes) {
  if (bytes <= s->padded.bytes) return dctSuccess;
  if (s->paddedPending) CUDACHECK(cudaEventSynchronize(s->paddedFree));
  s->paddedPending = false;
  if (s->padded.ptr) CUDACHECK(cudaFree(s->padded.ptr));
  s->padded = DeviceBuffer{};
  CUDACHECK(cudaMalloc(&s->padded.ptr, bytes));
  s->padded.bytes = bytes;
  return dctSuccess;
}

namespace {

cudaStream_t streamOf(void* stream) { return static_cast<cudaStream_t>(stream); }

dctResult_t checkDevice(dctComm_t comm) {
  int current = -1;
  CUDACHECK(cudaGetDevice(&current));
  const int device = stateOf(comm)->device;
  if (current == device) return dctSuccess;
  return fail(comm, dctInvalidUsage,
              "NCCL transport: the current CUDA device is %d but the communicator's is %d (cudaSetDevice(%d) first)",
              current, device, device);
}

dctResult_t allgather(dctComm_t comm, const void* send, void* recv, size_t bytes, void* stream) {
  State* s = stateOf(comm);
  DeviceGuard guard(s->device);
  if (!isDeviceMemory(recv)) return allgatherHost(comm, send, recv, bytes, streamOf(stream));
  size_t total = 0;
  if (!checkedMul(bytes, static_cast<size_t>(comm->size), total))  // every rank alike: bytes is agreed
    return fail(comm, dctInvalidArgument, "NCCL allgather: %zu bytes x %d ranks does not fit size_t", bytes,
                comm->size);
  NCCLCHECK(comm, ncclAllGather(send, recv, bytes, ncclUint8, s->comm, streamOf(stream)));
  return dctSuccess;
}

dctResult_t allgatherv(dctComm_t comm, const void* send, size_t, void* recv, const size_t* recvBytes,
                       const size_t* recvOffsets, void* stream) {
  DeviceGuard guard(stateOf(comm)->device);
  return allgathervDevice(comm, send, recv, recvBytes, recvOffsets, streamOf(stream));
}

// Rounds of sends and receives per ncclGroupStart/End (two operations
// each): NCCL has capped the operations of one group (2048 in older
// releases).
constexpr int kAlltoallRounds = 512;

// In round i this rank sends to rank + i and receives from rank - i, so the
// two sides of every transfer post it in the same round, hence the same
// group: groups of rounds run in order on every rank and never wait on a
// later one. Sizes are agreed, so both sides skip the same zero-byte
// transfers. Round 0, the own block, is a copy (skipped when in place).
dctResult_t alltoallv(dctComm_t comm, const void* send, const size_t* sendBytes, const size_t* sendOffsets,
                      void* recv, const size_t* recvBytes, const size_t* recvOffsets, size_t, void* stream) {
  State* s = stateOf(comm);
  DeviceGuard guard(s->device);
  cudaStream_t st = streamOf(stream);
  const int P = comm->size, me = comm->rank;
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  cudaError_t copied = cudaSuccess;  // a failed copy still takes part in the exchange
  if (recvBytes[me] && out + recvOffsets[me] != in + sendOffsets[me])
    copied = cudaMemcpyAsync(out + recvOffsets[me], in + sendOffsets[me], recvBytes[me], cudaMemcpyDeviceToDevice, st);
  for (int first = 1; first < P; first += kAlltoallRounds) {
    const int end = P - first < kAlltoallRounds ? P : first + kAlltoallRounds;
    NCCLCHECK(comm, DCT_NCCL_OWN(ncclGroupStart)());
    // A failed enqueue must still close the group, or the thread's later
    // NCCL calls (the user's too) would be swallowed into it.
    ncclResult_t res = ncclSuccess;
    for (int i = first; i < end && (res == ncclSuccess || res == ncclInProgress); i++) {
      const int to = (me + i) % P, from = (me + P - i) % P;
      if (sendBytes[to]) res = ncclSend(in + sendOffsets[to], sendBytes[to], ncclUint8, to, s->comm, st);
      if ((res == ncclSuccess || res == ncclInProgress) && recvBytes[from])
        res = ncclRecv(out + recvOffsets[from], recvBytes[from], ncclUint8, from, s->comm, st);
    }
    const ncclResult_t ended = settle(s->comm, DCT_NCCL_OWN(ncclGroupEnd)());
    if (res != ncclSuccess && res != ncclInProgress) return ncclFail(comm, res, "ncclSend/ncclRecv");
    if (ended != ncclSuccess) return ncclFail(comm, ended, "ncclGroupEnd");
  }
  if (copied != cudaSuccess) return cudaFail(copied, "NCCL alltoallv own block", __FILE__, __LINE__);
  return dctSuccess;
}

dctResult_t typeOf(dctComm_t comm, dctDataType_t datatype, ncclDataType_t& type) {
  switch (datatype) {
    case dctFloat32: type = ncclFloat32; return dctSuccess;
    case dctFloat64: type = ncclFloat64; return dctSuccess;
    case dctFloat16: type = ncclFloat16; return dctSuccess;
    case dctBFloat16: type = ncclBfloat16; return dctSuccess;  // NCCL >= 2.10
    default: return fail(comm, dctNotSupported, "NCCL sum: datatype %d", static_cast<int>(datatype));
  }
}

dctResult_t allreduce(dctComm_t comm, const void* send, void* recv, size_t count,
                      dctDataType_t datatype, void* stream) {
  ncclDataType_t type = ncclFloat32;
  DCTCHECK(typeOf(comm, datatype, type));
  State* s = stateOf(comm);
  DeviceGuard guard(s->device);
  NCCLCHECK(comm, DCT_NCCL_OWN(ncclAllReduce)(send, recv, count, type, ncclSum, s->comm, streamOf(stream)));
  return dctSuccess;
}

dctResult_t reduce(dctComm_t comm, const void* send, void* recv, size_t count, dctDataType_t datatype, int root,
                   void* stream) {
  ncclDataType_t type = ncclFloat32;
  DCTCHECK(typeOf(comm, datatype, type));
  State* s = stateOf(comm);
  DeviceGuard guard(s->device);
  NCCLCHECK(comm, ncclReduce(send, recv, count, type, ncclSum, root, s->comm, streamOf(stream)));
  return dctSuccess;
}

dctResult_t broadcast(dctComm_t comm, void* buffer, size_t bytes, int root, void* stream) {
  State* s = stateOf(comm);
  DeviceGuard guard(s->device);
  NCCLCHECK(comm, ncclBroadcast(buffer, buffer, bytes, ncclUint8, root, s->comm, streamOf(stream)));
  return dctSuccess;
}

// The lowest rank with the same host name names the node (NCCL has no
// shared-memory split of its own).
dctResult_t nodeColor(dctComm_t comm, int* color) {
  char name[256] = {};
  (void)gethostname(name, sizeof(name) - 1);
  uint64_t hash = 1469598103934665603ull;
  for (const char* p = name; *p; p++) hash = (hash ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
  std::vector<uint64_t> all(comm->size);
  DCTCHECK(allgather(comm, &hash, all.data(), sizeof(hash), nullptr));
  for (*color = 0; all[*color] != hash;) ++*color;
  return dctSuccess;
}

// Host values through the staging buffer: [0] this rank's, [1] the max,
// preset below any result so that a reduction NCCL did not run (inside the
// caller's group) shows.
dctResult_t vote(dctComm_t comm, int32_t mine, int32_t* worst, void* stream) {
  State* s = stateOf(comm);
  DeviceGuard guard(s->device);
  cudaStream_t st = streamOf(stream);
  int32_t* dev = static_cast<int32_t*>(s->host.ptr);
  const int32_t init[2] = {mine, INT32_MIN};
  const cudaError_t staged = cudaMemcpyAsync(dev, init, sizeof(init), cudaMemcpyHostToDevice, st);
  NCCLCHECK(comm, DCT_NCCL_OWN(ncclAllReduce)(dev, dev + 1, 1, ncclInt32, ncclMax, s->comm, st));  // taking part regardless
  if (staged != cudaSuccess) return cudaFail(staged, "NCCL vote staging", __FILE__, __LINE__);
  CUDACHECK(cudaMemcpyAsync(worst, dev + 1, sizeof(*worst), cudaMemcpyDeviceToHost, st));
  CUDACHECK(cudaStreamSynchronize(st));
  if (*worst < mine)
    return fail(comm, dctInvalidUsage,
                "NCCL transport: the vote did not run; libdct calls inside ncclGroupStart/ncclGroupEnd are not supported");
  return dctSuccess;
}

// The fixed-capacity step's vote: *vote, a device int32, becomes its max
// over ranks in place, queued on the stream with nothing read back (so the
// call-inside-a-group check of vote() cannot be made here).
dctResult_t voteInPlace(dctComm_t comm, int32_t* vote, void* stream) {
  State* s = stateOf(comm);
  DeviceGuard guard(s->device);
  NCCLCHECK(comm, DCT_NCCL_OWN(ncclAllReduce)(vote, vote, 1, ncclInt32, ncclMax, s->comm, streamOf(stream)));
  return dctSuccess;
}

// Before each collective's agreement: the device check, and room for the
// padded allgatherv of device messages whose gathered extent is up to
// `bytes`. Host data needs nothing (fixed staging from init).
dctResult_t prepare(dctComm_t comm, const void* sample, size_t bytes, void*) {
  State* s = stateOf(comm);
  DCTCHECK(checkDevice(comm));
  if (bytes == 0 || sample == nullptr || !isDeviceMemory(sample)) return dctSuccess;
  return reservePadded(s, paddedRoom(comm->size, bytes));
}

void destroy(dctComm_t comm) {
  State* s = stateOf(comm);
  if (s->paddedPending) (void)cudaEventSynchronize(s->paddedFree);
  if (s->host.ptr) (void)cudaFree(s->host.ptr);
  if (s->padded.ptr) (void)cudaFree(s->padded.ptr);
  if (s->paddedFree) (void)cudaEventDestroy(s->paddedFree);
  if (s->owned) (void)DCT_NCCL_OWN(ncclCommDestroy)(s->comm);
  delete s;
  comm->transportState = nullptr;
}

dctResult_t allocate(dctComm_t comm, size_t bytes, void** ptr) {
  *ptr = nullptr;
  DeviceGuard guard(stateOf(comm)->device);
  void* p = nullptr;
  CUDACHECK(cudaMalloc(&p, bytes));
  if (const cudaError_t err = cudaMemset(p, 0, bytes); err != cudaSuccess) {
    (void)cudaFree(p);
    return cudaFail(err, "NCCL transport: zeroing its memory", __FILE__, __LINE__);
  }
  *ptr = p;
  return dctSuccess;
}

void release(dctComm_t comm, void* ptr) {
  DeviceGuard guard(stateOf(comm)->device);
  if (ptr) (void)cudaFree(ptr);
}

dctResult_t synchronize(dctComm_t comm, void* stream) {
  DeviceGuard guard(stateOf(comm)->device);
  CUDACHECK(cudaStreamSynchronize(streamOf(stream)));
  return dctSuccess;
}

dctResult_t split(dctComm_t comm, int color, dctComm_t* out);  // builds comms with the table below

constexpr Transport kNcclTransport = {
    .name = "NCCL",
    .hostBuffers = false,
    .deviceBuffers = true,
    .prepare = prepare,
    .allgather = allgather,
    .allgatherv = allgatherv,
    // NCCL work is already asynchronous on the stream, but its allgatherv is
    // a group of broadcasts the host cannot progress piecewise: no pipeline.
    .iallgatherv = nullptr,
    .test = nullptr,
    .ialltoallv = nullptr,  // optional
    .alltoallv = alltoallv,
    .alltoall = nullptr,  // optional
    .allreduce = allreduce,
    .reduce = reduce,
    .broadcast = broadcast,
    .split = split,
    .nodeColor = nodeColor,
    .vote = vote,
    .voteInPlace = voteInPlace,
    .destroy = destroy,
    .allocate = allocate,
    .release = release,
    .synchronize = synchronize,
    .sendrecv = nullptr,  // device buffers: recursive doubling is the CPU twin's
};

// The communicator's rank, size and device, once it is ready (a nonblocking
// one may still be initialising).
dctResult_t query(ncclComm_t nccl, int* rank, int* size, int* device) {
  ncclResult_t state = ncclSuccess;
  ncclResult_t res = ncclCommGetAsyncError(nccl, &state);
  if (res == ncclSuccess) res = settle(nccl, state);
  if (res != ncclSuccess)
    return fail(nullptr, dctTransportError, "dctCommInitNccl: the communicator is not usable: %s (%s)",
                ncclGetErrorString(res), ncclGetLastError(nccl));
  res = settle(nccl, ncclCommUserRank(nccl, rank));
  if (res == ncclSuccess) res = settle(nccl, ncclCommCount(nccl, size));
  if (res == ncclSuccess) res = settle(nccl, ncclCommCuDevice(nccl, device));
  if (res != ncclSuccess) return fail(nullptr, dctTransportError, "dctCommInitNccl: %s", ncclGetErrorString(res));
  return dctSuccess;
}

// Whether every rank of nccl succeeded so far (`failed`: this rank's part):
// one max-allreduce on the communicator's own stream 0, through `scratch`
// (two device ints). A rank without scratch cannot take part: the one
// failure that still leaves the others waiting.
bool everyRankReady(ncclComm_t nccl, int32_t* scratch, bool failed) {
  if (scratch == nullptr) return false;
  const int32_t mine = failed ? 1 : 0;
  int32_t any = 1;
  bool ok = cudaMemcpy(scratch, &mine, sizeof(mine), cudaMemcpyHostToDevice) == cudaSuccess;
  ok = DCT_NCCL_OWN(ncclAllReduce)(scratch, scratch + 1, 1, ncclInt32, ncclMax, nccl, nullptr) == ncclSuccess && ok;
  ok = ok && cudaMemcpy(&any, scratch + 1, sizeof(any), cudaMemcpyDeviceToHost) == cudaSuccess;
  return ok && any == 0;
}

// A dctComm over nccl; `owned`: destroyed with it (the node and leader
// comms a split made). Every rank takes part in one vote after its
// allocations, so a rank out of memory fails every rank here instead of
// leaving the others in the comm's first collective.
dctResult_t createComm(ncclComm_t nccl, bool owned, dctComm_t* out) {
  int rank = 0, size = 0, device = -1;
  DCTCHECK(query(nccl, &rank, &size, &device));  // an unusable communicator: no collective can run on it
  DeviceGuard guard(device);
  auto* comm = new (std::nothrow) dctComm();
  auto* state = new (std::nothrow) State();
  // The staging of host data (and so every agreement and vote) must never
  // need memory it cannot get: it exists, on the communicator's device,
  // before any step. Its first ints carry the vote; without it, two ints.
  const size_t staging = (static_cast<size_t>(size) + 1) * kHostChunk;
  void* host = nullptr;
  cudaError_t err = comm && state ? cudaMalloc(&host, staging) : cudaErrorMemoryAllocation;
  cudaEvent_t paddedFree = nullptr;
  if (err == cudaSuccess) err = cudaEventCreateWithFlags(&paddedFree, cudaEventDisableTiming);
  void* scratch = host;
  if (scratch == nullptr && cudaMalloc(&scratch, 2 * sizeof(int32_t)) != cudaSuccess) scratch = nullptr;
  const bool ready = everyRankReady(nccl, static_cast<int32_t*>(scratch), err != cudaSuccess);
  if (scratch != host) cudaFree(scratch);
  if (!ready) {
    if (paddedFree) cudaEventDestroy(paddedFree);
    if (host) cudaFree(host);
    delete state;
    delete comm;
    (void)cudaGetLastError();
    if (err != cudaSuccess) return cudaFail(err, "dctCommInitNccl: staging buffer", __FILE__, __LINE__);
    return fail(nullptr, dctInvalidUsage, "dctCommInitNccl: another rank could not create its comm");
  }
  state->comm = nccl;
  state->owned = owned;
  state->device = device;
  state->host.ptr = host;
  state->host.bytes = staging;
  state->paddedFree = paddedFree;
  comm->rank = rank;
  comm->size = size;
  comm->transport = &kNcclTransport;
  comm->transportState = state;
  *out = comm;
  return dctSuccess;
}

dctResult_t split(dctComm_t comm, int color, dctComm_t* out) {
  *out = nullptr;
  State* s = stateOf(comm);
  DeviceGuard guard(s->device);
  ncclComm_t part = nullptr;
  NCCLCHECK(comm, ncclCommSplit(s->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, comm->rank, &part, nullptr));
  if (part == nullptr) return dctSuccess;
  dctResult_t res = createComm(part, true, out);
  if (res != dctSuccess) (void)DCT_NCCL_OWN(ncclCommDestroy)(part);
  return res;
}

}  // namespace
}  // namespace dct::nccl

namespace dct {

// A dctComm over ncclComm (not owned) for dctCommInitNccl (api/comm_api.cc
// checks its arguments, guards it and settles the comm afterwards).
dctResult_t createNcclComm(ncclComm_t ncclComm, dctComm_t* out) { return nccl::createComm(ncclComm, false, out); }

}  // namespace dct
