// DCT-DP compressor state machine: error-feedback residual, threshold tau and
// its schedule (every L steps, early on drift), warm-up, statistics.
#pragma once

#include <cstddef>
#include <vector>

#include "core/auto_tuner.h"
#include "core/twin_buffer.h"
#include "dct/dct.h"
#include "kernels/kernels.h"

namespace dct {

// A COO message: ascending indices and values, written by compressStep.
// With `storage` set, compressStep lays the message out in it (indices, then
// values) and grows it so nothing is held back. With `dense` set, the
// selection is written densely there instead (zeros elsewhere, no indices).
struct Message {
  void* indices = nullptr;
  void* values = nullptr;
  size_t capacity = 0;
  size_t nnz = 0;
  TwinBuffer* storage = nullptr;
  void* dense = nullptr;
};

inline size_t alignedIndexBytes(size_t nnz, int indexBytes) { return (nnz * indexBytes + 7) & ~size_t(7); }

// What every rank learns of every rank's message before an exchange.
struct RankMessage {
  uint64_t nnz;
  uint64_t bytes;       // on the wire (allgather: packed indices + values)
  uint64_t lastStepNs;  // this rank's wall time of its previous step (auto)
};

}  // namespace dct

struct dctCompressor {
  static constexpr unsigned kMagic = 0xdc7c0cc1u;
  unsigned magic = kMagic;
  dctComm_t comm = nullptr;
  size_t count = 0;
  dctDataType_t dtype = dctFloat32;
  int indexBytes = 4;
  dctConfig_t config{};  // resolved: no undefined fields
  // The twin is bound on the first step, from where the buffers live; the
  // state then stays in that memory space.
  const dct::KernelOps* ops = nullptr;
  dct::KernelContext* kernels = nullptr;
  dct::TwinBuffer residual;   // count elements; holds acc between the passes of a step
  dct::TwinBuffer selection;  // this step's COO (allreduce)
  dct::TwinBuffer wire;       // the same, packed for the wire
  dct::TwinBuffer gathered;   // all ranks' messages (allgather algorithm)
  std::vector<dct::RankMessage> lastMessages;  // every rank's, last step (auto's forecast)
  dct::AutoTuner tuner;     // auto: measured correction of the cost model
  uint64_t lastStepNs = 0;  // wall time of this rank's previous step
  double tau = 0;
  bool haveTau = false;
  uint64_t lastEstimateStep = 0;
  dctStats_t stats{};
};

namespace dct {

inline bool validCompressor(dctCompressor_t c) {
  return c != nullptr && c->magic == dctCompressor::kMagic;
}

dctResult_t compressorCreate(dctComm_t comm, size_t count, dctDataType_t dtype,
                             const dctConfig_t& resolved, dctCompressor_t* out);
void compressorDestroy(dctCompressor_t c);

// Binds the compressor to the twin that owns `buf` (first call allocates and
// zeroes the residual there); dctInvalidArgument if buf lives elsewhere.
dctResult_t bindTwin(dctCompressor_t c, const void* buf, const char* fn);
// The twin that owns ptr's memory: CUDA for device pointers, else CPU.
const KernelOps& twinFor(const void* ptr);

bool inWarmup(dctCompressor_t c);
// The selection size the density asks for: k = max(1, round(density * count)).
size_t targetNnz(dctCompressor_t c);

// One DCT-DP step of grad into msg (at most msg.capacity entries; entries
// that do not fit stay in the residual). Updates tau and stats.nnz,
// stats.nonFinite, stats.threshold; does not advance the step counter.
dctResult_t compressStep(dctCompressor_t c, const void* grad, Message& msg, void* stream);
// Warm-up: residual += grad (the caller sends the residual densely, then
// calls clearResidual).
dctResult_t accumulateDense(dctCompressor_t c, const void* grad, void* stream);
dctResult_t clearResidual(dctCompressor_t c, void* stream);
// Ends a step: step counter, byte counters, algorithm.
void finishStep(dctCompressor_t c, size_t bytesSent, size_t bytesReceived, dctAlgorithm_t algo);

}  // namespace dct
