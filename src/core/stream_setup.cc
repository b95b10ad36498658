#include "core/stream_setup.h"

#include <cmath>

#include "base/debug.h"
#include "base/dtype.h"
#include "core/compressor.h"
#include "core/owner_target.h"
#include "kernels/stream_args.h"

namespace dct {

bool fixedCapacity(dctCompressor_t c) {
  return c->config.capacityFactor > 0 && c->config.compressor == dctCompressorTopk;
}

size_t slotCapacity(dctCompressor_t c) {
  const double want = std::ceil(c->config.capacityFactor * static_cast<double>(targetNnz(c)));
  return want >= static_cast<double>(c->count) ? c->count : static_cast<size_t>(want);
}

bool fixedGlobalTopk(dctCompressor_t c) {
  return fixedCapacity(c) && c->config.algorithm == dctAlgoGlobalTopk;
}

namespace {

size_t longestRange(size_t count, int ranks) { return ranks > 0 ? (count + ranks - 1) / ranks : count; }

// max(ceil(c kq), ceil(kq + 3 sqrt(kq))) entries, at most `length`.
size_t shareCapacity(double factor, double kq, size_t length) {
  const double want = std::max(std::ceil(factor * kq), std::ceil(kq + 3 * std::sqrt(kq)));
  return want >= static_cast<double>(length) ? length : static_cast<size_t>(want);
}

}  // namespace

size_t pieceCapacity(dctCompressor_t c, int ranks) {
  const size_t longest = longestRange(c->count, ranks);
  return shareCapacity(c->config.capacityFactor, c->config.density * static_cast<double>(longest), longest);
}

size_t ownerSlotCapacity(dctCompressor_t c, int ranks) {
  const size_t longest = longestRange(c->count, ranks);
  return shareCapacity(c->config.capacityFactor, ownerDensity(c->config.density) * static_cast<double>(longest),
                       longest);
}

namespace {

bool onebit(dctCompressor_t c) { return c->config.compressor == dctCompressorOnebit; }

}  // namespace

bool stepCapturable(dctCompressor_t c) {
  // 1-bit with segments reads its scales back (onebit_step.h: onebitQueues)
  const bool queues = fixedCapacity(c) || (onebit(c) && !c->onebit.seg.many());
  return queues && c->ops != nullptr && c->ops->device && c->stream.agreed && c->stream.live && !inWarmup(c);
}

namespace {

// The byte counters of `steps` steps since the state went live.
void countSteps(dctCompressor_t c, uint64_t steps) {
  const dctStats_t& base = c->stream.base;
  dctStats_t& st = c->stats;
  st.bytesSent = c->stream.sentBytes;
  st.bytesReceived = c->stream.receivedBytes;
  st.denseBytes = c->count * dtypeSize(c->dtype);
  st.algorithm = c->stream.algorithm;
  st.totalBytesSent = base.totalBytesSent + steps * st.bytesSent;
  st.totalBytesReceived = base.totalBytesReceived + steps * st.bytesReceived;
  st.totalDenseBytes = base.totalDenseBytes + steps * st.denseBytes;
}

// A 1-bit compressor's host fields from its state (commitStep's, step by step).
dctResult_t settleOnebit(dctCompressor_t c, const StreamState& s) {
  OnebitState& ob = c->onebit;
  ob.serverCommitted = s.serverCommitted;
  ob.pending = s.pending != 0;
  ob.pendingScale = s.pendingScale;
  ob.serverPending = s.serverPending != 0;
  ob.serverPendingScale = s.serverPendingScale;
  if (ob.pending) c->residualZero = false;
  const uint64_t steps = s.step - c->stream.base.step;
  c->stats.step = s.step;
  if (steps == 0) return dctSuccess;
  c->stats.threshold = s.tau;
  c->stats.nnz = c->count;
  c->stats.nonFinite = s.nonFinite;
  countSteps(c, steps);
  return dctSuccess;
}

// The owner's host fields -> its StreamState: its own tau and schedule, its
// residual's buffer; every nonzero (tau at the floor, never estimated) when
// its share of the range is all of it.
dctResult_t publishOwner(dctCompressor_t c, void* stream) {
  OwnerState& o = c->owner;
  const size_t length = c->stream.ownerLength, bytes = length * dtypeSize(c->accType);
  DCTCHECK(o.residuals[0].reserve(bytes));
  DCTCHECK(o.residuals[1].reserve(bytes));
  if (o.zero || o.begin != c->stream.ownerBegin || o.length != length) {
    DCTCHECK(c->ops->zero(c->kernels, o.residual(), bytes, stream));
    o.zero = true;
  }
  o.begin = c->stream.ownerBegin;
  o.length = length;
  StreamState s{};
  s.step = c->stats.step;
  s.tau = ownerDensity(c->config.density) >= 1 ? tauFloor(c) : o.haveTau ? o.tau : 0;
  s.lastEstimateStep = o.lastEstimateStep;
  s.driftPending = o.driftPending ? 1 : 0;
  s.committed = o.committed;
  s.nnz = c->stats.ownerKept;
  DCTCHECK(c->stream.ownerState.reserve(sizeof s));
  return c->ops->copy(c->kernels, c->stream.ownerState.as(), &s, sizeof s, stream);
}

// The owner's StreamState -> its host fields and stats (the caller waited).
dctResult_t settleOwner(dctCompressor_t c, uint64_t steps) {
  StreamState s{};
  DCTCHECK(c->ops->copy(c->kernels, &s, c->stream.ownerState.as(), sizeof s, c->stream.lastStream));
  DCTCHECK(c->ops->synchronize(c->kernels, c->stream.lastStream));
  OwnerState& o = c->owner;
  o.committed = s.committed;
  o.haveTau = ownerDensity(c->config.density) < 1 && s.tau > 0;
  if (o.haveTau) o.tau = s.tau;
  o.lastEstimateStep = s.lastEstimateStep;
  o.driftPending = s.driftPending != 0;
  if (steps == 0) return dctSuccess;
  dctStats_t& st = c->stats;
  st.ownerKept = s.nnz;
  st.ownerThreshold = o.length ? s.tau : 0;
  st.ownerResidualMass = 0;
  if (c->config.errorFeedback && o.length)
    DCTCHECK(c->ops->absSum(c->kernels, o.residual(), o.length, c->accType, &st.ownerResidualMass,
                            c->stream.lastStream));
  o.zero = st.ownerResidualMass == 0;
  return dctSuccess;
}

}  // namespace

dctResult_t publishStream(dctCompressor_t c, void* stream) {
  StreamState s{};
  s.step = c->stats.step;
  s.tau = c->tau.have ? c->tau.tau : 0;
  s.lastEstimateStep = c->tau.lastEstimateStep;
  s.driftPending = c->tau.driftPending ? 1 : 0;
  s.committed = c->committed;
  s.estimates = c->stats.thresholdEstimates;
  s.nnz = c->stats.nnz;
  s.nonFinite = c->stats.nonFinite;
  if (onebit(c)) {
    s.tau = c->stats.threshold;
    s.serverCommitted = c->onebit.serverCommitted;
    s.pending = c->onebit.pending ? 1 : 0;
    s.pendingScale = c->onebit.pendingScale;
    s.serverPending = c->onebit.serverPending ? 1 : 0;
    s.serverPendingScale = c->onebit.serverPendingScale;
  }
  DCTCHECK(c->stream.state.reserve(sizeof s));
  DCTCHECK(c->ops->copy(c->kernels, c->stream.state.as(), &s, sizeof s, stream));
  if (fixedGlobalTopk(c)) DCTCHECK(publishOwner(c, stream));
  DCTCHECK(c->ops->synchronize(c->kernels, stream));
  c->stream.base = c->stats;
  c->stream.lastStream = stream;
  c->stream.live = true;
  return dctSuccess;
}

dctResult_t settleStream(dctCompressor_t c) {
  if (!c->stream.live) return dctSuccess;
  StreamState s{};
  DCTCHECK(c->ops->copy(c->kernels, &s, c->stream.state.as(), sizeof s, c->stream.lastStream));
  DCTCHECK(c->ops->synchronize(c->kernels, c->stream.lastStream));
  c->committed = s.committed;
  if (onebit(c)) return settleOnebit(c, s);
  c->tau.tau = s.tau;
  c->tau.have = s.tau > 0;
  c->tau.lastEstimateStep = s.lastEstimateStep;
  c->tau.driftPending = s.driftPending != 0;
  c->tau.acceptedCount = 0;
  c->tau.tightenedTo = 0;
  c->tau.starvedRun = 0;
  const dctStats_t& base = c->stream.base;
  dctStats_t& st = c->stats;
  const uint64_t steps = s.step - base.step;
  if (fixedGlobalTopk(c)) DCTCHECK(settleOwner(c, steps));
  st.step = s.step;
  st.thresholdEstimates = s.estimates;
  if (steps == 0) return dctSuccess;
  c->residualZero = false;
  st.threshold = s.tau;
  st.nnz = s.nnz;
  st.nonFinite = s.nonFinite;
  countSteps(c, steps);
  return dctSuccess;
}

}  // namespace dct
