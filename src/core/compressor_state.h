// A compressor's whole state in and out of a host byte string
// (dctCompressorSaveState / dctCompressorLoadState): the layout and its
// parsing are state_blob.h; this is where the state comes from and goes to.
//
// Saved: statistics, the tau schedule (tau, the step counter the sampled
// estimator's PRNG and the L-step schedule run on, drift, tie and starvation
// state), auto's message history, the worker residual (a 1-bit compressor's
// as the x its error is formed from, with its scale), the 1-bit server error
// with its pending flag and scale, global top-k's owner residual and its own
// schedule. Not saved: auto's tuner (it re-learns), scratch buffers.
#pragma once

#include <cstddef>

#include "core/compressor.h"

namespace dct {

// What dctCompressorSaveState writes for c now, in bytes.
dctResult_t savedStateBytes(dctCompressor_t c, size_t* bytes);
// Writes c's state into out (savedStateBytes long, host memory); arrays come
// off the twin on `stream`, then synchronized.
dctResult_t saveState(dctCompressor_t c, unsigned char* out, size_t bytes, void* stream, const char* fn);
// Replaces c's state with a saved one, all or nothing: the arrays are copied
// into the spare buffers (on `stream`, then synchronized) and swapped in
// only once all are there. An unbound compressor takes the scalars at once
// and holds the blob until bindOps, which applies its arrays.
// dctInvalidArgument (nothing changed) for a blob that is malformed or
// does not fit c (count, types, comm size, rank, config).
dctResult_t loadState(dctCompressor_t c, const unsigned char* in, size_t bytes, void* stream, const char* fn);
// bindOps, after allocating the residual: the held blob's arrays go in.
dctResult_t applyHeldState(dctCompressor_t c, const char* fn);

}  // namespace dct
