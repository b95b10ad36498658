#include "core/compressor.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <new>

#include "base/components.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "base/half_types.h"
#include "base/memory_space.h"
#include "core/compressor_state.h"
#include "core/drain.h"
#include "kernels/sampling.h"

namespace dct {
namespace {

// Drift band: a selection outside [k / band, k * band] re-estimates tau
// before the next step selects. DESIGN.md suggests 4; a loose band lets
// the message double while error feedback fills the residual (measured: 2x
// k within 30 steps at L = 1000), halving the compression users asked for.
constexpr double kDriftBand = 1.25;
// Counts near a small k are noisy (about sqrt(k) either way): the band is
// never narrower than kNoiseWidths of that on either side, nor the runaway
// margin than twice it. With the ratio alone, k = 16 (64 KiB at 0.1%) left
// the band every third step and k = 2 nearly every step, each drift a
// tightening or an estimate; the messages are a handful of entries anyway.
// From k = 144 up (36 for the runaway) the ratios are the wider.
constexpr double kNoiseWidths = 3;
// A runaway selection (past this many times its target: a gradient whose
// scale jumped) re-estimates and selects again in the same step, so no
// message blows up. Milder drift waits a step: a step's selection then
// never has to be redone, which lets the pipelined allreduce send chunks
// before the whole count is known.
constexpr double kRunawayFactor = 2.0;
// A starved step (drain.h) estimates and selects again at once, aimed at k
// entries; each further one in a row aims kDrainGrowth times higher, up to
// kDrainEntries (512 bytes of COO, no more latency than one entry), so a
// small tensor drains in a few steps rather than one entry a step. Aiming
// at kDrainEntries from the first starved step sent 1.6x the bytes in
// ordinary steps (64 KiB at 0.01% on 2 ranks, k = 2).
constexpr double kDrainEntries = 64;

double noise(double target) { return kNoiseWidths * std::sqrt(target); }

// Drift: count outside the band around k. An accepted tie count gets its
// own band (TauState::acceptedCount).
bool drifted(const TauState& t, double selected, size_t k, bool tauAtFloor) {
  if (!outsideDriftBand(selected, static_cast<double>(k), tauAtFloor)) return false;
  return t.acceptedCount == 0 || outsideDriftBand(selected, static_cast<double>(t.acceptedCount), tauAtFloor);
}

bool runaway(const TauState& t, double selected, size_t k) {
  const double target = static_cast<double>(k > t.acceptedCount ? k : t.acceptedCount);
  return selected > std::max(kRunawayFactor * target, target + 2 * noise(target));
}

// The density a starved step's estimate aims at, after `run` starved steps
// in a row: the configured one first.
double drainDensity(dctCompressor_t c, uint32_t run) {
  if (run == 0) return c->config.density;
  const double k = static_cast<double>(targetNnz(c));
  const double aim = std::max(k, std::min(kDrainEntries, k * std::pow(kDrainGrowth, run)));
  return std::min(1.0, aim / static_cast<double>(c->count));
}

// After the selection: a count outside the band asks for an estimate next
// step; right after an estimate, it is a tie no tau splits, accepted
// rather than re-estimated every step.
void judgeCount(TauState& t, bool freshTau, size_t selected, size_t k, bool tauAtFloor) {
  const double count = static_cast<double>(selected);
  if (!freshTau) {
    t.driftPending = drifted(t, count, k, tauAtFloor);
    if (!t.driftPending) t.tightenedTo = 0;
  } else if (drifted(TauState{}, count, k, tauAtFloor)) t.acceptedCount = selected > 0 ? selected : 1;
}

// tau from acc = grad + committed residual, and where the select reads acc
// (`from`): sampled and exact read it as the two, unwritten (a sample reads
// only its positions, not the tensor), and the select forms it again; bisect
// passes over acc many times, so it is materialised in the spare residual
// first and the select reads it there (from = null).
// `density`: what the estimate aims at (the configured one, or a starved
// step's drainDensity).
dctResult_t estimateTau(dctCompressor_t c, const void* grad, StepDraft& d, const void*& from, void* stream,
                        double density) {
  const auto method = static_cast<dctThresholdMethod_t>(c->config.thresholdMethod);
  ThresholdArgs args{c->residual(), c->count, c->accType, density, method,
                     stepSeed(c->config.seed, c->stats.step)};
  from = grad;
  if (method == dctThresholdBisect) {
    DCTCHECK(c->ops->add(c->kernels, c->spareResidual(), c->residual(), grad, c->count, c->accType, c->dtype, stream));
    args.data = c->spareResidual();
    from = nullptr;
  } else {
    args.addend = grad;
    args.addendType = c->dtype;
  }
  DCTCHECK(c->ops->threshold(c->kernels, &args, &d.tau.tau, stream));
  d.tau.have = true;
  d.tau.lastEstimateStep = c->stats.step;
  d.tau.acceptedCount = 0;
  d.tau.driftPending = false;
  d.tau.tightenedTo = 0;
  d.estimates++;
  DCT_TRACE("step %llu: tau re-estimated to %g (density %g)", (unsigned long long)c->stats.step, d.tau.tau, density);
  return dctSuccess;
}

dctResult_t estimateTau(dctCompressor_t c, const void* grad, StepDraft& d, const void*& from, void* stream) {
  return estimateTau(c, grad, d, from, stream, c->config.density);
}

// The largest power of two P values of `wire` can each reach without their
// sum overflowing it (any summation order): sent values of a wire type
// narrower than the accumulator are clamped there, the rest stays behind.
double sumSafeLimit(dctDataType_t wire, int ranks) {
  return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(maxFinite(wire) / ranks))));
}

