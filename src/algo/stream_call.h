// What the fixed-capacity step's plans share (stream_step.cc: the
// allgather of slots; stream_global_topk.cc: global top-k's fixed pieces).
#pragma once

#include "dct/dct.h"
#include "kernels/stream_args.h"

namespace dct {

struct StreamCall {
  const void* send;
  void* recv;
  dctRedOp_t op;
  dctCompressor_t c;
  dctComm_t comm;
  void* stream;
};

// The worker's op arguments for one step: one slot of c->stream.capacity
// entries, the sum built in `target`.
StreamStepArgs stepArgs(const StreamCall& k, void* target);

// Global top-k with fixed pieces (stream_global_topk.cc):
//
// The sizes, buffers and transport room, once (the first step's agreement).
dctResult_t reserveGlobalTopk(dctCompressor_t c, dctComm_t comm, void* stream);
// An owner residual of another range (a loaded state, another comm) moves
// into the worker residual before the state is published (global_topk.h).
dctResult_t foldForStream(dctCompressor_t c, void* stream);
// The step's ops and collectives in order, `a` the worker's arguments from
// stepArgs; as queueStep, a failure seen here is posted into the vote and
// the collectives run regardless.
dctResult_t queueGlobalTopk(const StreamCall& k, const StreamStepArgs& a, dctResult_t local);

}  // namespace dct
