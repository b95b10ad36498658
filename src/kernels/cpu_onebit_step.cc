// CPU twin of the 1-bit allreduce's queued ops (onebit_step_args.h), built
// from the twin's onebitCompress and onebitDecode with the arguments read
// from the state, so the queued and the synchronous paths compute the same
// bits. The state is host memory and every op completes before it returns.
#include <cmath>
#include <cstring>
#include <limits>

#include "base/debug.h"
#include "base/dtype.h"
#include "kernels/cpu_context.h"

namespace dct {

dctResult_t cpuOnebitStepCompress(KernelContext* ctx, const OnebitStepArgs* args, int server, void*) {
  const OnebitStepArgs& a = *args;
  StreamState& s = *a.state;
  const int which = server ? s.serverCommitted : s.committed;
  void* const* errors = server ? a.serverErrors : a.errors;
  OnebitCompressArgs c{server ? nullptr : a.input, errors[which], errors[1 - which], server ? a.serverN : a.n,
                       a.dtype, server ? a.serverSlot : a.workerSlots, a.slotBytes, a.chunkWords,
                       server ? 1 : a.ranks, a.scratch};
  if (server) c.mean = OnebitMean{a.receivedSlots, a.slotBytes, a.ranks};
  c.keepX = true;
  c.pending = (server ? s.serverPending : s.pending) != 0;
  c.pendingScale = server ? s.serverPendingScale : s.pendingScale;
  DCTCHECK(cpuOnebitCompress(ctx, &c, nullptr));
  (server ? s.draftServerScale : s.draftTau) = c.scaleValue;
  for (int q = 0; q < (server ? 1 : a.ranks); q++)
    *onebitDigestAt(server ? a.serverSlot : a.workerSlots, a.slotBytes, static_cast<size_t>(q)) = a.digest;
  return dctSuccess;
}

dctResult_t cpuOnebitStepCheck(KernelContext*, const OnebitStepArgs* args, void*) {
  const OnebitStepArgs& a = *args;
  StreamState& s = *a.state;
  s.vote = *a.failed;  // halted: this rank drops the step, and its vote says so
  const bool same = onebitDigestsMatch(a.receivedSlots, a.slotBytes, a.ranks, a.digest) &&
                    onebitDigestsMatch(a.gatheredSlots, a.slotBytes, a.ranks, a.digest);
  if (s.vote == 0 && !same) s.vote = dctInvalidUsage;  // the ranks' calls differ
  const size_t scaleBytes = dtypeSize(accumulationType(a.dtype));
  int32_t nonFinite = 0;
  for (int j = 0; j < a.ranks; j++) {
    const char* at = static_cast<const char*>(a.gatheredSlots) + static_cast<size_t>(j) * a.slotBytes;
    double v;
    if (scaleBytes == 8) {
      std::memcpy(&v, at, 8);
    } else {
      float f;
      std::memcpy(&f, at, 4);
      v = f;
    }
    if (!std::isfinite(v)) nonFinite = 1;
  }
  s.draftNonFinite = nonFinite;
  return dctSuccess;
}

dctResult_t cpuOnebitStepDecode(KernelContext* ctx, const OnebitStepArgs* args, void*) {
  const OnebitStepArgs& a = *args;
  const StreamState& s = *a.state;
  if (!s.lastOk) return dctSuccess;
  const double factor = s.draftNonFinite ? std::numeric_limits<double>::quiet_NaN() : a.factor;
  OnebitDecodeArgs out{a.gatheredSlots, a.slotBytes, a.chunkWords, a.n, a.dtype, a.result, factor};
  return cpuOnebitDecode(ctx, &out, nullptr);
}

}  // namespace dct