dctResult_t layOut(dctCompressor_t c, Message& msg, size_t capacity) {
  size_t idxBytes = alignedIndexBytes(capacity, c->indexBytes);
  DCTCHECK(msg.storage->reserve(idxBytes + capacity * dtypeSize(c->wireType)));
  msg.indices = msg.storage->as();
  msg.values = msg.storage->as<char>() + idxBytes;
  msg.capacity = capacity;
  return dctSuccess;
}

// Selects entries [lo, lo + n) of acc into msg and the spare residual
// (msg's indices count from lo). With grad, acc is grad + committed
// residual (the originals are never modified, so a select can always be
// redone); without, acc is already in the spare residual.
dctResult_t selectRange(dctCompressor_t c, const void* grad, size_t lo, size_t n, double tau, Message& msg,
                        SelectArgs& args, void* stream) {
  const size_t accAt = lo * dtypeSize(c->accType);
  void* out = static_cast<char*>(c->spareResidual()) + accAt;
  const void* in = grad ? static_cast<const char*>(c->residual()) + accAt : out;
  if (grad) grad = static_cast<const char*>(grad) + lo * dtypeSize(c->dtype);
  args = msg.dense ? SelectArgs{grad, out, n, c->accType, c->indexBytes, tau, n, nullptr, msg.dense}
                   : SelectArgs{grad, out, n, c->accType, c->indexBytes, tau, msg.capacity, msg.indices, msg.values};
  args.residualIn = in;
  args.gradType = c->dtype;
  args.valueType = c->wireType;
  args.valueLimit = c->valueLimit;
  args.stream = usesStreamingStores(c);
  DCTCHECK(msg.dense ? c->ops->selectDense(c->kernels, &args, stream) : c->ops->selectCompact(c->kernels, &args, stream));
  msg.nnz = args.nnz;
  return dctSuccess;
}

dctResult_t select(dctCompressor_t c, const void* grad, double tau, Message& msg, SelectArgs& args,
                   void* stream) {
  return selectRange(c, grad, 0, c->count, tau, msg, args, stream);
}

// compressStep's schedule: tau is re-estimated before selecting (every L
// steps, or after a step whose count drifted).
bool estimateDue(dctCompressor_t c) {
  return !c->tau.have || c->tau.driftPending ||
         c->stats.step - c->tau.lastEstimateStep >= static_cast<uint64_t>(c->config.thresholdInterval);
}

// Every buffer in the bound twin's memory: bound with it, freed with the
// compressor (one list, so a new buffer cannot be bound but not freed).
std::array<TwinBuffer*, 15> twinBuffers(dctCompressor_t c) {
  return {&c->residuals[0],        &c->residuals[1],       &c->selection,         &c->wire,
          &c->sent,                &c->gathered,           &c->staged,            &c->nodeSum,
          &c->owner.residuals[0],  &c->owner.residuals[1], &c->stream.state,      &c->stream.ownerState,
          &c->stream.received,     &c->stream.rangeSum,    &c->stream.ownerSlot};
}

}  // namespace

