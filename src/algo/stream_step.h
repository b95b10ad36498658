// dctSparseAllreduce in the fixed-capacity mode (stream_step.cc).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "dct/dct.h"
#include "kernels/stream_args.h"

namespace dct {

// One fixed-capacity step of c (fixedCapacity(c), past its warm-up), whose
// buffers were checked locally (localError; a count that is not the
// compressor's fails the step on every rank). On
// a host twin the same transaction as sparseAllreduce; on a device it is
// queued on `stream` and its outcome arrives asynchronously
// (dctCommGetAsyncError).
dctResult_t streamStep(const void* sendbuf, void* recvbuf, size_t count, const dctRedOp_t& op, dctCompressor_t c, dctComm_t comm,
                       void* stream, dctResult_t localError, const char* fn);

// What the fixed-capacity step and the 1-bit allreduce's queued step
// (onebit_step.cc) share:
//
// The digest their slots carry: `values` mixed into `seed` (splitmix64).
uint64_t digestOf(uint64_t seed, std::initializer_list<uint64_t> values);
//
// A device twin's outcome arrives after the call returns (tests may ask a
// host twin to behave so: StreamSetup::asyncForTesting).
bool asynchronous(dctCompressor_t c);
// The vote over a.state->vote: in place where the transport has one for
// the twin's memory, else through the host (host twins, staged MPI).
dctResult_t voteOnTwin(dctCompressor_t c, dctComm_t comm, const StreamStepArgs& a, void* stream);
// A queued step's return: this rank's own failure, else the comm's sticky
// error as it was before the step was queued (asyncBefore).
dctResult_t queuedOutcome(dctComm_t comm, dctResult_t local, int32_t asyncBefore, const char* fn);

}  // namespace dct
