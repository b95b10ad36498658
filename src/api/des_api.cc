// DES entry points: plan lifetime and the two collective calls. Local
// checks first; a rank with a bad argument still takes part in the
// agreement (algo/), so no other rank is left waiting.
#include "algo/algorithms.h"
#include "api/checks.h"
#include "api/config.h"
#include "api/guard.h"
#include "base/dtype.h"
#include "core/des_plan.h"
#include "transport/comm.h"

using namespace dct;

namespace {

// The plan's settings: env parameters and defaults as the all-to-all's, but
// only an explicit density below 1 thins (DCT_DENSITY and the default
// belong to DCT-DP); everything else is the exact plan, density 1.
dctResult_t checkConfig(dctComm_t comm, const dctConfig_t* config, dctConfig_t& resolved) {
  resolved.density = 1.0;
  if (config == nullptr) return dctSuccess;
  DCTCHECK(resolveConfig(comm, comm->settings.config, config, &resolved));
  const bool thin = config->density != DCT_CONFIG_UNDEF_DOUBLE && config->density < 1.0;
  if (!thin) resolved.density = 1.0;
  return dctSuccess;
}

dctResult_t checkCreate(dctComm_t comm, const size_t* rowsPerRank, size_t rowLength, const dctDataType_t& dtype,
                        const dctConfig_t* config, dctConfig_t& resolved, dctDesPlan_t* plan, const char* fn) {
  if (plan == nullptr) return fail(comm, dctInvalidArgument, "%s: plan is NULL", fn);
  *plan = nullptr;
  DCTCHECK(checkDatatype(comm, dtype, fn));
  if (rowLength == 0 || rowLength > 0xffffffffull)
    return fail(comm, dctInvalidArgument, "%s: rowLength %zu must be in [1, 2^32)", fn, rowLength);
  DCTCHECK(checkRowCounts(comm, rowsPerRank, rowLength, "rowsPerRank", fn));
  return checkConfig(comm, config, resolved);
}

// Buffers of one call: `rowsIn` rows readable at in, `rowsOut` writable at
// out, in one memory space the transport moves; binds the plan's kernels.
dctResult_t checkCall(dctDesPlan_t p, const void* in, size_t rowsIn, void* out, size_t rowsOut, const char* inName,
                      const char* outName, const char* fn) {
  dctComm_t comm = p->comm;
  const size_t es = dtypeSize(p->dtype);
  DCTCHECK(checkBuffer(comm, in, rowsIn * p->rowLength, es, inName, fn));
  DCTCHECK(checkBuffer(comm, out, rowsOut * p->rowLength, es, outName, fn));
  if (in != nullptr && in == out) return fail(comm, dctInvalidArgument, "%s: %s and %s must differ", fn, inName, outName);
  const void* sample = in ? in : out;
  if (in && out && &twinFor(in) != &twinFor(out))
    return fail(comm, dctInvalidArgument, "%s: %s and %s are in different memory spaces", fn, inName, outName);
  DCTCHECK(checkTransportSpace(comm, sample, fn));
  return bindDesTwin(p, sample, fn);
}

}  // namespace

extern "C" dctResult_t dctDesPlanCreate(dctComm_t comm, const size_t* rowsPerRank, size_t rowLength,
                                        dctDataType_t datatype, const dctConfig_t* config, dctDesPlan_t* plan) {
  const char* fn = "dctDesPlanCreate";
  if (!validComm(comm)) return fail(nullptr, dctInvalidArgument, "%s: invalid comm", fn);
  return guarded(comm, fn, [&] {
    dctConfig_t resolved{};
    const dctResult_t local = caught(comm, fn, [&] {
      return checkCreate(comm, rowsPerRank, rowLength, datatype, config, resolved, plan, fn);
    });
    // A rank without a valid split still joins the split check, with zeros.
    std::vector<size_t> zeros;
    if (local != dctSuccess) {
      zeros.assign(comm->size, 0);
      rowsPerRank = zeros.data();
    }
    dctDesPlan_t made = nullptr;
    DCTCHECK(createDesPlan(comm, rowsPerRank, rowLength, datatype, resolved, local, &made));
    *plan = made;
    return dctSuccess;
  });
}

extern "C" dctResult_t dctDesPlanDestroy(dctDesPlan_t plan) {
  if (plan == nullptr) return dctSuccess;
  if (!validPlan(plan)) return fail(nullptr, dctInvalidArgument, "dctDesPlanDestroy: not a dctDesPlan_t");
  desPlanDestroy(plan);
  return dctSuccess;
}

extern "C" dctResult_t dctDesPlanGetStats(dctDesPlan_t plan, dctAlltoallStats_t* stats) {
  if (!validPlan(plan)) return fail(nullptr, dctInvalidArgument, "dctDesPlanGetStats: invalid plan");
  if (stats == nullptr) return fail(plan->comm, dctInvalidArgument, "dctDesPlanGetStats: stats is NULL");
  *stats = plan->stats;
  return dctSuccess;
}

extern "C" dctResult_t dctDesReduceScatter(dctDesPlan_t plan, const void* partials, void* summed, void* stream) {
  const char* fn = "dctDesReduceScatter";
  if (!validPlan(plan)) return fail(nullptr, dctInvalidArgument, "%s: invalid plan", fn);
  return guarded(plan->comm, fn, [&] {
    const dctResult_t local = caught(plan->comm, fn, [&] {
      return checkCall(plan, partials, plan->totalRows(), summed, plan->mine(), "partials", "summed", fn);
    });
    return desForward(plan, partials, summed, stream, local, fn);
  });
}

extern "C" dctResult_t dctDesReduceScatterBackward(dctDesPlan_t plan, const void* gradSummed, void* gradPartials,
                                                   void* stream) {
  const char* fn = "dctDesReduceScatterBackward";
  if (!validPlan(plan)) return fail(nullptr, dctInvalidArgument, "%s: invalid plan", fn);
  return guarded(plan->comm, fn, [&] {
    const dctResult_t local = caught(plan->comm, fn, [&] {
      return checkCall(plan, gradSummed, plan->mine(), gradPartials, plan->totalRows(), "gradSummed",
                       "gradPartials", fn);
    });
    return desBackward(plan, gradSummed, gradPartials, stream, local, fn);
  });
}
