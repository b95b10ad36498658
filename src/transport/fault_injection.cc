#include "transport/fault_injection.h"

#include <atomic>
#include <cstring>
#include <new>

#include "base/components.h"
#include "base/debug.h"
#include "base/memory_space.h"
#include "transport/comm.h"

namespace dct {
namespace {

// A hierarchical comm's node and leader comms get seams of their own that
// count on the parent's (`root`), so one op count spans the whole step.
struct Seam {
  const Transport* inner = nullptr;
  Transport table{};
  Seam* root = this;
  int rootRank = 0;  // this rank in the root's comm
  uint64_t ops = 0;
  uint64_t prepares = 0;
  uint64_t failAt = UINT64_MAX;
  int rank = -1;
};

Seam* seamOf(dctComm_t comm) { return static_cast<Seam*>(comm->faultSeam); }

size_t dtypeBytes(dctDataType_t dtype) {
  return dtype == dctFloat64 ? 8 : dtype == dctFloat16 || dtype == dctBFloat16 ? 2 : 4;
}

// Counts the op; true if it is the armed one on this rank.
bool hit(dctComm_t comm) {
  Seam* s = seamOf(comm)->root;
  const bool armed = s->ops++ == s->failAt && (s->rank < 0 || s->rank == seamOf(comm)->rootRank);
  if (armed) s->failAt = UINT64_MAX;
  return armed;
}

dctResult_t injected(dctComm_t comm, void* garble, size_t bytes, const char* op) {
  if (garble && bytes && !isDeviceMemory(garble)) std::memset(garble, 0xff, bytes);  // NaNs and junk
  return fail(comm, dctTransportError, "injected fault in %s (transport op %llu)", op,
              static_cast<unsigned long long>(seamOf(comm)->root->ops - 1));
}

dctResult_t prepare(dctComm_t comm, const void* sample, size_t bytes, void* stream) {
  seamOf(comm)->root->prepares++;
  if (hit(comm)) return injected(comm, nullptr, 0, "prepare");
  return seamOf(comm)->inner->prepare(comm, sample, bytes, stream);
}

dctResult_t allgather(dctComm_t comm, const void* send, void* recv, size_t bytes, void* stream) {
  const bool h = hit(comm);
  dctResult_t res = seamOf(comm)->inner->allgather(comm, send, recv, bytes, stream);
  return h ? injected(comm, recv, bytes * comm->size, "allgather") : res;
}

dctResult_t allgatherv(dctComm_t comm, const void* send, size_t sendBytes, void* recv, const size_t* recvBytes,
                       const size_t* recvOffsets, void* stream) {
  const bool h = hit(comm);
  dctResult_t res = seamOf(comm)->inner->allgatherv(comm, send, sendBytes, recv, recvBytes, recvOffsets, stream);
  return h ? injected(comm, recv, blocksExtent(recvBytes, recvOffsets, comm->size), "allgatherv") : res;
}

// The seam's own request: the inner one, and what to garble when an armed
// one completes (it has taken part, as every rank's must).
struct SeamRequest {
  void* inner = nullptr;
  void* garble = nullptr;
  size_t bytes = 0;
  bool armed = false;
  const char* op = "";
};

dctResult_t test(dctComm_t comm, void* request, int* done) {
  auto* r = static_cast<SeamRequest*>(request);
  *done = 1;
  if (r == nullptr) return dctSuccess;
  dctResult_t res = seamOf(comm)->inner->test(comm, r->inner, done);
  if (!*done) return dctSuccess;
  const SeamRequest finished = *r;
  delete r;
  return finished.armed ? injected(comm, finished.garble, finished.bytes, finished.op) : res;
}

// An inner request, wrapped so that test() can garble its output when armed.
dctResult_t wrapRequest(dctComm_t comm, bool armed, void* inner, void* recv, size_t bytes, dctResult_t res,
                        void** request, const char* op) {
  auto* r = new (std::nothrow) SeamRequest{inner, recv, bytes, armed, op};
  if (r == nullptr) {  // finish it here rather than lose track of it
    for (int done = 0; !done;) (void)seamOf(comm)->inner->test(comm, inner, &done);
    *request = nullptr;
    return armed ? injected(comm, recv, bytes, op) : res;
  }
  *request = r;
  return res;
}

dctResult_t ialltoallv(dctComm_t comm, const void* send, const size_t* sendBytes, const size_t* sendOffsets,
                       void* recv, const size_t* recvBytes, const size_t* recvOffsets, void** request) {
  const bool h = hit(comm);
  void* inner = nullptr;
  dctResult_t res =
      seamOf(comm)->inner->ialltoallv(comm, send, sendBytes, sendOffsets, recv, recvBytes, recvOffsets, &inner);
  return wrapRequest(comm, h, inner, recv, blocksExtent(recvBytes, recvOffsets, comm->size), res, request,
                     "ialltoallv");
}

dctResult_t iallgatherv(dctComm_t comm, const void* send, size_t sendBytes, void* recv, const size_t* recvBytes,
                        const size_t* recvOffsets, void** request) {
  const bool h = hit(comm);
  void* inner = nullptr;
  dctResult_t res = seamOf(comm)->inner->iallgatherv(comm, send, sendBytes, recv, recvBytes, recvOffsets, &inner);
  return wrapRequest(comm, h, inner, recv, blocksExtent(recvBytes, recvOffsets, comm->size), res, request,
                     "iallgatherv");
}

dctResult_t sendrecv(dctComm_t comm, int peer, const void* send, size_t sendBytes, void* recv, size_t recvCapacity,
                     size_t* received, size_t maxBytes) {
  const bool h = hit(comm);
  dctResult_t res = seamOf(comm)->inner->sendrecv(comm, peer, send, sendBytes, recv, recvCapacity, received, maxBytes);
  return h ? injected(comm, recv, *received, "sendrecv") : res;
}

dctResult_t alltoallv(dctComm_t comm, const void* send, const size_t* sendBytes, const size_t* sendOffsets, void* recv,
                      const size_t* recvBytes, const size_t* recvOffsets, size_t totalBytes, void* stream) {
  const bool h = hit(comm);
  dctResult_t res = seamOf(comm)->inner->alltoallv(comm, send, sendBytes, sendOffsets, recv, recvBytes, recvOffsets,
                                                   totalBytes, stream);
  return h ? injected(comm, recv, blocksExtent(recvBytes, recvOffsets, comm->size), "alltoallv") : res;
}

dctResult_t alltoall(dctComm_t comm, const void* send, void* recv, size_t bytesPerRank, void* stream) {
  const bool h = hit(comm);
  dctResult_t res = seamOf(comm)->inner->alltoall(comm, send, recv, bytesPerRank, stream);
  return h ? injected(comm, recv, bytesPerRank * comm->size, "alltoall") : res;
}

dctResult_t allreduce(dctComm_t comm, const void* send, void* recv, size_t count, dctDataType_t dtype,
                      void* stream) {
  const bool h = hit(comm);
  dctResult_t res = seamOf(comm)->inner->allreduce(comm, send, recv, count, dtype, stream);
  return h ? injected(comm, recv, count * dtypeBytes(dtype), "allreduce") : res;
}

dctResult_t reduce(dctComm_t comm, const void* send, void* recv, size_t count, dctDataType_t dtype, int root,
                   void* stream) {
  const bool h = hit(comm);
  dctResult_t res = seamOf(comm)->inner->reduce(comm, send, recv, count, dtype, root, stream);
  return h ? injected(comm, comm->rank == root ? recv : nullptr, count * dtypeBytes(dtype), "reduce") : res;
}

dctResult_t broadcast(dctComm_t comm, void* buffer, size_t bytes, int root, void* stream) {
  const bool h = hit(comm);
  dctResult_t res = seamOf(comm)->inner->broadcast(comm, buffer, bytes, root, stream);
  return h ? injected(comm, buffer, bytes, "broadcast") : res;
}

dctResult_t vote(dctComm_t comm, int32_t mine, int32_t* worst, void* stream) {
  if (!hit(comm)) return seamOf(comm)->inner->vote(comm, mine, worst, stream);
  (void)seamOf(comm)->inner->vote(comm, dctTransportError, worst, stream);
  return injected(comm, nullptr, 0, "vote");
}

// The in-place vote (a device word on the NCCL transport): the failing rank
// contributes dctTransportError in place of its verdict, queued before the
// inner vote it still takes part in, as vote() does with host values.
dctResult_t voteInPlace(dctComm_t comm, int32_t* vote, void* stream) {
  if (!hit(comm)) return seamOf(comm)->inner->voteInPlace(comm, vote, stream);
  static const int32_t kFailed = dctTransportError;
  if (isDeviceMemory(vote)) {
    if (const DeviceComponent* cuda = deviceComponent()) (void)cuda->copyAsync(vote, &kFailed, sizeof(kFailed), stream);
  } else {
    *vote = kFailed;
  }
  (void)seamOf(comm)->inner->voteInPlace(comm, vote, stream);
  return injected(comm, nullptr, 0, "voteInPlace");
}

void destroy(dctComm_t comm) {
  Seam* s = seamOf(comm);
  comm->transport = s->inner;
  comm->faultSeam = nullptr;
  delete s;
  comm->transport->destroy(comm);
}

dctResult_t install(dctComm_t comm, Seam* root, int rootRank) {
  if (comm == nullptr || comm->faultSeam != nullptr) return dctSuccess;
  auto* s = new (std::nothrow) Seam();
  if (s == nullptr) return dctOutOfMemory;
  if (root) s->root = root;
  s->rootRank = rootRank;
  s->inner = comm->transport;
  s->table = *s->inner;
  s->table.prepare = prepare;
  s->table.allgather = allgather;
  s->table.allgatherv = allgatherv;
  if (s->inner->iallgatherv) s->table.iallgatherv = iallgatherv;
  if (s->inner->ialltoallv) s->table.ialltoallv = ialltoallv;
  if (s->inner->test) s->table.test = test;
  s->table.alltoallv = alltoallv;
  if (s->inner->sendrecv) s->table.sendrecv = sendrecv;
  if (s->inner->alltoall) s->table.alltoall = alltoall;
  s->table.allreduce = allreduce;
  if (s->inner->reduce) s->table.reduce = reduce;
  if (s->inner->broadcast) s->table.broadcast = broadcast;
  s->table.vote = vote;
  if (s->inner->voteInPlace) s->table.voteInPlace = voteInPlace;
  s->table.destroy = destroy;
  comm->faultSeam = s;
  comm->transport = &s->table;
  return dctSuccess;
}

}  // namespace

dctResult_t installFaultSeam(dctComm_t comm) {
  DCTCHECK(install(comm, nullptr, comm->rank));
  Seam* root = seamOf(comm)->root;
  DCTCHECK(install(comm->node, root, comm->rank));
  return install(comm->leaders, root, comm->rank);
}

void armFault(dctComm_t comm, uint64_t after, int rank) {
  Seam* s = seamOf(comm)->root;
  s->failAt = s->ops + after;
  s->rank = rank;
}

bool faultArmed(dctComm_t comm) {
  const Seam* s = seamOf(comm)->root;
  return s->failAt != UINT64_MAX && (s->rank < 0 || s->rank == seamOf(comm)->rootRank);
}

void disarmFault(dctComm_t comm) { seamOf(comm)->root->failAt = UINT64_MAX; }

uint64_t transportOps(dctComm_t comm) { return comm->faultSeam ? seamOf(comm)->root->ops : 0; }
uint64_t transportPrepares(dctComm_t comm) { return comm->faultSeam ? seamOf(comm)->root->prepares : 0; }

namespace {
// Staging calls left before the failing one; UINT64_MAX: none armed. Read
// on every staged op, so production pays one relaxed load.
std::atomic<uint64_t> stagingLeft{UINT64_MAX};
}  // namespace

void armStagingFault(uint64_t after) { stagingLeft.store(after, std::memory_order_relaxed); }
bool stagingFaultArmed() { return stagingLeft.load(std::memory_order_relaxed) != UINT64_MAX; }

bool stagingFaultHit() {
  uint64_t left = stagingLeft.load(std::memory_order_relaxed);
  if (left == UINT64_MAX) return false;
  stagingLeft.store(left == 0 ? UINT64_MAX : left - 1, std::memory_order_relaxed);
  return left == 0;
}

namespace {
std::atomic<bool> commCreateArmed{false};
}  // namespace

void armCommCreateFault() { commCreateArmed.store(true); }
bool commCreateFaultHit() { return commCreateArmed.exchange(false); }

}  // namespace dct
