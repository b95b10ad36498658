// The 1-bit allreduce's queued step (algo/onebit_step.cc) as stream-ordered
// ops: its sizes are fixed by the count and the ranks, and every value a
// step reads or changes lives in the twin's memory (StreamState's 1-bit
// fields: which error buffers are committed, the scales their kept x left
// with, this step's scales and its non-finite flag), so nothing is read
// back to the host and the launches are the same on every call.
//
//   onebitStepCompress (worker)  sendbuf + the committed worker error into
//                                the worker slots; x kept in the spare
//                                residual, the scale into draftTau
//   (alltoallv of the worker slots)
//   onebitStepCompress (server)  the mean of the received slots + the
//                                committed server error into the server
//                                slot; x kept in the spare server error,
//                                the scale into draftServerScale
//   (allgather of the server slots)
//   onebitStepCheck              vote = *failed (halted), else
//                                dctInvalidUsage where a received or
//                                gathered slot's digest is not this rank's
//                                (the ranks' calls differ), else 0;
//                                draftNonFinite = some gathered scale is NaN
//   (streamPost of the host's failures, the vote, streamCommit with onebit:
//    stream_args.h's onebitAdvance)
//   onebitStepDecode             a committed step's result into `result`
//                                (NaN everywhere when draftNonFinite)
//
// Both compressions write `digest` into the last 8 bytes of each slot they
// fill (onebitDigestOffset). They are not gated on *failed: they write only
// the spare buffers, the slots and the draft, which a dropped step never
// reads. Both twins compute the same bits as onebitCompress/onebitDecode
// (onebit_kernels.h), keepX on, with the state's pending scales.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dct/dct.h"
#include "kernels/stream_args.h"

namespace dct {

struct OnebitStepArgs {
  StreamState* state;
  int32_t* failed;  // the comm's sticky error, device-visible
  // The worker: the tensor and its error (the compressor's residuals).
  const void* input;
  dctDataType_t dtype;
  size_t n;
  void* errors[2];
  // The server: this rank's chunk and its error.
  size_t serverN;
  void* serverErrors[2];
  // The arena (core/onebit_state.h): slots of slotBytes, chunkWords words each.
  void* workerSlots;          // one per server
  const void* receivedSlots;  // every rank's signs of this rank's chunk
  void* serverSlot;
  const void* gatheredSlots;  // every server's slot: the result
  size_t slotBytes;           // with the digest (kOnebitDigestBytes)
  size_t chunkWords;
  int ranks;
  uint64_t digest;  // the call's arguments (every rank's must match)
  double* scratch;  // onebitScratchBytes(n)
  // The result.
  void* result;   // dtype, n elements
  double factor;  // dctSum: ranks, dctAvg: 1
};

}  // namespace dct
