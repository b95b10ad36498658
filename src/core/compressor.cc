#include "core/compressor.h"

#include <cmath>
#include <initializer_list>
#include <limits>
#include <new>

#include "base/debug.h"
#include "base/memory_space.h"

namespace dct {
namespace {

// Drift band: a selection outside [k / band, k * band] re-estimates tau and
// selects again in the same step. DESIGN.md suggests 4; a loose band lets
// the message double while error feedback fills the residual (measured: 2x
// k within 30 steps at L = 1000), halving the compression users asked for.
constexpr double kDriftBand = 1.25;

// Per-step sample stream: the same on every run, different every step.
uint64_t sampleSeed(dctCompressor_t c) {
  uint64_t s = static_cast<uint64_t>(c->config.seed) ^ (c->stats.step * 0xd1b54a32d192ed03ull);
  return splitmix64(s);
}

dctResult_t estimateTau(dctCompressor_t c, void* stream) {
  ThresholdArgs args{c->residual.as(), c->count, c->dtype, c->config.density,
                     static_cast<dctThresholdMethod_t>(c->config.thresholdMethod), sampleSeed(c)};
  DCTCHECK(c->ops->threshold(c->kernels, &args, &c->tau, stream));
  c->haveTau = true;
  c->lastEstimateStep = c->stats.step;
  c->stats.thresholdEstimates++;
  DCT_INFO("step %llu: tau re-estimated to %g", (unsigned long long)c->stats.step, c->tau);
  return dctSuccess;
}

dctResult_t layOut(dctCompressor_t c, Message& msg, size_t capacity) {
  size_t idxBytes = alignedIndexBytes(capacity, c->indexBytes);
  DCTCHECK(msg.storage->reserve(idxBytes + capacity * dtypeSize(c->dtype)));
  msg.indices = msg.storage->as();
  msg.values = msg.storage->as<char>() + idxBytes;
  msg.capacity = capacity;
  return dctSuccess;
}

dctResult_t select(dctCompressor_t c, const void* grad, Message& msg, SelectArgs& args,
                   void* stream) {
  if (msg.dense) {
    args = SelectArgs{grad, c->residual.as(), c->count, c->dtype, c->indexBytes,
                      c->tau, c->count, nullptr, msg.dense};
    DCTCHECK(c->ops->selectDense(c->kernels, &args, stream));
  } else {
    args = SelectArgs{grad, c->residual.as(), c->count, c->dtype, c->indexBytes,
                      c->tau, msg.capacity, msg.indices, msg.values};
    DCTCHECK(c->ops->selectCompact(c->kernels, &args, stream));
  }
  msg.nnz = args.nnz;
  return dctSuccess;
}

// Puts the written entries back (their residual slots were zeroed), so the
// residual holds this step's full accumulator again.
dctResult_t undo(dctCompressor_t c, const Message& msg, void* stream) {
  if (msg.dense) return c->ops->accumulate(c->kernels, c->residual.as(), msg.dense, c->count, c->dtype, stream);
  ScatterArgs back{c->residual.as(), c->count, c->dtype, c->indexBytes,
                   msg.indices, msg.values, msg.nnz, true};
  return c->ops->scatterAdd(c->kernels, &back, stream);
}

}  // namespace

bool inWarmup(dctCompressor_t c) {
  return c->stats.step < static_cast<uint64_t>(c->config.warmupSteps);
}

size_t targetNnz(dctCompressor_t c) {
  double k = std::round(c->config.density * static_cast<double>(c->count));
  return k < 1.0 ? 1 : static_cast<size_t>(k);
}

dctResult_t compressStep(dctCompressor_t c, const void* grad, Message& msg, void* stream) {
  const size_t k = targetNnz(c);
  const double tauFloor = c->dtype == dctFloat64 ? std::numeric_limits<double>::denorm_min()
                                                 : std::numeric_limits<float>::denorm_min();
  bool estimated = false;
  const bool sendAll = inWarmup(c) || c->config.density >= 1.0;
  if (sendAll) {
    c->tau = tauFloor;  // every nonzero entry goes
  } else if (!c->haveTau ||
             c->stats.step - c->lastEstimateStep >= static_cast<uint64_t>(c->config.thresholdInterval)) {
    DCTCHECK(c->ops->accumulate(c->kernels, c->residual.as(), grad, c->count, c->dtype, stream));
    grad = nullptr;  // the residual now holds the accumulator
    DCTCHECK(estimateTau(c, stream));
    estimated = true;
  }
  if (msg.storage) DCTCHECK(layOut(c, msg, msg.capacity > 2 * k ? msg.capacity : 2 * k + 64));
  SelectArgs args;
  DCTCHECK(select(c, grad, msg, args, stream));
  // Drift: the count left the band around k since tau was set.
  const double selected = static_cast<double>(args.selected);
  bool tooFew = selected < k / kDriftBand && c->tau > tauFloor;
  bool tooMany = selected > k * kDriftBand;
  if (!estimated && !sendAll && (tooFew || tooMany)) {
    DCTCHECK(undo(c, msg, stream));
    DCTCHECK(estimateTau(c, stream));
    DCTCHECK(select(c, nullptr, msg, args, stream));
  }
  // Growable messages hold everything selected: make room and select again.
  if (msg.storage && args.selected > msg.nnz) {
    DCTCHECK(undo(c, msg, stream));
    DCTCHECK(layOut(c, msg, args.selected));
    DCTCHECK(select(c, nullptr, msg, args, stream));
  }
  if (!c->config.errorFeedback)
    DCTCHECK(c->ops->zero(c->kernels, c->residual.as(), c->count * dtypeSize(c->dtype), stream));
  c->stats.nnz = msg.nnz;
  c->stats.nonFinite = args.nonFinite;
  c->stats.threshold = sendAll ? 0.0 : c->tau;
  return dctSuccess;
}

dctResult_t accumulateDense(dctCompressor_t c, const void* grad, void* stream) {
  return c->ops->accumulate(c->kernels, c->residual.as(), grad, c->count, c->dtype, stream);
}

dctResult_t clearResidual(dctCompressor_t c, void* stream) {
  return c->ops->zero(c->kernels, c->residual.as(), c->count * dtypeSize(c->dtype), stream);
}

void finishStep(dctCompressor_t c, size_t bytesSent, size_t bytesReceived, dctAlgorithm_t algo) {
  dctStats_t& s = c->stats;
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

dctResult_t bindTwin(dctCompressor_t c, const void* buf, const char* fn) {
  const KernelOps& twin = twinFor(buf);
  if (c->ops == &twin) return dctSuccess;
  if (c->ops != nullptr)
    return fail(c->comm, dctInvalidArgument, "%s: buffers are in %s memory but this compressor's state is in %s memory",
                fn, twin.device ? "device" : "host", c->ops->device ? "device" : "host");
  dctResult_t res = twin.createContext(&c->kernels);
  if (res != dctSuccess) return fail(c->comm, res, "%s: %s kernel workspace setup failed", fn, twin.name);
  c->ops = &twin;
  for (TwinBuffer* b : {&c->residual, &c->selection, &c->wire, &c->gathered}) b->bind(c->ops, c->kernels);
  res = c->residual.reserve(c->count * dtypeSize(c->dtype));
  if (res == dctSuccess) res = clearResidual(c, nullptr);
  if (res == dctSuccess) res = c->ops->synchronize(c->kernels, nullptr);
  if (res != dctSuccess) return fail(c->comm, res, "%s: cannot allocate the %zu-element residual", fn, c->count);
  return dctSuccess;
}

dctResult_t compressorCreate(dctComm_t comm, size_t count, dctDataType_t dtype,
                             const dctConfig_t& resolved, dctCompressor_t* out) {
  auto* c = new (std::nothrow) dctCompressor();
  if (c == nullptr) return fail(comm, dctOutOfMemory, "dctCompressorCreate: out of memory");
  c->comm = comm;
  c->count = count;
  c->dtype = dtype;
  c->indexBytes = count > 0xffffffffull ? 8 : 4;
  c->config = resolved;
  c->stats.indexBytes = c->indexBytes;
  c->stats.algorithm = resolved.algorithm;
  c->stats.denseBytes = count * dtypeSize(dtype);
  *out = c;
  return dctSuccess;
}

void compressorDestroy(dctCompressor_t c) {
  for (TwinBuffer* b : {&c->residual, &c->selection, &c->wire, &c->gathered}) b->reset();
  if (c->kernels) c->ops->destroyContext(c->kernels);
  c->magic = 0;
  delete c;
}

}  // namespace dct
