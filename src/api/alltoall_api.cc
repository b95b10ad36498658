// DCT-MP entry points: plan lifetime and the two collective calls. Local
// checks first; a rank with a bad argument still takes part in the
// agreement (algo/), so no other rank is left waiting.
#include "algo/algorithms.h"
#include "api/checks.h"
#include "api/config.h"
#include "api/guard.h"
#include "base/dtype.h"
#include "core/alltoall_plan.h"
#include "transport/comm.h"

using namespace dct;

namespace {

dctResult_t checkCreate(dctComm_t comm, const size_t* sendRows, const size_t* recvRows, size_t rowLength,
                        const dctDataType_t& dtype, const dctConfig_t* config, dctAlltoallPlan_t* plan,
                        dctConfig_t& resolved, const char* fn) {
  if (plan == nullptr) return fail(comm, dctInvalidArgument, "%s: plan is NULL", fn);
  *plan = nullptr;
  DCTCHECK(checkDatatype(comm, dtype, fn));
  if (rowLength == 0 || rowLength > 0xffffffffull)
    return fail(comm, dctInvalidArgument, "%s: rowLength %zu must be in [1, 2^32)", fn, rowLength);
  DCTCHECK(checkRowCounts(comm, sendRows, rowLength, "sendRows", fn));
  DCTCHECK(checkRowCounts(comm, recvRows, rowLength, "recvRows", fn));
  DCTCHECK(resolveConfig(comm, comm->settings.config, config, &resolved));
  if (wireTypeFor(resolved.wireType, dtype) == dctNumTypes)
    return fail(comm, dctInvalidArgument, "%s: wireType %s is wider than the rows' %s", fn,
                dtypeName(static_cast<dctDataType_t>(resolved.wireType)), dtypeName(dtype));
  return dctSuccess;
}

// Buffers of one call: `rowsIn` rows readable at in, `rowsOut` writable at
// out, in one memory space the transport moves; binds the plan's kernels.
dctResult_t checkCall(dctAlltoallPlan_t p, const void* in, size_t rowsIn, void* out, size_t rowsOut,
                      const char* inName, const char* outName, const char* fn) {
  dctComm_t comm = p->comm;
  const size_t es = dtypeSize(p->dtype);
  DCTCHECK(checkBuffer(comm, in, rowsIn * p->rowLength, es, inName, fn));
  DCTCHECK(checkBuffer(comm, out, rowsOut * p->rowLength, es, outName, fn));
  if (in != nullptr && in == out) return fail(comm, dctInvalidArgument, "%s: %s and %s must differ", fn, inName, outName);
  const void* sample = in ? in : out;
  if (in && out && &twinFor(in) != &twinFor(out))
    return fail(comm, dctInvalidArgument, "%s: %s and %s are in different memory spaces", fn, inName, outName);
  DCTCHECK(checkTransportSpace(comm, sample, fn));
  return bindPlanTwin(p, sample, fn);
}

}  // namespace

extern "C" dctResult_t dctAlltoallPlanCreate(dctComm_t comm, const size_t* sendRows, const size_t* recvRows,
                                             size_t rowLength, dctDataType_t datatype, const dctConfig_t* config,
                                             dctAlltoallPlan_t* plan) {
  const char* fn = "dctAlltoallPlanCreate";
  if (!validComm(comm)) return fail(nullptr, dctInvalidArgument, "%s: invalid comm", fn);
  return guarded(comm, fn, [&] {
    dctConfig_t resolved{};
    dctResult_t local = checkCreate(comm, sendRows, recvRows, rowLength, datatype, config, plan, resolved, fn);
    dctAlltoallPlan_t made = nullptr;
    DCTCHECK(createAlltoallPlan(comm, sendRows, recvRows, rowLength, datatype, resolved, local, &made));
    *plan = made;
    return dctSuccess;
  });
}

extern "C" dctResult_t dctAlltoallPlanDestroy(dctAlltoallPlan_t plan) {
  if (plan == nullptr) return dctSuccess;
  if (!validPlan(plan)) return fail(nullptr, dctInvalidArgument, "dctAlltoallPlanDestroy: not a dctAlltoallPlan_t");
  alltoallPlanDestroy(plan);
  return dctSuccess;
}

extern "C" dctResult_t dctAlltoallPlanGetStats(dctAlltoallPlan_t plan, dctAlltoallStats_t* stats) {
  if (!validPlan(plan)) return fail(nullptr, dctInvalidArgument, "dctAlltoallPlanGetStats: invalid plan");
  if (stats == nullptr) return fail(plan->comm, dctInvalidArgument, "dctAlltoallPlanGetStats: stats is NULL");
  *stats = plan->stats;
  return dctSuccess;
}

extern "C" dctResult_t dctSparseAlltoall(dctAlltoallPlan_t plan, const void* sendbuf, void* recvbuf, void* stream) {
  const char* fn = "dctSparseAlltoall";
  if (!validPlan(plan)) return fail(nullptr, dctInvalidArgument, "%s: invalid plan", fn);
  return guarded(plan->comm, fn, [&] {
    dctResult_t local = checkCall(plan, sendbuf, plan->send.totalRows(), recvbuf, plan->recv.totalRows(), "sendbuf",
                                  "recvbuf", fn);
    return sparseAlltoallForward(plan, sendbuf, recvbuf, stream, local, fn);
  });
}

extern "C" dctResult_t dctSparseAlltoallBackward(dctAlltoallPlan_t plan, const void* gradSendbuf, void* gradRecvbuf,
                                                 void* stream) {
  const char* fn = "dctSparseAlltoallBackward";
  if (!validPlan(plan)) return fail(nullptr, dctInvalidArgument, "%s: invalid plan", fn);
  return guarded(plan->comm, fn, [&] {
    dctResult_t local = checkCall(plan, gradSendbuf, plan->recv.totalRows(), gradRecvbuf, plan->send.totalRows(),
                                  "gradSendbuf", "gradRecvbuf", fn);
    return sparseAlltoallBackward(plan, gradSendbuf, gradRecvbuf, stream, local, fn);
  });
}