bool outsideDriftBand(double selected, double target, bool tauAtFloor) {
  const double low = std::min(target / kDriftBand, target - noise(target));
  const double high = std::max(target * kDriftBand, target + noise(target));
  return (selected < low && !tauAtFloor) || selected > high;
}

double tauFloor(dctCompressor_t c) {
  return c->accType == dctFloat64 ? std::numeric_limits<double>::denorm_min()
                                  : std::numeric_limits<float>::denorm_min();
}

dctResult_t selectNonzeros(dctCompressor_t c, const void* in, void* rest, size_t n, size_t capacity, void* outIndices,
                           void* outValues, SelectArgs& sel, void* stream) {
  sel = SelectArgs{};
  sel.grad = nullptr;
  sel.residualIn = in == rest ? nullptr : in;
  sel.residual = rest;
  sel.n = n;
  sel.dtype = c->accType;
  sel.indexBytes = c->indexBytes;
  sel.tau = tauFloor(c);
  sel.capacity = capacity;
  sel.outIndices = outIndices;
  sel.outValues = outValues;
  return c->ops->selectCompact(c->kernels, &sel, stream);
}

bool inWarmup(dctCompressor_t c) {
  return c->stats.step < static_cast<uint64_t>(c->config.warmupSteps);
}

bool sendsEveryNonzero(dctCompressor_t c) { return inWarmup(c) || c->config.density >= 1.0; }

bool usesStreamingStores(dctCompressor_t c) { return c->count * dtypeSize(c->accType) >= kStreamBytes; }

size_t targetNnz(dctCompressor_t c) {
  double k = std::round(c->config.density * static_cast<double>(c->count));
  return k < 1.0 ? 1 : static_cast<size_t>(k);
}

dctResult_t compressStep(dctCompressor_t c, const void* grad, Message& msg, StepDraft& d, void* stream) {
  const size_t k = targetNnz(c);
  const double minTau = tauFloor(c);
  d = StepDraft{};
  d.tau = c->tau;
  d.tau.starvedRun = 0;
  const bool everyNonzero = sendsEveryNonzero(c) || msg.everyNonzero;
  const void* from = grad;  // select from grad + residual, or from the materialised acc
  // Sending everything selects at the floor. The estimated tau is kept,
  // marked for re-estimation as the residual empties: left at the floor, it
  // made the next sparse step select everything and then redo it (10x its
  // time).
  auto tau = [&] { return everyNonzero ? minTau : d.tau.tau; };
  if (everyNonzero) {
    d.tau.driftPending = d.tau.have;
  } else if (estimateDue(c)) {
    DCTCHECK(estimateTau(c, grad, d, from, stream));
  }
  if (msg.storage) DCTCHECK(layOut(c, msg, msg.capacity > 2 * k ? msg.capacity : 2 * k + 64));
  SelectArgs args;
  DCTCHECK(select(c, from, tau(), msg, args, stream));
  bool fresh = d.estimates > 0;
  if (!fresh && !everyNonzero && runaway(d.tau, static_cast<double>(args.selected), k)) {
    DCTCHECK(estimateTau(c, grad, d, from, stream));
    DCTCHECK(select(c, from, tau(), msg, args, stream));
    fresh = true;
  } else if (!fresh && !everyNonzero && starvedSelection(args.selected, d.tau.tau, minTau)) {
    // Judged as a stale tau's count: past the band it drifts, and the
    // tightening below brings tau back to the top k of what was sent.
    DCTCHECK(estimateTau(c, grad, d, from, stream, drainDensity(c, c->tau.starvedRun)));
    DCTCHECK(select(c, from, tau(), msg, args, stream));
    d.tau.starvedRun = c->tau.starvedRun + 1;
  }
  if (!everyNonzero) judgeCount(d.tau, fresh, args.selected, k, tau() <= minTau);
  // Growable messages hold everything selected: make room and select again
  // from the untouched originals.
  if (msg.storage && args.selected > msg.nnz) {
    DCTCHECK(layOut(c, msg, args.selected));
    DCTCHECK(select(c, grad, tau(), msg, args, stream));
  }
  d.newResidual = c->config.errorFeedback != 0;  // without EF the zero residual stays
  d.residualZero = everyNonzero && c->wireType == c->accType;
  d.nnz = msg.dense && msg.everyNonzero ? c->count : msg.nnz;  // the dense plan sends every value
  d.nonFinite = args.nonFinite;
  d.threshold = everyNonzero ? 0.0 : d.tau.tau;
  if (!everyNonzero && !msg.dense && msg.nnz == args.selected && tightenDue(c, d, args.selected))
    DCTCHECK(tightenTau(c, d, msg.values, msg.nnz, stream));
  return dctSuccess;
}

