#include "preload/nccl_interceptor.h"

#include "base/dtype.h"

namespace dct::preload {
namespace {

// NCCL groups belong to the calling thread, and so does the deferral.
thread_local int groupDepth = 0;
// Each deferred call, and whether the session admitted it already (calls on
// a communicator whose ranks have yet to agree wait for the group's end).
thread_local std::vector<std::pair<NcclCall, bool>> deferred;
// Set while libdct runs a call: its own NCCL operations (which reach this
// shim when NCCL predates the pnccl* entry points) go straight below.
thread_local bool insideLibdct = false;

}  // namespace

bool dctTypeOf(ncclDataType_t type, dctDataType_t* out) {
  switch (type) {
    case ncclFloat32: *out = dctFloat32; return true;
    case ncclFloat64: *out = dctFloat64; return true;
    case ncclFloat16: *out = dctFloat16; return true;
    case ncclBfloat16: *out = dctBFloat16; return true;
    default: return false;
  }
}

bool dctOpOf(ncclRedOp_t op, dctRedOp_t* out) {
  if (op == ncclSum) *out = dctSum;
  else if (op == ncclAvg) *out = dctAvg;
  else return false;
  return true;
}

Verdict NcclInterceptor::admit(const NcclCall& c, bool canAgree) {
  CallFacts facts;
  dctDataType_t type;
  dctRedOp_t op;
  facts.typeSupported = dctTypeOf(c.datatype, &type);
  facts.opSupported = dctOpOf(c.op, &op);
  facts.bytes = facts.typeSupported ? c.count * dtypeSize(type) : 0;
  if (next_.commCount(c.comm, &facts.commSize) != ncclSuccess) return Verdict::Disabled;  // NCCL reports the bad comm
  facts.capturing = next_.capturing(c.stream);
  if (facts.capturing && next_.captureReady) facts.captureReady = next_.captureReady(session_, c);
  Agreer agree;
  if (canAgree) agree = [&](uint64_t* values, int n) { return next_.agreeMax(c.comm, c.stream, values, n); };
  return session_.admit(handleKey(c.comm), facts, agree);
}

ncclResult_t NcclInterceptor::allReduce(const NcclCall& c) {
  auto below = [&] { return next_.allReduce(c.sendbuff, c.recvbuff, c.count, c.datatype, c.op, c.comm, c.stream); };
  if (insideLibdct) return below();
  // Inside the caller's group NCCL holds collectives back, so the ranks'
  // policies cannot be compared there: until they have been, every call on
  // the communicator waits for the group's end (every rank of a correct
  // program groups its calls alike, so all defer the same calls).
  if (groupDepth > 0 && !session_.agreed(handleKey(c.comm))) {
    deferred.emplace_back(c, false);
    return ncclSuccess;
  }
  if (admit(c, groupDepth == 0) != Verdict::Compress) return below();
  if (groupDepth > 0) {
    deferred.emplace_back(c, true);
    return ncclSuccess;
  }
  return issue(c, next_.capturing(c.stream));
}

// libdct's allreduce; when it fails (on every rank, nothing written) NCCL
// runs the call instead, so the program always gets its allreduce. Not
// under capture, nor for a queued fixed-capacity step: libdct's step (its
// collectives, this rank's failure in its vote) is on the stream or in the
// graph already on every rank, and NCCL's allreduce on this rank alone
// would leave the ranks' streams unmatched: the caller gets the error.
ncclResult_t NcclInterceptor::issue(const NcclCall& c, bool capturing) {
  const bool queued = capturing || (next_.captureReady && next_.captureReady(session_, c));
  insideLibdct = true;
  const dctResult_t res = next_.compressed(session_, c);
  insideLibdct = false;
  if (res == dctSuccess) return ncclSuccess;
  if (queued) return ncclInternalError;
  return next_.allReduce(c.sendbuff, c.recvbuff, c.count, c.datatype, c.op, c.comm, c.stream);
}

ncclResult_t NcclInterceptor::groupStart() {
  if (insideLibdct) return next_.groupStart();
  const ncclResult_t res = next_.groupStart();
  if (res == ncclSuccess) groupDepth++;
  return res;
}

ncclResult_t NcclInterceptor::groupEnd() {
  if (insideLibdct || groupDepth == 0) return next_.groupEnd();  // unbalanced: NCCL reports it
  const ncclResult_t res = next_.groupEnd();
  if (--groupDepth > 0) return res;
  std::vector<std::pair<NcclCall, bool>> calls;
  calls.swap(deferred);
  if (res != ncclSuccess && res != ncclInProgress) return res;  // the group failed: so do its calls
  const ncclResult_t mine = issueDeferred(calls);
  return mine != ncclSuccess ? mine : res;
}

// One communicator: each call in order. Several communicators in one group
// mean one thread drives several ranks (one per GPU): a blocking libdct
// collective on the first would wait for ranks this thread has not reached,
// so the group is handed to NCCL whole.
ncclResult_t NcclInterceptor::issueDeferred(std::vector<std::pair<NcclCall, bool>>& calls) {
  bool oneComm = true;
  for (const auto& [c, admitted] : calls) oneComm = oneComm && c.comm == calls.front().first.comm;
  ncclResult_t first = ncclSuccess;
  if (oneComm) {
    for (const auto& [c, admitted] : calls) {
      const bool mine = admitted || admit(c, true) == Verdict::Compress;
      const ncclResult_t r =
          mine ? issue(c, next_.capturing(c.stream)) : next_.allReduce(c.sendbuff, c.recvbuff, c.count, c.datatype, c.op, c.comm, c.stream);
      if (first == ncclSuccess) first = r;
    }
    return first;
  }
  for (size_t i = 0; i < calls.size(); i++) session_.countPass(Verdict::MultiComm);
  first = next_.groupStart();
  if (first != ncclSuccess) return first;
  for (const auto& [c, admitted] : calls) {
    const ncclResult_t r = next_.allReduce(c.sendbuff, c.recvbuff, c.count, c.datatype, c.op, c.comm, c.stream);
    if (first == ncclSuccess) first = r;
  }
  const ncclResult_t ended = next_.groupEnd();
  return first != ncclSuccess ? first : ended;
}

ncclResult_t NcclInterceptor::commDestroy(ncclComm_t comm) {
  const ncclResult_t res = next_.commDestroy(comm);
  session_.forget(handleKey(comm));
  return res;
}

ncclResult_t NcclInterceptor::commAbort(ncclComm_t comm) {
  const ncclResult_t res = next_.commAbort(comm);
  session_.forget(handleKey(comm));
  return res;
}

}  // namespace dct::preload
