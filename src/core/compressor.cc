#include "core/compressor.h"

#include <cmath>
#include <initializer_list>
#include <limits>
#include <new>

#include "base/debug.h"
#include "base/half_types.h"
#include "base/memory_space.h"
#include "transport/comm.h"

namespace dct {
namespace {

// Drift band: a selection outside [k / band, k * band] re-estimates tau and
// selects again in the same step. DESIGN.md suggests 4; a loose band lets
// the message double while error feedback fills the residual (measured: 2x
// k within 30 steps at L = 1000), halving the compression users asked for.
constexpr double kDriftBand = 1.25;


// Drift: count outside [k / band, k * band]. An accepted tie count gets
// its own band (TauState::acceptedCount).
bool drifted(const TauState& t, double selected, size_t k, bool tauAtFloor) {
  auto outside = [&](double target) {
    return (selected < target / kDriftBand && !tauAtFloor) || selected > target * kDriftBand;
  };
  if (!outside(static_cast<double>(k))) return false;
  return t.acceptedCount == 0 || outside(static_cast<double>(t.acceptedCount));
}

// acc = grad + committed residual, materialised in the spare residual.
dctResult_t materialise(dctCompressor_t c, const void* grad, void* stream) {
  return c->ops->add(c->kernels, c->spareResidual(), c->residual(), grad, c->count, c->accType, c->dtype, stream);
}

// tau from the accumulator in the spare residual.
dctResult_t estimateTau(dctCompressor_t c, StepDraft& d, void* stream) {
  ThresholdArgs args{c->spareResidual(), c->count, c->accType, c->config.density,
                     static_cast<dctThresholdMethod_t>(c->config.thresholdMethod), stepSeed(c->config.seed, c->stats.step)};
  DCTCHECK(c->ops->threshold(c->kernels, &args, &d.tau.tau, stream));
  d.tau.have = true;
  d.tau.lastEstimateStep = c->stats.step;
  d.tau.acceptedCount = 0;
  d.estimates++;
  DCT_TRACE("step %llu: tau re-estimated to %g", (unsigned long long)c->stats.step, d.tau.tau);
  return dctSuccess;
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

// Selects from acc into msg and the spare residual. With grad, acc is
// grad + committed residual (the originals are never modified, so a select
// can always be redone); without, acc is already in the spare residual.
dctResult_t select(dctCompressor_t c, const void* grad, double tau, Message& msg, SelectArgs& args,
                   void* stream) {
  void* out = c->spareResidual();
  const void* in = grad ? c->residual() : out;
  args = msg.dense ? SelectArgs{grad, out, c->count, c->accType, c->indexBytes, tau, c->count, nullptr, msg.dense}
                   : SelectArgs{grad, out, c->count, c->accType, c->indexBytes, tau, msg.capacity, msg.indices, msg.values};
  args.residualIn = in;
  args.gradType = c->dtype;
  args.valueType = c->wireType;
  args.valueLimit = c->valueLimit;
  DCTCHECK(msg.dense ? c->ops->selectDense(c->kernels, &args, stream) : c->ops->selectCompact(c->kernels, &args, stream));
  msg.nnz = args.nnz;
  return dctSuccess;
}

}  // namespace

bool inWarmup(dctCompressor_t c) {
  return c->stats.step < static_cast<uint64_t>(c->config.warmupSteps);
}

bool sendsAll(dctCompressor_t c) { return inWarmup(c) || c->config.density >= 1.0; }

size_t targetNnz(dctCompressor_t c) {
  double k = std::round(c->config.density * static_cast<double>(c->count));
  return k < 1.0 ? 1 : static_cast<size_t>(k);
}

dctResult_t compressStep(dctCompressor_t c, const void* grad, Message& msg, StepDraft& d, void* stream) {
  const size_t k = targetNnz(c);
  const double tauFloor = c->accType == dctFloat64 ? std::numeric_limits<double>::denorm_min()
                                                 : std::numeric_limits<float>::denorm_min();
  d = StepDraft{};
  d.tau = c->tau;
  const bool sendAll = sendsAll(c) || msg.everything;
  const void* from = grad;  // select from grad + residual, or from the materialised acc
  if (sendAll) {
    d.tau.tau = tauFloor;  // every nonzero entry goes
  } else if (!d.tau.have ||
             c->stats.step - d.tau.lastEstimateStep >= static_cast<uint64_t>(c->config.thresholdInterval)) {
    DCTCHECK(materialise(c, grad, stream));
    DCTCHECK(estimateTau(c, d, stream));
    from = nullptr;
  }
  if (msg.storage) DCTCHECK(layOut(c, msg, msg.capacity > 2 * k ? msg.capacity : 2 * k + 64));
  SelectArgs args;
  DCTCHECK(select(c, from, d.tau.tau, msg, args, stream));
  if (from != nullptr && !sendAll && drifted(d.tau, static_cast<double>(args.selected), k, d.tau.tau <= tauFloor)) {
    DCTCHECK(materialise(c, grad, stream));
    DCTCHECK(estimateTau(c, d, stream));
    DCTCHECK(select(c, nullptr, d.tau.tau, msg, args, stream));
    // Still outside: a tie no tau splits. Accept it rather than
    // re-estimating every step.
    if (drifted(TauState{}, static_cast<double>(args.selected), k, d.tau.tau <= tauFloor))
      d.tau.acceptedCount = args.selected > 0 ? args.selected : 1;
  }
  // Growable messages hold everything selected: make room and select again
  // from the untouched originals.
  if (msg.storage && args.selected > msg.nnz) {
    DCTCHECK(layOut(c, msg, args.selected));
    DCTCHECK(select(c, grad, d.tau.tau, msg, args, stream));
  }
  d.newResidual = c->config.errorFeedback != 0;  // without EF the zero residual stays
  d.residualZero = sendAll && c->wireType == c->accType;
  d.nnz = msg.dense && msg.everything ? c->count : msg.nnz;  // the dense plan sends every value
  d.nonFinite = args.nonFinite;
  d.threshold = sendAll ? 0.0 : d.tau.tau;
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
#if DCT_HAVE_CUDA
  if (ptr != nullptr && isDeviceMemory(ptr)) return cudaKernelOps();
#endif
  (void)ptr;
  return cpuKernelOps();
}

dctResult_t bindOps(dctCompressor_t c, const KernelOps& twin, const char* fn) {
  dctResult_t res = twin.createContext(&c->kernels);
  if (res != dctSuccess) return fail(c->comm, res, "%s: %s kernel workspace setup failed", fn, twin.name);
  c->ops = &twin;
  for (TwinBuffer* b : {&c->residuals[0], &c->residuals[1], &c->selection, &c->wire, &c->gathered, &c->staged})
    b->bind(c->ops, c->kernels);
  const size_t bytes = c->count * dtypeSize(c->accType);
  res = c->residuals[0].reserve(bytes);
  if (res == dctSuccess) res = c->residuals[1].reserve(bytes);
  if (res == dctSuccess) res = c->ops->zero(c->kernels, c->residual(), bytes, nullptr);
  if (res == dctSuccess) res = c->ops->synchronize(c->kernels, nullptr);
  if (res != dctSuccess) {
    // Unbound again: a later call retries from scratch.
    for (TwinBuffer* b : {&c->residuals[0], &c->residuals[1]}) b->reset();
    c->ops->destroyContext(c->kernels);
    c->kernels = nullptr;
    c->ops = nullptr;
    return fail(c->comm, res, "%s: cannot allocate the 2 x %zu-element residual", fn, c->count);
  }
  c->residualZero = true;
  return dctSuccess;
}

dctResult_t bindTwin(dctCompressor_t c, const void* buf, const char* fn) {
  const KernelOps& twin = twinFor(buf);
  if (c->ops != nullptr && c->ops->device == twin.device) return dctSuccess;
  if (c->ops != nullptr)
    return fail(c->comm, dctInvalidArgument, "%s: buffers are in %s memory but this compressor's state is in %s memory",
                fn, twin.device ? "device" : "host", c->ops->device ? "device" : "host");
  return bindOps(c, twin, fn);
}

dctResult_t compressorCreate(dctComm_t comm, size_t count, dctDataType_t dtype,
                             const dctConfig_t& resolved, dctCompressor_t* out) {
  const int wire = resolved.wireType == kWireTypeOfTensor ? dtype : resolved.wireType;
  if (dtypeSize(static_cast<dctDataType_t>(wire)) > dtypeSize(dtype))
    return fail(comm, dctInvalidArgument, "dctCompressorCreate: wireType %s is wider than the tensor's %s",
                dtypeName(static_cast<dctDataType_t>(wire)), dtypeName(dtype));
  auto* c = new (std::nothrow) dctCompressor();
  if (c == nullptr) return fail(comm, dctOutOfMemory, "dctCompressorCreate: out of memory");
  c->comm = comm;
  c->count = count;
  c->dtype = dtype;
  c->accType = accumulationType(dtype);
  c->wireType = static_cast<dctDataType_t>(wire);
  c->valueLimit = sumSafeLimit(c->wireType, comm ? comm->size : 1);
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
  for (TwinBuffer* b : {&c->residuals[0], &c->residuals[1], &c->selection, &c->wire, &c->gathered, &c->staged})
    b->reset();
  c->onebit.release();
  if (c->kernels) c->ops->destroyContext(c->kernels);
  c->magic = 0;
  delete c;
}

}  // namespace dct
