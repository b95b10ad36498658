#include "algo/agree.h"
#include "algo/vote_flag.h"

#include <cstring>

#include "base/debug.h"
#include "transport/comm.h"

namespace dct {

dctResult_t checkPeer(dctComm_t comm, const CallHeader& mine, const CallHeader& h, int r, const char* fn) {
  if (h.count != mine.count)
    return fail(comm, dctInvalidUsage, "%s: ranks disagree on count (rank %d: %llu, this rank %d: %llu)", fn, r,
                (unsigned long long)h.count, comm->rank, (unsigned long long)mine.count);
  const char* what = h.datatype != mine.datatype   ? "datatype"
                     : h.op != mine.op             ? "op"
                     : std::memcmp(&h.capacityFactor, &mine.capacityFactor, sizeof(double)) != 0
                         ? "config.capacityFactor (DCT_CAPACITY_FACTOR)"
                     : h.path != mine.path         ? "the step's path (config.compressor / DCT_COMPRESSOR, or a "
                                                     "compressor missing on some rank)"
                     : h.wireType != mine.wireType ? "config.wireType (DCT_WIRE_TYPE)"
                     : std::memcmp(&h.density, &mine.density, sizeof(double)) != 0
                         ? "config.density (DCT_DENSITY)"
                     : h.configured != mine.configured   ? "config.algorithm (DCT_ALGORITHM)"
                     : h.warmupSteps != mine.warmupSteps ? "config.warmupSteps (DCT_WARMUP_STEPS)"
                     : h.autoGlobalTopk != mine.autoGlobalTopk ? "config.autoGlobalTopk (DCT_AUTO_GLOBAL_TOPK)"
                     : h.ownerReturn != mine.ownerReturn       ? "config.ownerReturn (DCT_OWNER_RETURN)"
                     : h.segments != mine.segments ? "the 1-bit compressor's segments (dctCompressorSetSegments)"
                     : h.algorithm != mine.algorithm     ? "the planned algorithm"
                     : h.mode != mine.mode               ? "phase (warm-up/query)"
                     : h.chunks != mine.chunks || h.chunkElems != mine.chunkElems
                         ? "pipeline chunks (DCT_CHUNK_ELEMENTS, DCT_PIPELINE)"
                         : nullptr;
  if (what)
    return fail(comm, dctInvalidUsage, "%s: ranks disagree on %s (rank %d differs from this rank %d)", fn, what,
                r, comm->rank);
  return dctSuccess;
}

namespace {

dctResult_t otherFailed(dctComm_t comm, int32_t worst, const char* fn, const char* phase) {
  const auto other = worst > 0 && worst < dctNumResults ? static_cast<dctResult_t>(worst) : dctInternalError;
  return fail(comm, other, "%s: another rank failed during the %s (%s); nothing was committed on any rank",
              fn, phase, dctGetErrorString(other));
}

}  // namespace

dctResult_t vote(dctComm_t comm, dctResult_t mine, void* stream, const char* fn, const char* phase) {
  if (comm->size == 1) return mine;
  int32_t worst = 0;
  dctResult_t res = comm->transport->vote(comm, static_cast<int32_t>(mine), &worst, stream);
  if (mine != dctSuccess) return mine;
  if (res != dctSuccess) return res;
  if (worst == dctSuccess) return dctSuccess;
  return otherFailed(comm, worst, fn, phase);
}

// The max of (error << 1) or the flag: any error outranks every flag, and
// the worst error comes back whole.
dctResult_t voteWithFlag(dctComm_t comm, dctResult_t mine, bool flag, bool& anyFlag, void* stream, const char* fn,
                         const char* phase) {
  anyFlag = flag;
  if (comm->size == 1) return mine;
  const int32_t sent = mine != dctSuccess ? static_cast<int32_t>(mine) << 1 : flag ? 1 : 0;
  int32_t worst = 0;
  dctResult_t res = comm->transport->vote(comm, sent, &worst, stream);
  if (mine != dctSuccess) return mine;
  if (res != dctSuccess) return res;
  anyFlag = worst == 1;
  return worst <= 1 ? dctSuccess : otherFailed(comm, worst >> 1, fn, phase);
}

}  // namespace dct
