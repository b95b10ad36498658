// The callbacks transport (dctCommInitCallbacks): the caller's blocking
// collectives behind the transport table. The caller's callbacks keep the
// failure contract themselves (a rank whose callback fails has taken part);
// this file turns their codes into dctTransportError. No nonblocking
// allgather (the pipelined allreduce stays off) and no split (no
// hierarchical steps).
#include <cstring>
#include <new>
#include <vector>

#include "base/debug.h"
#include "transport/comm.h"

namespace dct {
namespace {

const dctCallbacks_t& callbacksOf(dctComm_t comm) { return *static_cast<dctCallbacks_t*>(comm->transportState); }

dctResult_t check(dctComm_t comm, int code, const char* what) {
  if (code == 0) return dctSuccess;
  return fail(comm, dctTransportError, "callbacks transport: %s failed (returned %d)", what, code);
}

// The callbacks move what they are given: no staging to prepare.
dctResult_t prepare(dctComm_t, const void*, size_t, void*) { return dctSuccess; }

dctResult_t allgather(dctComm_t comm, const void* send, void* recv, size_t bytes, void* stream) {
  const dctCallbacks_t& cb = callbacksOf(comm);
  return check(comm, cb.allgather(send, recv, bytes, cb.context, stream), "allgather");
}

dctResult_t allgatherv(dctComm_t comm, const void* send, size_t sendBytes, void* recv, const size_t* recvBytes,
                       const size_t* recvOffsets, void* stream) {
  const dctCallbacks_t& cb = callbacksOf(comm);
  return check(comm, cb.allgatherv(send, sendBytes, recv, recvBytes, recvOffsets, cb.context, stream), "allgatherv");
}

dctResult_t alltoallv(dctComm_t comm, const void* send, const size_t* sendBytes, const size_t* sendOffsets,
                      void* recv, const size_t* recvBytes, const size_t* recvOffsets, size_t, void* stream) {
  const dctCallbacks_t& cb = callbacksOf(comm);
  return check(comm, cb.alltoallv(send, sendBytes, sendOffsets, recv, recvBytes, recvOffsets, cb.context, stream),
               "alltoallv");
}

dctResult_t allreduce(dctComm_t comm, const void* send, void* recv, size_t count, dctDataType_t datatype,
                      void* stream) {
  const dctCallbacks_t& cb = callbacksOf(comm);
  return check(comm, cb.allreduceSum(send, recv, count, datatype, cb.context, stream), "allreduceSum");
}

// Through voteMax, or an allgather of every rank's value into a buffer made
// with the comm (a vote must never need memory it cannot get).
dctResult_t vote(dctComm_t comm, int32_t mine, int32_t* worst, void* stream) {
  const dctCallbacks_t& cb = callbacksOf(comm);
  if (cb.voteMax) return check(comm, cb.voteMax(mine, worst, cb.context), "voteMax");
  auto* all = reinterpret_cast<int32_t*>(reinterpret_cast<char*>(comm->transportState) + sizeof(dctCallbacks_t));
  DCTCHECK(check(comm, cb.allgather(&mine, all, sizeof(mine), cb.context, stream), "allgather (vote)"));
  *worst = mine;
  for (int r = 0; r < comm->size; r++) *worst = all[r] > *worst ? all[r] : *worst;
  return dctSuccess;
}

void destroy(dctComm_t comm) {
  ::operator delete(comm->transportState, std::nothrow);
  comm->transportState = nullptr;
}

constexpr Transport kHostOnly = {
    .name = "callbacks",
    .hostBuffers = true,
    .deviceBuffers = false,
    .prepare = prepare,
    .allgather = allgather,
    .allgatherv = allgatherv,
    .iallgatherv = nullptr,
    .test = nullptr,
    .ialltoallv = nullptr,  // optional
    .alltoallv = alltoallv,
    .alltoall = nullptr,  // optional
    .allreduce = allreduce,
    .reduce = nullptr,  // hierarchical steps only, which need split
    .broadcast = nullptr,
    .split = nullptr,
    .nodeColor = nullptr,
    .vote = vote,
    .voteInPlace = nullptr,  // host values: vote() serves
    .destroy = destroy,
    .allocate = nullptr,  // takes host buffers
    .release = nullptr,
    .synchronize = nullptr,
    .sendrecv = nullptr,  // no pairs: recursive doubling does not run here
};

constexpr Transport withDevice(Transport t) {
  t.deviceBuffers = true;
  return t;
}
constexpr Transport kHostAndDevice = withDevice(kHostOnly);

dctResult_t badCallbacks(const char* why) {
  return fail(nullptr, dctInvalidArgument, "dctCommInitCallbacks: %s", why);
}

}  // namespace

// Checks the caller's table and builds a comm on a copy of it (followed by
// the vote's gather buffer); called by dctCommInitCallbacks.
dctResult_t createCallbacksComm(const dctCallbacks_t* cb, dctComm_t* out) {
  if (cb == nullptr) return badCallbacks("callbacks is NULL");
  if (cb->size != sizeof(dctCallbacks_t) || cb->magic != DCT_CALLBACKS_MAGIC)
    return badCallbacks("callbacks were not initialised from DCT_CALLBACKS_INITIALIZER");
  if (cb->version > DCT_VERSION_CODE) return badCallbacks("callbacks are newer than this libdct");
  if (cb->nranks < 1 || cb->rank < 0 || cb->rank >= cb->nranks) return badCallbacks("rank is not in [0, nranks)");
  if (!cb->allgather || !cb->allgatherv || !cb->alltoallv || !cb->allreduceSum)
    return badCallbacks("allgather, allgatherv, alltoallv and allreduceSum are required");
  void* state = ::operator new(sizeof(dctCallbacks_t) + sizeof(int32_t) * static_cast<size_t>(cb->nranks),
                               std::nothrow);
  auto* comm = new (std::nothrow) dctComm();
  if (state == nullptr || comm == nullptr) {
    ::operator delete(state, std::nothrow);
    delete comm;
    return fail(nullptr, dctOutOfMemory, "dctCommInitCallbacks: out of memory");
  }
  std::memcpy(state, cb, sizeof(dctCallbacks_t));
  comm->rank = cb->rank;
  comm->size = cb->nranks;
  comm->transport = cb->deviceBuffers ? &kHostAndDevice : &kHostOnly;
  comm->transportState = state;
  *out = comm;
  return dctSuccess;
}

}  // namespace dct
