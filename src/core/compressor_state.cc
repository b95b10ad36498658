#include "core/compressor_state.h"

#include <cstdio>
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/debug.h"
#include "base/dtype.h"
#include "core/state_blob.h"
#include "kernels/onebit_kernels.h"

namespace dct {
namespace {

StateIdentity identityOf(dctCompressor_t c) {
  const dctConfig_t& f = c->config;
  StateIdentity id;
  id.count = c->count;
  id.dtype = c->dtype;
  id.accType = c->accType;
  id.wireType = c->wireType;
  id.ranks = c->ranks;
  id.rank = c->rank;
  id.density = f.density;
  id.thresholdInterval = f.thresholdInterval;
  id.errorFeedback = f.errorFeedback;
  id.warmupSteps = f.warmupSteps;
  id.thresholdMethod = f.thresholdMethod;
  id.algorithm = f.algorithm;
  id.compressor = f.compressor;
  id.autoGlobalTopk = f.autoGlobalTopk;
  id.seed = f.seed;
  return id;
}

// The 1-bit server error exists once a 1-bit step (or a load) set it up.
bool serverSetUp(dctCompressor_t c) { return c->ops != nullptr && c->onebit.readyFor(c->ops, c->kernels); }

// c's state, arrays laid out but not copied (a bound compressor's).
SavedState capture(dctCompressor_t c) {
  SavedState st;
  st.id = identityOf(c);
  StateScalars& s = st.s;
  s.stats = c->stats;
  s.tau = c->tau;
  s.lastStepNs = c->lastStepNs;
  s.lastLocalNs = c->lastLocalNs;
  s.lastMessages = c->lastMessages;
  s.chunkNeeds = c->chunkNeeds;
  s.chunkElems = c->chunkElems;
  s.residualZero = c->residualZero;
  // A scale without its pending flag is stale, and saved as 0.
  s.onebitPending = c->onebit.pending;
  s.onebitPendingScale = s.onebitPending ? c->onebit.pendingScale : 0;
  s.serverPresent = serverSetUp(c);
  s.serverPending = s.serverPresent && c->onebit.serverPending;
  s.serverPendingScale = s.serverPending ? c->onebit.serverPendingScale : 0;
  const OnebitState& ob = c->onebit;
  if (ob.seg.many()) {  // version 6: the segments and their scales (stale ones as 0)
    st.version = 6;
    s.segments.assign(ob.seg.offsets.begin(), ob.seg.offsets.end());
    s.pendingScales.assign(ob.pendingScales.size(), 0.0);
    s.serverPendingScales.assign(ob.serverPendingScales.size(), 0.0);
    if (s.onebitPending) s.pendingScales = ob.pendingScales;
    if (s.serverPending) s.serverPendingScales = ob.serverPendingScales;
  }
  const OwnerState& o = c->owner;
  s.ownerBegin = o.begin;
  s.ownerLength = o.length;
  s.ownerZero = o.zero;
  s.ownerTau = o.tau;
  s.ownerHaveTau = o.haveTau;
  s.ownerLastEstimateStep = o.lastEstimateStep;
  s.ownerDriftPending = o.driftPending;
  st.residualElems = c->count;
  st.serverElems = s.serverPresent ? OnebitChunks(c->count, c->ranks).length(c->rank) : 0;
  st.ownerElems = o.zero ? 0 : o.length;
  layOutState(st);
  return st;
}

dctResult_t mismatch(dctCompressor_t c, const char* fn, const char* field, const std::string& saved,
                     const std::string& here) {
  return fail(c->comm, dctInvalidArgument, "%s: the state's %s is %s, this compressor's %s", fn, field, saved.c_str(),
              here.c_str());
}

std::string typeName(int32_t t) { return dtypeName(static_cast<dctDataType_t>(t)); }

// The saved identity against c's: the first field that differs is named.
dctResult_t checkMatches(dctCompressor_t c, const StateIdentity& s, const char* fn) {
  const StateIdentity h = identityOf(c);
  using std::to_string;
  if (s.count != h.count) return mismatch(c, fn, "count", to_string(s.count), to_string(h.count));
  if (s.dtype != h.dtype) return mismatch(c, fn, "datatype", typeName(s.dtype), typeName(h.dtype));
  if (s.accType != h.accType) return mismatch(c, fn, "accumulation type", typeName(s.accType), typeName(h.accType));
  if (s.wireType != h.wireType) return mismatch(c, fn, "config.wireType", typeName(s.wireType), typeName(h.wireType));
  if (s.ranks != h.ranks) return mismatch(c, fn, "comm size", to_string(s.ranks), to_string(h.ranks));
  if (s.rank != h.rank) return mismatch(c, fn, "rank", to_string(s.rank), to_string(h.rank));
  if (std::memcmp(&s.density, &h.density, sizeof(double)) != 0) {
    char a[32], b[32];
    std::snprintf(a, sizeof a, "%.17g", s.density);
    std::snprintf(b, sizeof b, "%.17g", h.density);
    return mismatch(c, fn, "config.density", a, b);
  }
  const std::pair<const char*, std::pair<long long, long long>> ints[] = {
      {"config.thresholdInterval", {s.thresholdInterval, h.thresholdInterval}},
      {"config.errorFeedback", {s.errorFeedback, h.errorFeedback}},
      {"config.warmupSteps", {s.warmupSteps, h.warmupSteps}},
      {"config.thresholdMethod", {s.thresholdMethod, h.thresholdMethod}},
      {"config.algorithm", {s.algorithm, h.algorithm}},
      {"config.compressor", {s.compressor, h.compressor}},
      {"config.autoGlobalTopk", {s.autoGlobalTopk, h.autoGlobalTopk}},
      {"config.seed", {s.seed, h.seed}}};
  for (const auto& [field, v] : ints)
    if (v.first != v.second) return mismatch(c, fn, field, to_string(v.first), to_string(v.second));
  return dctSuccess;
}

// The scalars that do not go with an array: they cannot fail.
void applyScalars(dctCompressor_t c, StateScalars& s) {
  c->stats = s.stats;
  c->tau = s.tau;
  c->lastStepNs = s.lastStepNs;
  c->lastLocalNs = s.lastLocalNs;
  c->lastMessages.swap(s.lastMessages);
  c->chunkNeeds.swap(s.chunkNeeds);
  c->chunkElems = s.chunkElems;
}

// The arrays into a bound compressor's spare buffers, then (nothing left
// that can fail) swapped in with the flags that go with them.
dctResult_t applyArrays(dctCompressor_t c, const SavedState& st, const unsigned char* in, void* stream,
                        const char* fn) {
  const StateScalars& s = st.s;
  const size_t es = dtypeSize(c->accType);
  OnebitState& ob = c->onebit;
  OwnerState& o = c->owner;
  dctResult_t res = c->ops->copy(c->kernels, c->spareResidual(), in + st.residualAt, st.residualElems * es, stream);
  if (res == dctSuccess && s.serverPresent) res = onebitSetUp(c, stream);
  if (res == dctSuccess && st.serverElems > 0)
    res = c->ops->copy(c->kernels, ob.serverErrors[1 - ob.serverCommitted].as(), in + st.serverAt,
                       st.serverElems * es, stream);
  if (res == dctSuccess && st.ownerElems > 0) res = o.residuals[1 - o.committed].reserve(st.ownerElems * es);
  if (res == dctSuccess && st.ownerElems > 0)
    res = c->ops->copy(c->kernels, o.spare(), in + st.ownerAt, st.ownerElems * es, stream);
  if (res == dctSuccess) res = c->ops->synchronize(c->kernels, stream);
  if (res != dctSuccess)
    return fail(c->comm, res, "%s: copying the state into the compressor's %s memory failed", fn,
                c->ops->device ? "device" : "host");
  c->committed = 1 - c->committed;
  c->residualZero = s.residualZero;
  ob.pending = s.onebitPending;
  ob.pendingScale = s.onebitPendingScale;
  // The segments were set by loadState (sized alike: copies, no allocation).
  if (s.pendingScales.size() == ob.pendingScales.size())
    std::copy(s.pendingScales.begin(), s.pendingScales.end(), ob.pendingScales.begin());
  if (s.serverPendingScales.size() == ob.serverPendingScales.size())
    std::copy(s.serverPendingScales.begin(), s.serverPendingScales.end(), ob.serverPendingScales.begin());
  if (s.serverPresent) {
    ob.serverCommitted = 1 - ob.serverCommitted;
    ob.serverPending = s.serverPending;
    ob.serverPendingScale = s.serverPendingScale;
  } else {
    ob.release();  // a later 1-bit step sets it up afresh, zeroed
    ob.serverPending = false;
  }
  if (st.ownerElems > 0) o.committed = 1 - o.committed;
  o.begin = s.ownerBegin;
  o.length = s.ownerLength;
  o.zero = s.ownerZero;
  o.tau = s.ownerTau;
  o.haveTau = s.ownerHaveTau;
  o.lastEstimateStep = s.ownerLastEstimateStep;
  o.driftPending = s.ownerDriftPending;
  return dctSuccess;
}

}  // namespace

dctResult_t savedStateBytes(dctCompressor_t c, size_t* bytes) {
  *bytes = c->heldState.empty() ? capture(c).bytes : c->heldState.size();
  return dctSuccess;
}

dctResult_t saveState(dctCompressor_t c, unsigned char* out, size_t bytes, void* stream, const char* fn) {
  // Held (not bound yet): the loaded state is still the whole state.
  if (!c->heldState.empty()) {
    if (bytes != c->heldState.size()) return dctInternalError;
    std::memcpy(out, c->heldState.data(), bytes);
    return dctSuccess;
  }
  const SavedState st = capture(c);
  if (bytes != st.bytes) return dctInternalError;
  writeState(st, out);
  const size_t es = dtypeSize(c->accType);
  if (c->ops == nullptr) {
    std::memset(out + st.residualAt, 0, st.residualElems * es);  // never stepped: zeros
  } else {
    dctResult_t res = c->ops->copy(c->kernels, out + st.residualAt, c->residual(), st.residualElems * es, stream);
    if (res == dctSuccess && st.serverElems > 0)
      res = c->ops->copy(c->kernels, out + st.serverAt, c->onebit.serverErrors[c->onebit.serverCommitted].as(),
                         st.serverElems * es, stream);
    if (res == dctSuccess && st.ownerElems > 0)
      res = c->ops->copy(c->kernels, out + st.ownerAt, c->owner.residual(), st.ownerElems * es, stream);
    if (res == dctSuccess) res = c->ops->synchronize(c->kernels, stream);
    if (res != dctSuccess)
      return fail(c->comm, res, "%s: copying the state out of the compressor's %s memory failed", fn,
                  c->ops->device ? "device" : "host");
  }
  sealState(out, bytes);
  return dctSuccess;
}

// The state's segments with zeroed scales (applyArrays fills them), built
// aside: may throw, nothing changed.
struct Segmented {
  OnebitSegments seg;
  std::vector<double> pending, serverPending, step, serverStep;
  explicit Segmented(const SavedState& st) {
    std::vector<size_t> offsets(st.s.segments.begin(), st.s.segments.end());
    if (offsets.empty()) offsets = {0, static_cast<size_t>(st.id.count)};
    seg = onebitSegmentsOf(offsets.data(), static_cast<int>(offsets.size()) - 1, st.id.count, st.id.ranks,
                           st.id.rank);
    pending.resize(seg.count());
    step.resize(seg.count());
    serverPending.resize(seg.serverCount());
    serverStep.resize(seg.serverCount());
  }
  void swapInto(OnebitState& ob) {
    std::swap(ob.seg, seg);
    ob.pendingScales.swap(pending);
    ob.serverPendingScales.swap(serverPending);
    ob.stepScales.swap(step);
    ob.stepServerScales.swap(serverStep);
  }
};

dctResult_t loadState(dctCompressor_t c, const unsigned char* in, size_t bytes, void* stream, const char* fn) {
  SavedState st;
  std::string why;
  if (!readState(in, bytes, st, why)) return fail(c->comm, dctInvalidArgument, "%s: %s", fn, why.c_str());
  DCTCHECK(checkMatches(c, st.id, fn));
  Segmented segmented(st);
  OnebitState& ob = c->onebit;
  const bool setUp = serverSetUp(c);
  // Set-up 1-bit buffers are laid out for the current segments.
  if (setUp && segmented.seg.digest != ob.seg.digest)
    return fail(c->comm, dctInvalidArgument,
                "%s: the state's 1-bit segments differ from this compressor's, which has stepped with its own; "
                "load it into a compressor that has not stepped",
                fn);
  segmented.swapInto(ob);  // what applyArrays sets up and fills
  if (c->count > 0 && c->ops == nullptr) {
    try {
      std::vector<unsigned char> held(in, in + bytes);
      c->heldState.swap(held);
    } catch (...) {
      segmented.swapInto(ob);  // back: nothing changed
      throw;
    }
  } else if (c->count > 0) {
    const dctResult_t res = applyArrays(c, st, in, stream, fn);
    if (res != dctSuccess) {
      segmented.swapInto(ob);
      if (!setUp) ob.release();  // laid out for the state's segments
      return res;
    }
  }
  applyScalars(c, st.s);
  DCT_TRACE("%s: step %llu, tau %g%s", fn, (unsigned long long)c->stats.step, c->tau.tau,
            c->heldState.empty() ? "" : " (held until the first step)");
  return dctSuccess;
}

dctResult_t applyHeldState(dctCompressor_t c, const char* fn) {
  SavedState st;
  std::string why;
  if (!readState(c->heldState.data(), c->heldState.size(), st, why, false))
    return fail(c->comm, dctInternalError, "%s: the held state no longer reads: %s", fn, why.c_str());
  DCTCHECK(applyArrays(c, st, c->heldState.data(), nullptr, fn));
  std::vector<unsigned char>().swap(c->heldState);
  return dctSuccess;
}

}  // namespace dct
