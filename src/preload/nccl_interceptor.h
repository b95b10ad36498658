// The NCCL shim's logic, apart from how it is linked: which ncclAllReduce
// calls libdct runs, and NCCL groups. An eligible call inside the caller's
// ncclGroupStart/ncclGroupEnd is deferred and issued after the real
// ncclGroupEnd: a libdct collective needs its agreement on the host before
// it returns, which cannot happen while NCCL holds the group's operations
// back. Operations of one group have no order among themselves, so issuing
// the deferred ones after the group keeps every ordering NCCL promises.
// Everything else goes to the layer below unchanged.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <utility>
#include <vector>

#include "preload/session.h"

namespace dct::preload {

struct NcclCall {
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  ncclDataType_t datatype;
  ncclRedOp_t op;
  ncclComm_t comm;
  cudaStream_t stream;
};

// The layer below: NCCL itself (pnccl* or dlsym(RTLD_NEXT)) in production,
// recorders in the tests; and libdct's compressed allreduce of a call.
struct NcclNext {
  ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t);
  ncclResult_t (*groupStart)();
  ncclResult_t (*groupEnd)();
  ncclResult_t (*commDestroy)(ncclComm_t);
  ncclResult_t (*commAbort)(ncclComm_t);
  ncclResult_t (*commCount)(const ncclComm_t, int*);
  bool (*capturing)(cudaStream_t);                      // CUDA graph capture on the stream
  // libdct would queue the call as a fixed-capacity step, without a host
  // round trip (Session::captureReady): under capture, and eagerly past the
  // compressor's first step, where a failure is not NCCL's to redo.
  bool (*captureReady)(Session&, const NcclCall&);
  // Session's Agreer over NCCL's own allreduce (ncclMax of uint64 words,
  // waited for on the stream); never called inside the caller's group.
  bool (*agreeMax)(ncclComm_t, cudaStream_t, uint64_t*, int);
  dctResult_t (*compressed)(Session&, const NcclCall&);  // Session::compress over dctCommInitNccl
};

class NcclInterceptor {
 public:
  NcclInterceptor(Session& session, const NcclNext& next) : session_(session), next_(next) {}

  ncclResult_t allReduce(const NcclCall& call);
  ncclResult_t groupStart();
  ncclResult_t groupEnd();
  // The communicator's compressors go after NCCL has let go of it (libdct
  // never touches a destroyed ncclComm_t; abort first stops hung kernels).
  ncclResult_t commDestroy(ncclComm_t comm);
  ncclResult_t commAbort(ncclComm_t comm);

 private:
  // The session's verdict; `canAgree`: outside any group, so the ranks'
  // policies can be compared if they have not been yet.
  Verdict admit(const NcclCall& call, bool canAgree);
  ncclResult_t issue(const NcclCall& call, bool capturing);
  ncclResult_t issueDeferred(std::vector<std::pair<NcclCall, bool>>& calls);

  Session& session_;
  NcclNext next_;
};

// libdct's types for NCCL's; false when libdct does not compress them.
bool dctTypeOf(ncclDataType_t type, dctDataType_t* out);
bool dctOpOf(ncclRedOp_t op, dctRedOp_t* out);

}  // namespace dct::preload
