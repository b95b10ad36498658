// dctCompressorSetSegments: a 1-bit compressor's scale per segment of its
// tensor (onebit_state.h: OnebitSegments). Fixed before the first step, so
// the pending scales a step leaves always match the segments that read them.
#include "api/guard.h"
#include "base/debug.h"
#include "core/compressor.h"

using namespace dct;

namespace {

dctResult_t checkOffsets(dctCompressor_t c, const size_t* offsets, int nsegments, const char* fn) {
  dctComm_t comm = c->comm;
  if (offsets == nullptr) return fail(comm, dctInvalidArgument, "%s: offsets is NULL", fn);
  if (nsegments < 1) return fail(comm, dctInvalidArgument, "%s: nsegments is %d (at least 1)", fn, nsegments);
  if (offsets[0] != 0) return fail(comm, dctInvalidArgument, "%s: offsets[0] is %zu, not 0", fn, offsets[0]);
  for (int s = 0; s < nsegments; s++)
    if (offsets[s + 1] < offsets[s])
      return fail(comm, dctInvalidArgument, "%s: offsets[%d] = %zu is below offsets[%d] = %zu (not sorted)", fn,
                  s + 1, offsets[s + 1], s, offsets[s]);
  if (offsets[nsegments] != c->count)
    return fail(comm, dctInvalidArgument, "%s: offsets[%d] (the last) is %zu, not the compressor's count %zu", fn,
                nsegments, offsets[nsegments], c->count);
  return dctSuccess;
}

}  // namespace

extern "C" dctResult_t dctCompressorSetSegments(dctCompressor_t c, const size_t* offsets, int nsegments) {
  const char* fn = "dctCompressorSetSegments";
  if (!validCompressor(c)) return fail(nullptr, dctInvalidArgument, "%s: invalid compressor", fn);
  dctComm_t comm = c->comm;
  if (c->config.compressor != dctCompressorOnebit)
    return fail(comm, dctInvalidUsage, "%s: not a 1-bit compressor (dctCompressorOnebit)", fn);
  return guarded(comm, fn, [&] {
    DCTCHECK(checkOffsets(c, offsets, nsegments, fn));
    OnebitState& ob = c->onebit;
    if (c->stats.step > 0 || ob.pending || ob.serverPending || !c->heldState.empty())
      return fail(comm, dctInvalidUsage,
                  "%s: the compressor has stepped (or holds a loaded state): segments are set before its first "
                  "step",
                  fn);
    // Built aside (may throw: nothing changed), then swapped in.
    OnebitSegments seg = onebitSegmentsOf(offsets, nsegments, c->count, c->ranks, c->rank);
    std::vector<double> worker(seg.count()), server(seg.serverCount()), stepWorker(seg.count()),
        stepServer(seg.serverCount());
    // A failed first step may have laid out the buffers for the old
    // segments; they hold nothing yet (no step committed): set up afresh.
    if (c->ops != nullptr && ob.readyFor(c->ops, c->kernels)) ob.release();
    ob.seg = std::move(seg);
    ob.pendingScales.swap(worker);
    ob.serverPendingScales.swap(server);
    ob.stepScales.swap(stepWorker);
    ob.stepServerScales.swap(stepServer);
    DCT_TRACE("%s: %d segments (%d after dropping empty ones), %zu scales per slot", fn, nsegments,
              ob.seg.count(), ob.seg.scalesPerSlot);
    return dctSuccess;
  });
}
