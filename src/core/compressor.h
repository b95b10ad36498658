// DCT-DP compressor state machine: error-feedback residual, threshold tau and
// its schedule (every L steps, early on drift), warm-up, statistics.
#pragma once

#include <cstddef>
#include <vector>

#include "core/auto_tuner.h"
#include "core/onebit_state.h"
#include "core/owner_state.h"
#include "core/rank_arrays.h"
#include "core/stream_setup.h"
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
  bool everyNonzero = false;  // every nonzero entry goes, whatever tau (the dense plan)
};

inline size_t alignedIndexBytes(size_t nnz, int indexBytes) { return (nnz * indexBytes + 7) & ~size_t(7); }

// What every rank learns of every rank's message before an exchange.
struct RankMessage {
  uint64_t nnz;
  uint64_t bytes;       // on the wire (allgather: packed indices + values)
  uint64_t lastStepNs;  // this rank's previous step, less its waiting for the others (auto)
};

}  // namespace dct

namespace dct {

// The threshold schedule's state.
struct TauState {
  double tau = 0;
  bool have = false;
  uint64_t lastEstimateStep = 0;
  // Ties: when a fresh estimate still leaves the count outside the drift
  // band (many equal magnitudes, a tie no tau can split), that count is
  // accepted and drift re-estimates stop until the count leaves the band
  // around it, or the next scheduled estimate.
  uint64_t acceptedCount = 0;
  // The last step's count left the drift band: estimate before selecting.
  bool driftPending = false;
  // tau came from tightenTau, aimed at this many entries, and no step has
  // been in the band with it yet (0: not so): a drift up now measures error
  // feedback's growth since, which the next tightening anticipates.
  uint64_t tightenedTo = 0;
  // Steps in a row whose tau, not fresh, selected nothing (compressor.cc:
  // each estimates again at once, the later ones aimed higher).
  uint32_t starvedRun = 0;
};

// What one step would change, held aside until every rank has succeeded
// (commitStep); a failed step drops it and leaves the compressor as before.
struct StepDraft {
  TauState tau;
  uint64_t estimates = 0;  // tau estimates made
  uint64_t nnz = 0, nonFinite = 0;
  double threshold = 0;
  bool newResidual = false;  // the spare residual holds this step's residual
  bool residualZero = false; // ... and it is all zeros (everything sent, no rounding)
};

}  // namespace dct

struct dctCompressor {
  static constexpr unsigned kMagic = 0xdc7c0cc1u;
  unsigned magic = kMagic;
  dctComm_t comm = nullptr;
  int ranks = 1, rank = 0;  // the comm's size and this rank (1-bit chunks, global top-k ranges)
  size_t count = 0;
  dctDataType_t dtype = dctFloat32;     // the tensor's (sendbuf, recvbuf)
  dctDataType_t accType = dctFloat32;   // residual and sums: fp32 for half tensors
  dctDataType_t wireType = dctFloat32;  // the values sent (config.wireType)
  double valueLimit = 0;  // sent magnitudes clamp here when wireType is narrower than accType
  int indexBytes = 4;
  dctConfig_t config{};  // resolved: no undefined fields
  // The twin is bound on the first step, from where the buffers live; the
  // state then stays in that memory space.
  const dct::KernelOps* ops = nullptr;
  dct::KernelContext* kernels = nullptr;
  // Two residuals: a step reads the committed one and writes the spare
  // (same memory traffic as in place), so a failed step leaves the
  // committed residual untouched and commit is a swap.
  dct::TwinBuffer residuals[2];
  int committed = 0;
  bool residualZero = true;   // the committed residual is all zeros
  dct::TwinBuffer selection;  // this step's COO (allreduce)
  dct::TwinBuffer wire;       // the same, packed for the wire
  dct::TwinBuffer sent;       // global top-k, ownerReturn: the COO again, past the owner's select
  dct::TwinBuffer gathered;   // all ranks' messages (allgather algorithm)
  dct::TwinBuffer staged;     // in-place calls: the result until the step commits
  dct::TwinBuffer nodeSum;    // hierarchical steps on a node leader: the node's sum
  std::vector<dct::RankMessage> lastMessages;  // every rank's, last step (auto's forecast)
  dct::RankArrays rankArrays;  // a step's per-rank tables, reserved before its agreement
  // The pipelined allreduce's last committed attempt: bytes each rank's
  // chunk needed ([chunk * ranks + rank]), which size the next one's slots.
  std::vector<uint64_t> chunkNeeds;
  size_t chunkElems = 0;
  dct::AutoTuner tuner;     // auto: measured correction of the cost model
  uint64_t lastStepNs = 0;  // this rank's previous step, less its waiting for the others (auto)
  uint64_t lastLocalNs = 0; // of which its local work (compress and reduce phases)
  dct::TauState tau;
  dctStats_t stats{};
  // 1-bit compressors (config.compressor): the server error and the step's
  // wire buffers; the worker error is the residual above.
  dct::OnebitState onebit;
  // Global top-k (dctAlgoGlobalTopk): this rank's range-owner residual.
  dct::OwnerState owner;
  // The fixed-capacity mode (config.capacityFactor): the state its steps
  // keep in the twin's memory.
  dct::StreamSetup stream;
  // A state loaded (dctCompressorLoadState) before the compressor was
  // bound: the blob, whose arrays go to the buffers as they are allocated
  // (bindOps); its scalars took effect at the load.
  std::vector<unsigned char> heldState;

  void* residual() const { return residuals[committed].as(); }
  void* spareResidual() const { return residuals[1 - committed].as(); }
};