dctResult_t beginChunkedStep(dctCompressor_t c, const void* grad, StepDraft& d, bool& fromGrad, void* stream) {
  d = StepDraft{};
  d.tau = c->tau;
  d.tau.starvedRun = 0;  // a starved chunked step is redone by compressStep
  const void* from = grad;
  if (estimateDue(c)) DCTCHECK(estimateTau(c, grad, d, from, stream));
  fromGrad = from != nullptr;
  return dctSuccess;
}

dctResult_t selectChunk(dctCompressor_t c, const void* grad, size_t lo, size_t n, const StepDraft& d, Message& msg,
                        SelectArgs& args, void* stream) {
  return selectRange(c, grad, lo, n, d.tau.tau, msg, args, stream);
}

bool chunkedStepRedo(dctCompressor_t c, const StepDraft& d, uint64_t selectedSoFar, bool allIn) {
  if (d.estimates > 0) return false;
  return runaway(d.tau, static_cast<double>(selectedSoFar), targetNnz(c)) ||
         (allIn && starvedSelection(selectedSoFar, d.tau.tau, tauFloor(c)));
}

void endChunkedStep(dctCompressor_t c, StepDraft& d, uint64_t selected, uint64_t nnz, uint64_t nonFinite) {
  judgeCount(d.tau, d.estimates > 0, selected, targetNnz(c), d.tau.tau <= tauFloor(c));
  d.newResidual = c->config.errorFeedback != 0;
  d.residualZero = false;
  d.nnz = nnz;
  d.nonFinite = nonFinite;
  d.threshold = d.tau.tau;
}

bool tightenDue(dctCompressor_t c, const StepDraft& d, uint64_t selected) {
  return d.tau.driftPending && selected > targetNnz(c) &&
         selected <= thresholdSampleSize(c->count, c->config.density);
}

dctResult_t tightenTau(dctCompressor_t c, StepDraft& d, const void* values, uint64_t nnz, void* stream) {
  const double k = static_cast<double>(targetNnz(c));
  // Right after a tightening aimed at a entries, the step selected nnz: a
  // growth of nnz / a, which aiming at k a / nnz cancels (steady error
  // feedback at 0.01% of 16M grew 1.2-1.6x a step, and each drift after a
  // tightening used to sample: 20-40 ms on every second step).
  const double aim = d.tau.tightenedTo ? std::clamp(k * static_cast<double>(d.tau.tightenedTo) / static_cast<double>(nnz),
                                                    k / 2, k)
                                       : k;
  const uint64_t target = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(aim)));
  ThresholdArgs args{values, nnz, c->wireType, static_cast<double>(target) / static_cast<double>(nnz), dctThresholdExact, 0};
  double kth = 0;
  DCTCHECK(c->ops->threshold(c->kernels, &args, &kth, stream));
  // A tie at tau, or at least k non-finite values: no tau to tighten to;
  // the next step estimates.
  if (!(kth > d.tau.tau) || !std::isfinite(kth)) return dctSuccess;
  d.tau.tau = kth;
  d.tau.driftPending = false;
  d.tau.tightenedTo = target;
  d.tau.acceptedCount = 0;
  d.estimates++;
  DCT_TRACE("step %llu: tau tightened to %g (%llu-th largest of %llu selected)", (unsigned long long)c->stats.step,
            d.tau.tau, (unsigned long long)target, (unsigned long long)nnz);
  return dctSuccess;
}

void commitStep(dctCompressor_t c, const StepDraft& d, size_t bytesSent, size_t bytesReceived,
                dctAlgorithm_t algo) {
  if (d.newResidual) {
    c->committed = 1 - c->committed;
    c->residualZero = d.residualZero;
  }
  c->tau = d.tau;
  dctStats_t& s = c->stats;
  s.thresholdEstimates += d.estimates;
  s.nnz = d.nnz;
  s.nonFinite = d.nonFinite;
  s.threshold = d.threshold;
  s.step++;
  s.bytesSent = bytesSent;
  s.bytesReceived = bytesReceived;
  s.denseBytes = c->count * dtypeSize(c->dtype);
  s.algorithm = algo;
  s.totalBytesSent += bytesSent;
  s.totalBytesReceived += bytesReceived;
  s.totalDenseBytes += s.denseBytes;
}

const KernelOps& twinFor(const void* ptr) {
  if (ptr == nullptr || !isDeviceMemory(ptr)) return cpuKernelOps();
  const DeviceComponent* cuda = deviceComponent();
  return cuda ? *cuda->kernels : missingDeviceOps();
}

dctResult_t bindOps(dctCompressor_t c, const KernelOps& twin, const char* fn, bool withResidual) {
  if (&twin == &missingDeviceOps())
    return fail(c->comm, dctNotSupported, "%s: the buffers are device memory but %s", fn, deviceComponentError());
  dctResult_t res = twin.createContext(&c->kernels);
  if (res != dctSuccess) return fail(c->comm, res, "%s: %s kernel workspace setup failed (%s)", fn, twin.name,
                                          dctGetErrorString(res));
  c->ops = &twin;
  for (TwinBuffer* b : twinBuffers(c)) b->bind(c->ops, c->kernels);
  if (!withResidual) return dctSuccess;
  // Unbound again: a later call retries from scratch (a held state stays held).
  auto unbind = [&] {
    for (TwinBuffer* b : twinBuffers(c)) b->reset();
    c->onebit.release();
    c->ops->destroyContext(c->kernels);
    c->kernels = nullptr;
    c->ops = nullptr;
  };
  const size_t bytes = c->count * dtypeSize(c->accType);
  res = c->residuals[0].reserve(bytes);
  if (res == dctSuccess) res = c->residuals[1].reserve(bytes);
  if (res == dctSuccess) res = c->ops->zero(c->kernels, c->residual(), bytes, nullptr);
  if (res == dctSuccess) res = c->ops->synchronize(c->kernels, nullptr);
  if (res != dctSuccess) {
    unbind();
    return fail(c->comm, res, "%s: cannot allocate the 2 x %zu-element residual (%s)", fn, c->count,
                dctGetErrorString(res));
  }
  c->residualZero = true;
  c->onebit.pending = false;
  c->stream.live = false;
  c->stream.agreed = false;
  c->owner.zero = true;
  c->owner.length = 0;
  c->owner.haveTau = false;
  if (!c->heldState.empty() && (res = applyHeldState(c, fn)) != dctSuccess) unbind();
  return res;
}

dctResult_t bindTwin(dctCompressor_t c, const void* buf, const char* fn) {
  const KernelOps& twin = twinFor(buf);
  if (c->ops != nullptr && c->ops->device == twin.device) return dctSuccess;
  if (c->ops != nullptr)
    return fail(c->comm, dctInvalidArgument, "%s: buffers are in %s memory but this compressor's state is in %s memory",
                fn, twin.device ? "device" : "host", c->ops->device ? "device" : "host");
  return bindOps(c, twin, fn);
}

dctResult_t compressorCreate(dctComm_t comm, int ranks, size_t count, dctDataType_t dtype,
                             const dctConfig_t& resolved, dctCompressor_t* out, int rank) {
  const dctDataType_t wire = wireTypeFor(resolved.wireType, dtype);
  if (wire == dctNumTypes)
    return fail(comm, dctInvalidArgument, "dctCompressorCreate: wireType %s is wider than the tensor's %s",
                dtypeName(static_cast<dctDataType_t>(resolved.wireType)), dtypeName(dtype));
  auto* c = new (std::nothrow) dctCompressor();
  if (c == nullptr) return fail(comm, dctOutOfMemory, "dctCompressorCreate: out of memory");
  c->comm = comm;
  c->ranks = ranks;
  c->rank = rank;
  c->count = count;
  c->dtype = dtype;
  c->accType = accumulationType(dtype);
  c->wireType = wire;
  c->valueLimit = sumSafeLimit(c->wireType, ranks);
  c->indexBytes = count > 0xffffffffull ? 8 : 4;
  c->config = resolved;
  c->config.wireType = wire;  // resolved: the type in use
  c->stats.indexBytes = c->indexBytes;
  c->stats.algorithm = resolved.algorithm;
  c->stats.denseBytes = count * dtypeSize(dtype);
  *out = c;
  return dctSuccess;
}

void compressorDestroy(dctCompressor_t c) {
  for (TwinBuffer* b : twinBuffers(c)) b->reset();
  c->onebit.release();
  if (c->kernels) c->ops->destroyContext(c->kernels);
  c->magic = 0;
  delete c;
}

}  // namespace dct