namespace dct {

inline bool validCompressor(dctCompressor_t c) {
  return c != nullptr && c->magic == dctCompressor::kMagic;
}

// ranks: comm's size (1 without a comm), which bounds the wire values so
// that their sum over the ranks stays finite; rank: this rank in it.
dctResult_t compressorCreate(dctComm_t comm, int ranks, size_t count, dctDataType_t dtype,
                             const dctConfig_t& resolved, dctCompressor_t* out, int rank = 0);
void compressorDestroy(dctCompressor_t c);

// Binds the compressor to the twin that owns `buf` (first call allocates and
// zeroes the residual there, then applies a held loaded state);
// dctInvalidArgument if buf lives elsewhere.
dctResult_t bindTwin(dctCompressor_t c, const void* buf, const char* fn);
// Binds to an explicit ops table (tests: fault-injecting twins).
// withResidual false: buffers only, no residual allocated (the sparse-input
// allreduce's scratch, which has none).
dctResult_t bindOps(dctCompressor_t c, const KernelOps& ops, const char* fn, bool withResidual = true);
// The twin that owns ptr's memory: CUDA for device pointers, else CPU.
const KernelOps& twinFor(const void* ptr);
// The 1-bit state's buffers (onebit_state.h) in c's twin, the server error
// zeroed: on the first 1-bit step, or a load; nothing when already set up.
// On failure nothing is left set up.
dctResult_t onebitSetUp(dctCompressor_t c, void* stream);
// The arena layout of c's 1-bit step (its count, ranks and segments).
OnebitArena onebitArenaOf(dctCompressor_t c);

bool inWarmup(dctCompressor_t c);
// A count outside the drift band around `target`: [target / 1.25, 1.25
// target], widened to 3 sqrt(target) either way for small targets; a low
// count does not count when tau is at its floor (nothing more to select).
bool outsideDriftBand(double selected, double target, bool tauAtFloor);
// The smallest positive tau of the accumulation type: every nonzero entry
// (and every NaN and Inf) meets it.
double tauFloor(dctCompressor_t c);
// selectCompact of the nonzeros (NaN and Inf too: tau at its floor) of n
// accumulation-type entries at `in`: at most `capacity` of them into
// outIndices / outValues, the rest into `rest` (`in` itself: in place).
// `sel` holds the select's arguments and results (nnz, selected).
dctResult_t selectNonzeros(dctCompressor_t c, const void* in, void* rest, size_t n, size_t capacity, void* outIndices,
                           void* outValues, SelectArgs& sel, void* stream);
// Every nonzero entry is sent this step (warm-up, density 1).
bool sendsEveryNonzero(dctCompressor_t c);
// The tensor is past kStreamBytes: its new residual and its merged result
// are streamed out.
bool usesStreamingStores(dctCompressor_t c);
// The selection size the density asks for: k = max(1, round(density * count)).
size_t targetNnz(dctCompressor_t c);

// One DCT-DP step of grad into msg (at most msg.capacity entries; entries
// that do not fit stay in the residual). Reads the committed state only and
// writes the spare residual and `draft`; nothing is committed.
dctResult_t compressStep(dctCompressor_t c, const void* grad, Message& msg, StepDraft& draft, void* stream);
// The same step chunk by chunk (the pipelined allreduce), bit for bit what
// compressStep selects unless the selection runs away or, all chunks in,
// selected nothing (compressStep then re-estimates at once: the caller
// discards the chunks and calls it):
//  * beginChunkedStep: tau for the step, estimated on the whole accumulator
//    when due; fromGrad says whether chunks select from grad + residual
//    (pass grad to selectChunk) or from that accumulator materialised in the
//    spare residual (pass null; bisect's estimate writes it);
//  * selectChunk: entries [lo, lo + n) into msg, indices counted from lo;
//  * chunkedStepRedo: true once the chunks so far selected so many, or
//    (allIn: every chunk selected) so few, that compressStep would
//    re-estimate;
//  * endChunkedStep: the draft's counts (and the drift verdict) once every
//    chunk is in.
dctResult_t beginChunkedStep(dctCompressor_t c, const void* grad, StepDraft& draft, bool& fromGrad, void* stream);
dctResult_t selectChunk(dctCompressor_t c, const void* grad, size_t lo, size_t n, const StepDraft& draft,
                        Message& msg, SelectArgs& args, void* stream);
bool chunkedStepRedo(dctCompressor_t c, const StepDraft& draft, uint64_t selectedSoFar, bool allIn);
void endChunkedStep(dctCompressor_t c, StepDraft& draft, uint64_t selected, uint64_t nnz, uint64_t nonFinite);

// After a step whose count drifted up: tau becomes the k-th largest |value|
// it selected (values: its nnz wire values, in the twin's memory), the exact
// top-k threshold of this step's accumulator, for nnz keys instead of the
// next step's sample of the tensor (at density 1e-4, 2^20 random gathers:
// 20-40 ms a step here); right after another tightening, aimed at a, the
// (k a / nnz)-th largest, within [k/2, k], cancelling the growth since.
// tightenDue: drifted up, and the selection no larger than that sample. A
// tie at tau (the k-th largest is tau itself) leaves the drift to the next
// estimate. compressStep tightens by itself.
bool tightenDue(dctCompressor_t c, const StepDraft& draft, uint64_t selected);
dctResult_t tightenTau(dctCompressor_t c, StepDraft& draft, const void* values, uint64_t nnz, void* stream);

// Makes a step's draft the compressor's state and ends the step (counter,
// byte counters, algorithm).
void commitStep(dctCompressor_t c, const StepDraft& draft, size_t bytesSent, size_t bytesReceived,
                dctAlgorithm_t algo);

}  // namespace dct
